package demo

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The README's "Using it" block, run line by line as written against a local cluster of its
// own: the CRDs applied, `make run` (in the background, as a user runs it in a second
// terminal), the examples created, listed and waited for. The operator out of the cluster used to
// stop at start: the webhook certificate Secret it needs was never made by these steps.
func TestMakeRunAsTheReadmeSays(t *testing.T) {
	lines := readmeBlockWith(t, "make run")
	const cluster = "trp-make-run"
	up := exec.Command(filepath.Join(repoRoot, "hack", "controlplane", "cluster-up.sh"))
	up.Env = append(os.Environ(), "CLUSTER_NAME="+cluster, "CLUSTER_ADDONS=")
	var upErr bytes.Buffer
	up.Stderr = &upErr
	t.Cleanup(func() {
		down := exec.Command(filepath.Join(repoRoot, "hack", "controlplane", "cluster-down.sh"))
		down.Env = append(os.Environ(), "CLUSTER_NAME="+cluster)
		if out, err := down.CombinedOutput(); err != nil {
			t.Errorf("cluster-down %s: %v\n%s", cluster, err, out)
		}
	})
	out, err := up.Output()
	if err != nil {
		t.Fatalf("cluster-up %s: %v\n%s", cluster, err, upErr.String())
	}
	outLines := strings.Split(strings.TrimSpace(string(out)), "\n")
	kubeconfig := outLines[len(outLines)-1]

	ports := map[string]int{"WEBHOOK_PORT": freePort(t), "METRICS_PORT": freePort(t), "HEALTH_PORT": freePort(t)}
	env := append(os.Environ(), "KUBECONFIG="+kubeconfig, "PATH="+kubeBin(t)+":"+os.Getenv("PATH"))
	for k, v := range ports {
		env = append(env, fmt.Sprintf("%s=%d", k, v))
	}
	for _, line := range lines {
		if line == "make run" {
			startMakeRun(t, env, ports["HEALTH_PORT"])
			continue
		}
		cmd := exec.Command("bash", "-c", line)
		cmd.Dir, cmd.Env = repoRoot, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("$ %s\n%s\n%v", line, out, err)
		}
		t.Logf("$ %s\n%s", line, out)
	}
}

// readmeBlockWith returns the commands of the README's sh block holding the line want: comments
// dropped, blank lines skipped.
func readmeBlockWith(t *testing.T, want string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, block := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(string(data), -1) {
		var lines []string
		found := false
		for _, l := range strings.Split(block[1], "\n") {
			l, _, _ = strings.Cut(l, " #")
			l = strings.TrimSpace(l)
			if l == "" || strings.HasPrefix(l, "#") {
				continue
			}
			found = found || l == want
			lines = append(lines, l)
		}
		if found {
			return lines
		}
	}
	t.Fatalf("README.md has no sh block with the line %q", want)
	return nil
}

// startMakeRun runs `make run` in a process group of its own, waits until the operator is ready
// and stops the group when the test ends.
func startMakeRun(t *testing.T, env []string, healthPort int) {
	t.Helper()
	log, err := os.Create(filepath.Join(t.TempDir(), "make-run.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("make", "run")
	cmd.Dir, cmd.Env = repoRoot, env
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("make run's output:\n%s", tail(string(b), 60))
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // make build, cold, first
	defer cancel()
	ready := fmt.Sprintf("http://127.0.0.1:%d/readyz", healthPort)
	for {
		if resp, err := http.Get(ready); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case err := <-exited:
			b, _ := os.ReadFile(log.Name())
			t.Fatalf("make run exited (%v):\n%s", err, tail(string(b), 60))
		case <-ctx.Done():
			b, _ := os.ReadFile(log.Name())
			t.Fatalf("make run's operator not ready at %s after 5 min:\n%s", ready, tail(string(b), 60))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// freePort is a port of 127.0.0.1 free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// kubeBin is the directory of the cluster's kubectl (hack/versions.mk's KUBE_VERSION), which
// cluster-up.sh builds: the README's kubectl, whatever kubectl the machine has.
func kubeBin(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("bash", "-c", "source hack/controlplane/lib.sh && echo $KUBE_BIN")
	cmd.Dir = repoRoot
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("KUBE_BIN: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
