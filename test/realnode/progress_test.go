package realnode

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// progressRow is a job's row of kubectl get: its PHASE, PROGRESS and ETA columns as printed
// (the CRD's printer columns), found by the header's column positions (REASON may be empty).
type progressRow struct{ phase, progress, eta string }

func getProgressRow(t *testing.T, ns, resource string) (progressRow, error) {
	t.Helper()
	out, err := kubectl("", "get", "-n", ns, resource)
	if err != nil {
		return progressRow{}, fmt.Errorf("%w: %s", err, out)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 2 {
		return progressRow{}, fmt.Errorf("kubectl get: %q", out)
	}
	header, row := lines[0], lines[1]
	column := func(name string) string {
		start := strings.Index(header, name)
		if start < 0 || start >= len(row) {
			return ""
		}
		end := len(row)
		if next := strings.IndexFunc(header[start+len(name):], func(r rune) bool { return r != ' ' }); next >= 0 {
			end = min(len(row), start+len(name)+next)
		}
		return strings.TrimSpace(row[start:end])
	}
	return progressRow{phase: column("PHASE"), progress: column("PROGRESS"), eta: column("ETA")}, nil
}

// watchProgress reads the job's kubectl get row every second until it ends or timeout passes,
// and returns every PROGRESS value seen (as numbers) and the ETAs seen while it ran.
func watchProgress(t *testing.T, ns, resource string, timeout time.Duration) (percents []int, etas []string, final progressRow) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		row, err := getProgressRow(t, ns, resource)
		if err != nil {
			t.Fatal(err)
		}
		if p, err := strconv.Atoi(row.progress); err == nil && (len(percents) == 0 || percents[len(percents)-1] != p) {
			percents = append(percents, p)
			t.Logf("%s: %s PROGRESS %s ETA %q", resource, row.phase, row.progress, row.eta)
		}
		if row.phase == string(troupev1.JobRunning) && row.eta != "" {
			etas = append(etas, row.eta)
		}
		if row.phase == string(troupev1.JobSucceeded) || row.phase == string(troupev1.JobFailed) {
			return percents, etas, row
		}
		time.Sleep(time.Second)
	}
	t.Fatalf("%s did not end in %v; PROGRESS seen %v", resource, timeout, percents)
	return nil, nil, progressRow{}
}

// jobProgress is the job's status.progress.
func jobProgress(t *testing.T, ns, resource string) *troupev1.ProgressStatus {
	t.Helper()
	out := mustKubectl(t, "", "get", "-n", ns, resource, "-o", "jsonpath={.status.progress}")
	if strings.TrimSpace(out) == "" {
		return nil
	}
	var p troupev1.ProgressStatus
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("status.progress %q: %v", out, err)
	}
	return &p
}

// checkReported checks what kubectl get showed while the job ran and its final status.progress:
// PROGRESS rising through several values to 100, an ETA while it ran, and the final loss and
// accuracy (at least 0.9) in status.
func checkReported(t *testing.T, ns, resource string, percents []int, etas []string, final progressRow) {
	t.Helper()
	if final.phase != string(troupev1.JobSucceeded) {
		t.Errorf("%s ended %s", resource, final.phase)
	}
	below := 0
	for i, p := range percents {
		if i > 0 && p < percents[i-1] {
			t.Errorf("PROGRESS went back: %v", percents)
		}
		if p < 100 {
			below++
		}
	}
	if below < 3 || len(percents) == 0 || percents[len(percents)-1] != 100 {
		t.Errorf("PROGRESS seen %v: want it rising through at least 3 values below 100, to 100", percents)
	}
	if len(etas) == 0 {
		t.Errorf("no ETA shown while %s ran", resource)
	}
	p := jobProgress(t, ns, resource)
	if p == nil {
		t.Fatalf("%s has no status.progress", resource)
	}
	metrics := map[string]float64{}
	for _, m := range p.Metrics {
		v, _ := strconv.ParseFloat(m.Value, 64)
		metrics[m.Name] = v
	}
	if _, ok := metrics["loss"]; !ok || metrics["accuracy"] < 0.9 {
		t.Errorf("final metrics %v: want the loss and an accuracy of at least 0.9", p.Metrics)
	}
	t.Logf("%s: PROGRESS %v, ETAs %v; final progress %d/%d %s, metrics %v", resource, percents, etas, p.Current, p.Total, p.Unit, p.Metrics)
}

