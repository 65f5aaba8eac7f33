package mpi

import (
	"bytes"
	"crypto/rand"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func material(t *testing.T) map[string][]byte {
	t.Helper()
	m, err := NewSSHKeyMaterial(rand.Reader, "j.ns.svc")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// pinnedKey is the host key the known_hosts file of m pins.
func pinnedKey(t *testing.T, m map[string][]byte) ssh.PublicKey {
	t.Helper()
	fields := strings.Fields(string(m[SSHKnownHosts]))
	if len(fields) != 3 {
		t.Fatalf("known_hosts = %q, want one line: patterns, key type, key", m[SSHKnownHosts])
	}
	key, _, _, _, err := ssh.ParseAuthorizedKey([]byte(fields[1] + " " + fields[2]))
	if err != nil {
		t.Fatalf("known_hosts key does not parse: %v", err)
	}
	return key
}

// handshake runs an SSH server over TCP holding server's host key and authorized_keys, and a
// client with client's key that trusts only the host key client's known_hosts pins. It
// returns the client's error (nil when the client got in).
func handshake(t *testing.T, server, client map[string][]byte) error {
	t.Helper()
	hostKey, err := ssh.ParsePrivateKey(server[SSHHostKey])
	if err != nil {
		t.Fatalf("parse host key: %v", err)
	}
	authorized, _, _, _, err := ssh.ParseAuthorizedKey(server[SSHAuthorizedKey])
	if err != nil {
		t.Fatalf("parse authorized_keys: %v", err)
	}
	cfg := &ssh.ServerConfig{PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
		if bytes.Equal(k.Marshal(), authorized.Marshal()) {
			return &ssh.Permissions{}, nil
		}
		return nil, errors.New("unauthorized key")
	}}
	cfg.AddHostKey(hostKey)
	signer, err := ssh.ParsePrivateKey(client[SSHClientKey])
	if err != nil {
		t.Fatalf("parse client key: %v", err)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	go func() {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		_, _, _, _ = ssh.NewServerConn(conn, cfg)
		_ = conn.Close()
	}()
	c, err := ssh.Dial("tcp", l.Addr().String(), &ssh.ClientConfig{
		User: "mpiuser", Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: ssh.FixedHostKey(pinnedKey(t, client)),
		Timeout:         10 * time.Second,
	})
	if c != nil {
		_ = c.Close()
	}
	return err
}

func TestSSHKeyMaterial(t *testing.T) {
	a, b := material(t), material(t)
	for _, k := range []string{SSHClientKey, SSHClientPubKey, SSHAuthorizedKey, SSHHostKey, SSHHostPubKey, SSHKnownHosts} {
		if len(a[k]) == 0 {
			t.Errorf("key material lacks %s", k)
		}
	}
	if bytes.Equal(a[SSHClientKey], b[SSHClientKey]) || bytes.Equal(a[SSHHostKey], b[SSHHostKey]) {
		t.Errorf("two jobs got the same keys")
	}
	if bytes.Equal(a[SSHClientKey], a[SSHHostKey]) {
		t.Errorf("the client key doubles as the host key")
	}
	if !bytes.HasPrefix(a[SSHClientKey], []byte("-----BEGIN OPENSSH PRIVATE KEY-----")) {
		t.Errorf("client key is not in OpenSSH format")
	}
}

// The generated files let the job's launcher in, pinned to the job's host key, and nobody else.
func TestSSHFilesHandshake(t *testing.T) {
	job, other := material(t), material(t)
	if err := handshake(t, job, job); err != nil {
		t.Errorf("the job's own launcher was refused: %v", err)
	}
	if err := handshake(t, job, other); err == nil {
		t.Errorf("another job's launcher got in")
	}
	if err := handshake(t, other, job); err == nil {
		t.Errorf("the launcher trusted a host holding another job's host key")
	}
}

func TestKnownHostsPatterns(t *testing.T) {
	m := material(t)
	patterns := strings.Fields(string(m[SSHKnownHosts]))[0]
	want := "*.j.ns.svc,*.j.ns.svc.*,[*.j.ns.svc]:*,[*.j.ns.svc.*]:*"
	if patterns != want {
		t.Errorf("known_hosts names = %q, want %q (the job's domain, short and qualified, any port)", patterns, want)
	}
	if _, err := KnownHosts("j.ns.svc", []byte("not a key")); err == nil {
		t.Errorf("a bad host key was accepted")
	}
}

func TestSSHConfigs(t *testing.T) {
	sshd := SSHDConfig(2222, "/etc/troupe/ssh", true)
	for _, want := range []string{"Port 2222\n", "HostKey /etc/troupe/ssh/ssh_host_ed25519_key\n",
		"AuthorizedKeysFile /etc/troupe/ssh/authorized_keys\n", "PasswordAuthentication no\n", "PidFile none\n"} {
		if !strings.Contains(sshd, want) {
			t.Errorf("sshd_config lacks %q:\n%s", want, sshd)
		}
	}
	client := SSHClientConfig(2222, "/etc/troupe/ssh/id_ed25519", "/etc/troupe/ssh/known_hosts")
	for _, want := range []string{"Port 2222\n", "StrictHostKeyChecking yes\n", "UserKnownHostsFile /etc/troupe/ssh/known_hosts\n"} {
		if !strings.Contains(client, want) {
			t.Errorf("ssh_config lacks %q:\n%s", want, client)
		}
	}
	if got := SSHAgentScript("/c"); !strings.Contains(got, `exec ssh -F /c "$@"`) {
		t.Errorf("agent script = %q", got)
	}
}

// Root may log in with a key only where the workers may run as root; where every worker set's
// main container runs as another user, not at all.
func TestSSHDRootLogin(t *testing.T) {
	s := chainerSpec()
	for i := range s.WorkerSets {
		s.WorkerSets[i].Template = template("chainer")
	}
	if got := (SSH{}).ConfigFiles(s)[SSHDConfigKey]; !strings.Contains(got, "PermitRootLogin prohibit-password\n") {
		t.Errorf("workers whose user the image chooses: sshd_config says\n%s", got)
	}
	for i := range s.WorkerSets {
		s.WorkerSets[i].Template.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000)}
	}
	if got := (SSH{}).ConfigFiles(s)[SSHDConfigKey]; !strings.Contains(got, "PermitRootLogin no\n") {
		t.Errorf("workers running as uid 1000: sshd_config says\n%s", got)
	}
	if got := (SSH{}).ConfigFiles(nil)[SSHDConfigKey]; !strings.Contains(got, "PermitRootLogin prohibit-password\n") {
		t.Errorf("no spec: sshd_config says\n%s", got)
	}
	s.WorkerSets[0].Template.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsUser: ptr.To[int64](0)}
	if got := (SSH{}).ConfigFiles(s)[SSHDConfigKey]; !strings.Contains(got, "PermitRootLogin prohibit-password\n") {
		t.Errorf("a worker container running as root: sshd_config says\n%s", got)
	}
}
