package mpi

import (
	"crypto/ed25519"
	"encoding/pem"
	"fmt"
	"io"
	"strings"

	"golang.org/x/crypto/ssh"
)

// Keys of the per-job SSH Secret. The Secret holds the launcher's client key pair, the
// authorized_keys the workers accept it with, the job's host key pair, which every pod's sshd
// presents, and the known_hosts that pins that host key for the job's host names.
const (
	SSHClientKey     = "id_ed25519"
	SSHClientPubKey  = "id_ed25519.pub"
	SSHAuthorizedKey = "authorized_keys"
	SSHHostKey       = "ssh_host_ed25519_key"
	SSHHostPubKey    = "ssh_host_ed25519_key.pub"
	SSHKnownHosts    = "known_hosts"
)

// NewSSHKeyMaterial generates a job's SSH key material: a fresh ed25519 client key pair, a
// fresh ed25519 host key pair, and a known_hosts pinning the host key for every host name under
// hostDomain (the job's headless Service domain, "<job>.<namespace>.svc"). It is the data of
// the job's Secret. Every job gets its own; keys are never shared between jobs and never logged.
func NewSSHKeyMaterial(rand io.Reader, hostDomain string) (map[string][]byte, error) {
	client, clientPub, err := ed25519Pair(rand, "troupe-launcher")
	if err != nil {
		return nil, fmt.Errorf("client key: %w", err)
	}
	host, hostPub, err := ed25519Pair(rand, "troupe-host")
	if err != nil {
		return nil, fmt.Errorf("host key: %w", err)
	}
	knownHosts, err := KnownHosts(hostDomain, hostPub)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{
		SSHClientKey:     client,
		SSHClientPubKey:  clientPub,
		SSHAuthorizedKey: clientPub,
		SSHHostKey:       host,
		SSHHostPubKey:    hostPub,
		SSHKnownHosts:    []byte(knownHosts),
	}, nil
}

// ed25519Pair returns an OpenSSH-format private key and its authorized_keys-format public key.
func ed25519Pair(rand io.Reader, comment string) (private, public []byte, err error) {
	pub, priv, err := ed25519.GenerateKey(rand)
	if err != nil {
		return nil, nil, err
	}
	block, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		return nil, nil, err
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return nil, nil, err
	}
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sshPub))) + " " + comment + "\n"
	return pem.EncodeToMemory(block), []byte(line), nil
}

// KnownHosts pins the job's host key for every host name under hostDomain, on any port, so
// the launcher connects with StrictHostKeyChecking=yes instead of trusting whatever answers.
// The names are patterns rather than a list, so hosts added by scaling a worker set are
// covered without rewriting the file; they match the short form the hostfile uses and the
// fully qualified form with the cluster domain.
func KnownHosts(hostDomain string, hostPubKey []byte) (string, error) {
	key, _, _, _, err := ssh.ParseAuthorizedKey(hostPubKey)
	if err != nil {
		return "", fmt.Errorf("parse host public key: %w", err)
	}
	short, fqdn := "*."+hostDomain, "*."+hostDomain+".*"
	patterns := strings.Join([]string{short, fqdn, "[" + short + "]:*", "[" + fqdn + "]:*"}, ",")
	return patterns + " " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key))) + "\n", nil
}

// SSHDConfig is the sshd_config of every pod. It works for a non-root user: it listens on an
// unprivileged port by default, keeps its pid file in dir, does not switch users (no privilege
// separation is possible without root), and accepts only the job's client key. dir holds the
// Secret's files (host key, authorized_keys), mounted read-only.
// rootLogin leaves root a key login (the seeds' images run MPI as root); without it, for
// workers that run as a non-root user, root cannot log in at all.
func SSHDConfig(port int32, dir string, rootLogin bool) string {
	permitRoot := "no"
	if rootLogin {
		permitRoot = "prohibit-password"
	}
	return fmt.Sprintf(`# sshd for troupe MPI jobs: public-key login with the job's own key only.
Port %d
HostKey %s/%s
AuthorizedKeysFile %s/%s
PidFile none
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
# Root: a key login where the workers may run as root (the seeds' images run MPI as root,
# mpirun --allow-run-as-root); none where they run as another user.
PermitRootLogin %s
UsePAM no
# The Secret's files are mounted by Kubernetes with modes sshd's owner checks would refuse.
StrictModes no
# MPI launchers start one session per remote daemon and forward nothing: no TCP, stream-local,
# agent or X11 forwarding.
DisableForwarding yes
PermitUserEnvironment no
PrintMotd no
# MPI's own variables only: never PATH or LD_LIBRARY_PATH, which would choose the programs and
# libraries a session runs (MPI forwards its environment through its daemons, not sshd).
AcceptEnv OMPI_* PRTE_* PMIX_* HYDRA_* I_MPI_* NCCL_*
# INFO logs every accepted and failed login (to the container's log with -e).
LogLevel INFO
`, port, dir, SSHHostKey, dir, SSHAuthorizedKey, permitRoot)
}

// SSHClientConfig is the launcher's ssh_config: the job's key (identityFile), the pinned
// known_hosts, strict host key checking, and the port every worker's sshd listens on.
func SSHClientConfig(port int32, identityFile, knownHostsPath string) string {
	return fmt.Sprintf(`# ssh client for troupe MPI launchers.
Host *
  Port %d
  IdentityFile %s
  IdentitiesOnly yes
  UserKnownHostsFile %s
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
  PasswordAuthentication no
  BatchMode yes
  LogLevel ERROR
`, port, identityFile, knownHostsPath)
}

// SSHAgentScript is the rsh-compatible agent MPI launchers call to start a remote process:
// ssh with the job's client configuration. Launchers call it as "agent [options] host command";
// ssh accepts the options they pass (-x from Hydra, none from Open MPI).
func SSHAgentScript(clientConfigPath string) string {
	return fmt.Sprintf("#!/bin/sh\n# Generated by troupe: start a remote MPI process over the job's SSH.\nexec ssh -F %s \"$@\"\n", clientConfigPath)
}
