package main

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseRsh(t *testing.T) {
	tests := []struct {
		args            []string
		host, command   string
		wantErrContains string
	}{
		// Open MPI: agent host orted args...
		{args: []string{"w-0.j.ns.svc", "orted", "-mca", "ess", "env"}, host: "w-0.j.ns.svc", command: "orted -mca ess env"},
		// Hydra passes -x (no X11) before the host.
		{args: []string{"-x", "w-1.j.ns.svc", "/usr/bin/hydra_pmi_proxy", "--control-port", "h:1"}, host: "w-1.j.ns.svc", command: "/usr/bin/hydra_pmi_proxy --control-port h:1"},
		{args: []string{"-l", "mpiuser", "-p", "22", "h", "true"}, host: "h", command: "true"},
		{args: []string{"-x"}, wantErrContains: "no host"},
		{args: []string{"h"}, wantErrContains: "interactive logins are not supported"},
	}
	for _, tc := range tests {
		host, command, err := parseRsh(tc.args)
		if tc.wantErrContains != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErrContains) {
				t.Errorf("parseRsh(%q) error = %v, want %q", tc.args, err, tc.wantErrContains)
			}
			continue
		}
		if err != nil || host != tc.host || command != tc.command {
			t.Errorf("parseRsh(%q) = %q, %q, %v; want %q, %q", tc.args, host, command, err, tc.host, tc.command)
		}
	}
}

func TestPodOf(t *testing.T) {
	ns, pod, err := podOf("j-workerset-ws0-1.j.team-a.svc.cluster.local")
	if err != nil || ns != "team-a" || pod != "j-workerset-ws0-1" {
		t.Errorf("podOf = %q, %q, %v; want team-a, j-workerset-ws0-1", ns, pod, err)
	}
	t.Setenv("POD_NAMESPACE", "own")
	if ns, pod, _ := podOf("bare"); ns != "own" || pod != "bare" {
		t.Errorf("a bare host = %s/%s, want own/bare", ns, pod)
	}
}

func TestHostsToWaitForSkipsItself(t *testing.T) {
	self, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "hostfile")
	text := self + ".j.ns.svc slots=1\nw-0.j.ns.svc slots=2\nw-1.j.ns.svc slots=2\n"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := hostsToWaitFor(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"w-0.j.ns.svc", "w-1.j.ns.svc"}, got); diff != "" {
		t.Errorf("hosts (-want +got):\n%s", diff)
	}
}

func TestWaitForHostsUntilReachable(t *testing.T) {
	up := map[string]int{"a": 1, "b": 3} // reachable from the n-th check on
	calls := map[string]int{}
	check := func(_ context.Context, h string) error {
		calls[h]++
		if calls[h] < up[h] {
			return errors.New("not yet")
		}
		return nil
	}
	missing, err := waitForHosts(context.Background(), []string{"a", "b"}, 2, check, time.Millisecond, io.Discard)
	if len(missing) != 0 || err != nil {
		t.Fatalf("missing %v, err %v; want every host reached", missing, err)
	}
	if calls["a"] != 1 || calls["b"] != 3 {
		t.Errorf("checks = %v: a reachable host was checked again, or b not until it came up", calls)
	}

	// An elastic launcher starts with its minimum: b is never needed.
	onlyA := func(_ context.Context, h string) error {
		if h == "a" {
			return nil
		}
		return errors.New("connection refused")
	}
	missing, err = waitForHosts(context.Background(), []string{"a", "b"}, 1, onlyA, time.Millisecond, io.Discard)
	if diff := cmp.Diff([]string{"b"}, missing); diff != "" || err != nil {
		t.Errorf("with need 1: missing %v, err %v; want done with b still missing", missing, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	never := func(context.Context, string) error { return errors.New("connection refused") }
	missing, err = waitForHosts(ctx, []string{"a", "b"}, 2, never, time.Millisecond, io.Discard)
	if diff := cmp.Diff([]string{"a", "b"}, missing); diff != "" || err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("on timeout: missing %v, err %v; want both hosts and the last error", missing, err)
	}
}

// serve answers every connection on a local port with banner.
func serve(t *testing.T, banner string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte(banner))
			_ = c.Close()
		}
	}()
	return l.Addr().String()
}

func TestSSHBanner(t *testing.T) {
	if err := sshBanner(context.Background(), serve(t, "SSH-2.0-OpenSSH_9.2\r\n")); err != nil {
		t.Errorf("sshd refused: %v", err)
	}
	if err := sshBanner(context.Background(), serve(t, "HTTP/1.1 400 Bad Request\r\n")); err == nil {
		t.Errorf("a web server counted as sshd")
	}
}

// The wait command as the init container runs it: it installs the agent, succeeds when every
// host answers, and on timeout exits 3 with the missing hosts in the termination message.
func TestWaitCommand(t *testing.T) {
	dir := t.TempDir()
	addr := serve(t, "SSH-2.0-test\r\n")
	_, port, _ := net.SplitHostPort(addr)
	hostfile := filepath.Join(dir, "hostfile")
	if err := os.WriteFile(hostfile, []byte("localhost slots=2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if code := run([]string{"troupe-agent", "wait", "--hostfile=" + hostfile, "--transport=SSH", "--port=" + port,
		"--timeout=10s", "--interval=10ms", "--install-to=" + bin}); code != 0 {
		t.Fatalf("wait for a reachable host exited %d", code)
	}
	if target, err := os.Readlink(filepath.Join(bin, rshName)); err != nil || target != "troupe-agent" {
		t.Errorf("%s link = %q, %v; want it to point at troupe-agent", rshName, target, err)
	}
	if fi, err := os.Stat(filepath.Join(bin, "troupe-agent")); err != nil || fi.Mode().Perm()&0o111 == 0 {
		t.Errorf("troupe-agent not installed as an executable: %v", err)
	}

	if err := os.WriteFile(hostfile, []byte("localhost slots=1\nnowhere.invalid slots=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	termLog := filepath.Join(dir, "termination-log")
	code := waitWithLog(t, termLog, "--hostfile="+hostfile, "--transport=SSH", "--port="+port, "--timeout=300ms", "--interval=10ms")
	if code != 3 {
		t.Fatalf("wait with a missing host exited %d, want 3", code)
	}
	msg, err := os.ReadFile(termLog)
	if err != nil || !strings.Contains(string(msg), "1 of 2 hosts still unreachable over SSH after 300ms: nowhere.invalid") {
		t.Errorf("termination message = %q, %v; want the missing host named", msg, err)
	}

	// Debug mode: the launcher comes up even when a worker runs no sshd.
	if code := waitWithLog(t, termLog, "--hostfile="+hostfile, "--transport=SSH", "--port="+port, "--timeout=300ms", "--interval=10ms", "--best-effort"); code != 0 {
		t.Errorf("best-effort wait with a missing host exited %d, want 0", code)
	}
}

func waitWithLog(t *testing.T, termLog string, args ...string) int {
	t.Helper()
	old := terminationLogPath
	terminationLogPath = termLog
	defer func() { terminationLogPath = old }()
	return wait(args)
}
