package realnode

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestPluginLogsFollow follows a running job's logs with kubectl-troupe: a ChainerJob whose
// master prints three lines and ends, and whose one worker prints three lines and runs until
// the operator releases it (cleanPodPolicy Running). `kubectl troupe logs -f` returns by itself
// when the job ends, with every line of both pods, each prefixed with its pod and container.
func TestPluginLogsFollow(t *testing.T) {
	t.Parallel() // beside the other job tests, after the install tests (suite_test.go)
	needOperator(t)
	ns := namespace(t, "realnode-plugin-logs")
	describeOnFailure(t, ns)
	plugin := filepath.Join(t.TempDir(), "kubectl-troupe")
	if out, err := exec.Command("go", "build", "-o", plugin, filepath.Join(repoRoot, "cmd", "kubectl-troupe")).CombinedOutput(); err != nil {
		t.Fatalf("build kubectl-troupe: %v\n%s", err, out)
	}

	job := realNodeChainerJob("logs", "", "for i in 1 2 3; do echo master line $i; sleep 1; done",
		"for i in 1 2 3; do echo worker line $i; done; while true; do sleep 1 & wait; done")
	mustKubectl(t, job, "apply", "-n", ns, "-f", "-")

	// The plugin follows the pods that exist when it starts: wait for both (the worker's
	// StatefulSet and the master's Job are created together, their pods within seconds).
	deadline := time.Now().Add(2 * time.Minute)
	for {
		out, _ := kubectl("", "get", "pods", "-n", ns, "-o", "name")
		if strings.Count(out, "pod/") == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job's two pods did not appear:\n%s", out)
		}
		time.Sleep(time.Second)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, plugin, "logs", "-n", ns, "chainerjob/logs", "-f", "--kubeconfig", kubeconfig)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl troupe logs -f: %v (after %.0fs)\nstdout:\n%s\nstderr:\n%s", err, time.Since(start).Seconds(), stdout.String(), stderr.String())
	}
	t.Logf("kubectl troupe logs -f returned after %.0fs:\n%s", time.Since(start).Seconds(), stdout.String())
	if _, err := waitCondition(t, ns, "chainerjob.troupe.dev/logs", "Succeeded", time.Minute); err != nil {
		t.Errorf("the job did not succeed: %v", err)
	}
	for _, want := range []string{
		`^\[pod/logs-master-[a-z0-9]+/chainer\] master line 1$`, `^\[pod/logs-master-[a-z0-9]+/chainer\] master line 3$`,
		`^\[pod/logs-workerset-ws0-0/chainer\] worker line 1$`, `^\[pod/logs-workerset-ws0-0/chainer\] worker line 3$`,
	} {
		if !regexp.MustCompile("(?m)" + want).MatchString(stdout.String()) {
			t.Errorf("the followed logs lack a line matching %s", want)
		}
	}
	if n := strings.Count(stdout.String(), "\n"); n != 6 {
		t.Errorf("%d lines, want the 6 the pods printed", n)
	}
}
