package main

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The reap script, run by a shell as in a worker pod, kills a process started through
// troupe-rsh (a shell with the marker exported, as markedCommand builds it) and what it forked
// into a session of its own, and leaves a process without the marker alone.
func TestReapScript(t *testing.T) {
	start := func(command string) *exec.Cmd {
		t.Helper()
		cmd := exec.Command("/bin/sh", "-c", command)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	marked := start(markedCommand("launcher-'x", "exec sleep 300"))
	other := start("exec sleep 301")
	// Wait until the marked shell has exec'd sleep with the marker in its environment.
	for deadline := time.Now().Add(10 * time.Second); ; {
		env, _ := os.ReadFile("/proc/" + itoa(marked.Process.Pid) + "/environ")
		if strings.Contains(string(env), launchMarker+"=launcher-'x") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the marked process never carried %s", launchMarker)
		}
		time.Sleep(20 * time.Millisecond)
	}
	out, err := exec.Command("/bin/sh", "-c", reapScript).CombinedOutput()
	if err != nil {
		t.Fatalf("reap script: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "1" {
		t.Errorf("reap script killed %s processes, want 1", got)
	}
	if err := marked.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("the marked process ended with %v, want killed", err)
	}
	if err := other.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the unmarked process is gone: %v", err)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
