package e2e

import (
	"bufio"
	"os"
	"strings"
	"testing"
)

// Bounds of a failed test's report: CI keeps only a part of a failing run's output, and the
// operator's log (a temporary file) goes with the machine.
const (
	reportLines       = 40
	reportLineLength  = 600
	reportOperatorLog = 40
)

// reportOnFailure makes a failed test print what a person would look at in its namespace:
// the troupe jobs, Workloads and pods, the jobs' and Workloads' conditions, the events, the
// nodes' readiness and taints, and the operator's log lines that name the namespace.
func reportOnFailure(t *testing.T, ns string) {
	t.Helper()
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		conditions := `{range .items[*]}{.kind}/{.metadata.name}: phase {.status.phase}{"\n"}` +
			`{range .status.conditions[*]}  {.type}={.status} {.reason} ({.lastTransitionTime}): {.message}{"\n"}{end}{end}`
		sections := []struct {
			what string
			args []string
		}{
			{"objects", []string{"get", "troupe,workloads.kueue.x-k8s.io,pods", "-n", ns, "-o", "wide"}},
			{"conditions", []string{"get", "troupe,workloads.kueue.x-k8s.io", "-n", ns, "-o", "jsonpath=" + conditions}},
			{"events", []string{"events", "-n", ns}},
			{"nodes", []string{"get", "nodes", "-o",
				`custom-columns=NAME:.metadata.name,READY:.status.conditions[?(@.type=="Ready")].status,TAINTS:.spec.taints[*].key`}},
		}
		for _, s := range sections {
			out, err := kubectl(s.args...)
			if err != nil {
				t.Logf("report: %s: %v", s.what, err)
			}
			t.Logf("report: %s:\n%s", s.what, lastLines(out, reportLines))
		}
		t.Logf("report: the operator's log lines naming %s (%s):\n%s", ns, operator.LogPath, operatorLogAbout(ns))
	})
}

// operatorLogAbout is the last lines of the operator's log that contain s.
func operatorLogAbout(s string) string {
	f, err := os.Open(operator.LogPath)
	if err != nil {
		return err.Error()
	}
	defer func() { _ = f.Close() }()
	var kept []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for sc.Scan() {
		if line := sc.Text(); strings.Contains(line, s) {
			kept = append(kept, line)
			if len(kept) > 2*reportOperatorLog {
				kept = kept[len(kept)-reportOperatorLog:]
			}
		}
	}
	return lastLines(strings.Join(kept, "\n"), reportOperatorLog)
}

// lastLines is the last n lines of s, each cut to reportLineLength.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	for i, l := range lines {
		if len(l) > reportLineLength {
			lines[i] = l[:reportLineLength] + " [...]"
		}
	}
	return strings.Join(lines, "\n")
}
