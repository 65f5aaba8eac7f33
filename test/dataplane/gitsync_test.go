package dataplane

import (
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/backend/mpi"
)

// The git init container of appCodesToSync, the real troupe-agent binary, clones a private
// repository from a real git server over SSH: Debian's sshd and git-upload-pack on this
// machine, reached with a deploy key laid out as the pod sees the user's Secret (files "ssh"
// and "known_hosts"). A server whose host key known_hosts does not pin is refused at once.
func TestGitSyncOverSSH(t *testing.T) {
	for _, f := range []string{mpi.DefaultSSHDPath, "/usr/bin/git-upload-pack"} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("the git-sync test needs %s: install it with hack/dataplane-deps.sh (make test-dataplane does)", f)
		}
	}
	if os.Geteuid() != 0 {
		t.Fatal("the git-sync test runs sshd as root, which it logs in as: run it as root (make test-dataplane)")
	}
	dir := t.TempDir()
	agent := filepath.Join(dir, "troupe-agent")
	runIn(t, "", "go", "build", "-o", agent, "../../cmd/troupe-agent")

	// A private repository: a bare clone of a one-commit repository with examples/ in it.
	src := filepath.Join(dir, "src")
	must(t, os.MkdirAll(filepath.Join(src, "examples"), 0o755))
	must(t, os.WriteFile(filepath.Join(src, "examples", "train.py"), []byte("print('hello')\n"), 0o644))
	runIn(t, "", "git", "init", "-q", "-b", "main", src)
	runIn(t, src, "git", "add", ".")
	runIn(t, src, "git", "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "first")
	repo := filepath.Join(dir, "app.git")
	runIn(t, "", "git", "clone", "-q", "--bare", src, repo)

	keys, err := mpi.NewSSHKeyMaterial(rand.Reader, "unused.svc")
	must(t, err)
	server := filepath.Join(dir, "server")
	must(t, os.MkdirAll(server, 0o700))
	must(t, os.WriteFile(filepath.Join(server, "host_key"), keys[mpi.SSHHostKey], 0o600))
	must(t, os.WriteFile(filepath.Join(server, "authorized_keys"), keys[mpi.SSHClientPubKey], 0o600))
	port := freePort(t)
	must(t, os.WriteFile(filepath.Join(server, "sshd_config"), fmt.Appendf(nil, `Port %d
ListenAddress 127.0.0.1
HostKey %s/host_key
AuthorizedKeysFile %s/authorized_keys
PidFile none
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
StrictModes no
LogLevel ERROR
`, port, server, server), 0o600))
	must(t, os.MkdirAll("/run/sshd", 0o755)) // sshd's privilege separation directory
	sshd := exec.Command(mpi.DefaultSSHDPath, "-D", "-e", "-f", filepath.Join(server, "sshd_config"))
	sshd.Stderr = os.Stderr
	must(t, sshd.Start())
	t.Cleanup(func() { _ = sshd.Process.Kill(); _ = sshd.Wait() })
	waitForPort(t, port)

	// The deploy key as the init container sees the user's Secret.
	hostPub := strings.Fields(string(keys[mpi.SSHHostPubKey]))
	secret := filepath.Join(dir, "secret")
	must(t, os.MkdirAll(secret, 0o755))
	must(t, os.WriteFile(filepath.Join(secret, troupev1.GitSecretSSHKey), keys[mpi.SSHClientKey], 0o444))
	knownHosts := fmt.Sprintf("[127.0.0.1]:%d %s %s\n", port, hostPub[0], hostPub[1])
	must(t, os.WriteFile(filepath.Join(secret, troupev1.GitSecretKnownHosts), []byte(knownHosts), 0o444))

	url := fmt.Sprintf("ssh://root@127.0.0.1:%d%s", port, repo)
	dest := filepath.Join(dir, "code")
	termLog := filepath.Join(dir, "termination-log")
	out, code := runAgent(agent, "git-sync", "--repo="+url, "--branch=main", "--dest="+dest, "--ssh-dir="+secret, "--timeout=60s", "--termination-log="+termLog)
	if code != 0 {
		t.Fatalf("git-sync over SSH exited %d:\n%s", code, out)
	}
	if got, err := os.ReadFile(filepath.Join(dest, "examples", "train.py")); err != nil || string(got) != "print('hello')\n" {
		t.Errorf("examples/train.py = %q, %v; want the repository's file", got, err)
	}
	t.Logf("git-sync over SSH:\n%s", out)

	// Another server's key in known_hosts: refused at once, not retried until the timeout.
	other, err := mpi.NewSSHKeyMaterial(rand.Reader, "unused.svc")
	must(t, err)
	otherPub := strings.Fields(string(other[mpi.SSHHostPubKey]))
	must(t, os.Chmod(filepath.Join(secret, troupev1.GitSecretKnownHosts), 0o644))
	must(t, os.WriteFile(filepath.Join(secret, troupev1.GitSecretKnownHosts), fmt.Appendf(nil, "[127.0.0.1]:%d %s %s\n", port, otherPub[0], otherPub[1]), 0o644))
	start := time.Now()
	out, code = runAgent(agent, "git-sync", "--repo="+url, "--dest="+filepath.Join(dir, "code2"), "--ssh-dir="+secret, "--timeout=60s", "--termination-log="+termLog)
	if code != 1 || time.Since(start) > 20*time.Second {
		t.Errorf("a server with another host key: exit %d after %s, want 1 at once:\n%s", code, time.Since(start), out)
	}
	if msg, _ := os.ReadFile(termLog); !strings.Contains(string(msg), "key mismatch") {
		t.Errorf("termination message %q does not say the host key did not match", msg)
	}
}

func runIn(t *testing.T, dir, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

func runAgent(agent string, args ...string) (string, int) {
	cmd := exec.Command(agent, args...)
	out, err := cmd.CombinedOutput()
	if err != nil && cmd.ProcessState == nil {
		return err.Error(), -1
	}
	return string(out), cmd.ProcessState.ExitCode()
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

func waitForPort(t *testing.T, port int) {
	t.Helper()
	deadline := time.Now().Add(sshdReadyTimeout)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			_ = c.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("sshd did not listen on port %d within %s", port, sshdReadyTimeout)
}