// TestTrainingReportsProgress: the DDP digits PyTorchJob (examples/pytorchjob.yaml) and the MPI
// digits ChainerJob (examples/chainerjob-mn-realnode.yaml, the demo's) with the troupe-train
// image on the real node, their epochs paced to a second: rank 0 reports its progress to the
// operator with its pod's token, kubectl get shows PROGRESS rising to 100 and an ETA while the
// job runs, and the final loss and accuracy are in status.progress.metrics.
func TestTrainingReportsProgress(t *testing.T) {
	t.Parallel() // beside the other job tests, after the install tests (suite_test.go)
	needOperator(t)
	needTrainImage(t)
	t.Run("PyTorchJob", func(t *testing.T) {
		ns := namespace(t, "realnode-progress-ddp")
		describeOnFailure(t, ns)
		args := append(append([]string{}, ddpArgs...), "--epoch-seconds", "1")
		mustKubectl(t, pytorchExample(t, "pytorchjob.yaml", args), "apply", "-n", ns, "-f", "-")
		percents, etas, final := watchProgress(t, ns, "pytorchjob.troupe.dev/pytorch-digits", 5*time.Minute)
		checkReported(t, ns, "pytorchjob.troupe.dev/pytorch-digits", percents, etas, final)
	})
	t.Run("ChainerJob", func(t *testing.T) {
		testutil.LongOnly(t) // the same report to the operator as the PyTorchJob's, from an MPI rank
		ns := namespace(t, "realnode-progress-mpi")
		describeOnFailure(t, ns)
		data, err := os.ReadFile(filepath.Join(repoRoot, "examples", "chainerjob-mn-realnode.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		manifest := strings.ReplaceAll(string(data), "ghcr.io/troupe-dev/troupe-train:v0.1.0", trainImage)
		mustKubectl(t, manifest, "apply", "-n", ns, "-f", "-")
		percents, etas, final := watchProgress(t, ns, "chainerjob.troupe.dev/example-job-mn", 5*time.Minute)
		checkReported(t, ns, "chainerjob.troupe.dev/example-job-mn", percents, etas, final)
	})
}

// TestStalledJobIsRestarted: the DDP digits PyTorchJob whose rank 1 sleeps at epoch 4 (the
// others wait in the next all-reduce, as behind a rank stuck in a collective), with
// progressDeadlineSeconds 20 and a rule that restarts a Stalled job: within the deadline of its
// last report the job is Stalled (the condition says when it last moved, a Warning event
// Stalled), and the rule restarts it (status.restartsByReason counts Stalled).
func TestStalledJobIsRestarted(t *testing.T) {
	t.Parallel() // beside the other job tests, after the install tests (suite_test.go)
	needOperator(t)
	needTrainImage(t)
	ns := namespace(t, "realnode-stalled")
	describeOnFailure(t, ns)
	const deadline = 20
	args := append(append([]string{}, ddpArgs...), "--epoch-seconds", "1", "--sleep-at-epoch", "4", "--sleep-rank", "1", "--sleep-seconds", "3600")
	manifest := pytorchExample(t, "pytorchjob.yaml", args)
	manifest = strings.Replace(manifest, "\nspec:\n", fmt.Sprintf(`
spec:
  runPolicy:
    progressDeadlineSeconds: %d
    failurePolicy:
      maxRestarts: 1
      rules:
      - {name: restart-stalled, action: RestartJob, onReasons: [Stalled]}
`, deadline), 1)
	if strings.Count(manifest, "runPolicy:") != 1 {
		t.Fatalf("the manifest has a runPolicy already or none was added:\n%s", manifest)
	}
	mustKubectl(t, manifest, "apply", "-n", ns, "-f", "-")
	job := "pytorchjob.troupe.dev/pytorch-digits"

	// It reports, then stops moving: Stalled within the deadline (and a few seconds of status
	// write) of its last move.
	if _, err := waitCondition(t, ns, job, troupev1.ConditionStalled, 4*time.Minute); err != nil {
		t.Fatalf("never Stalled: %v; progress %+v", err, jobProgress(t, ns, job))
	}
	stalledAt := time.Now()
	p := jobProgress(t, ns, job)
	if p == nil || p.LastProgressTime == nil {
		t.Fatalf("Stalled without a report: %+v", p)
	}
	if late := stalledAt.Sub(p.LastProgressTime.Time); late > (deadline+15)*time.Second {
		t.Errorf("Stalled %v after the last move, want within the deadline (%ds) and a status write", late.Round(time.Second), deadline)
	}
	msg := mustKubectl(t, "", "get", "-n", ns, job, "-o", `jsonpath={.status.conditions[?(@.type=="Stalled")].message}`)
	if !strings.Contains(msg, "no progress reported since") {
		t.Errorf("the Stalled condition says %q, want when it last moved", msg)
	}
	t.Logf("Stalled %v after its last move: %s", stalledAt.Sub(p.LastProgressTime.Time).Round(time.Second), msg)
	events := mustKubectl(t, "", "get", "events", "-n", ns, "--field-selector", "reason="+troupev1.EventStalled, "-o", "name")
	if strings.TrimSpace(events) == "" {
		t.Errorf("no %s event", troupev1.EventStalled)
	}

	// The rule restarts it.
	deadlineRestart := time.Now().Add(2 * time.Minute)
	for {
		out := mustKubectl(t, "", "get", "-n", ns, job, "-o", `jsonpath={.status.restarts} {.status.restartsByReason[?(@.reason=="Stalled")].count}`)
		if f := strings.Fields(out); len(f) == 2 && f[0] != "0" && f[1] != "0" {
			t.Logf("restarted by the rule: restarts %s, of which Stalled %s", f[0], f[1])
			break
		}
		if time.Now().After(deadlineRestart) {
			t.Fatalf("not restarted for the stall within 2 minutes: %q", out)
		}
		time.Sleep(time.Second)
	}
}
