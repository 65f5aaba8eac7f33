package metrics

import (
	"context"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/troupe-dev/troupe/pkg/version"
)

func TestFamilies(t *testing.T) {
	reg := prometheus.NewPedanticRegistry() // checks names, help and label consistency
	if err := Register(reg); err != nil {
		t.Fatal(err)
	}
	const kind, ns = "MPIJob", "metrics-unit"
	Touch(kind, ns)
	JobCreated(kind, ns)
	JobFinished(kind, ns, ResultFailed)
	JobStarted(kind, ns, 3*time.Second)
	LauncherWaited(kind, ns, time.Second)
	LauncherWaitTimedOut(kind, ns)
	JobRestarted(kind, ns)
	NameConflict(kind, ns)
	ReconcileError(kind, ns)
	SetRunningCounter(kind, func(context.Context) (map[string]int, bool, error) {
		return map[string]int{ns: 2, "idle": 0}, true, nil
	})
	SetRunningCounter("ChainerJob", func(context.Context) (map[string]int, bool, error) {
		return map[string]int{"not-leading": 5}, false, nil // a replica that does not lead
	})

	want := `
# HELP troupe_jobs_created_total Jobs the operator took on (their first status was written).
# TYPE troupe_jobs_created_total counter
troupe_jobs_created_total{job_namespace="metrics-unit",kind="MPIJob"} 1
# HELP troupe_jobs_finished_total Jobs that ended, by result (Succeeded or Failed).
# TYPE troupe_jobs_finished_total counter
troupe_jobs_finished_total{job_namespace="metrics-unit",kind="MPIJob",result="Failed"} 1
troupe_jobs_finished_total{job_namespace="metrics-unit",kind="MPIJob",result="Succeeded"} 0
# HELP troupe_jobs_running Jobs whose phase is Running now, read from the leading replica's cache at scrape time.
# TYPE troupe_jobs_running gauge
troupe_jobs_running{job_namespace="idle",kind="MPIJob"} 0
troupe_jobs_running{job_namespace="metrics-unit",kind="MPIJob"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"troupe_jobs_created_total", "troupe_jobs_finished_total", "troupe_jobs_running"); err != nil {
		t.Error(err)
	}
	for name, c := range map[string]prometheus.Collector{
		"troupe_launcher_wait_timeouts_total": launcherWaitTimeouts, "troupe_job_restarts_total": jobRestarts,
		"troupe_job_name_conflicts_total": nameConflicts, "troupe_reconcile_errors_total": reconcileErrors,
	} {
		if got := testutil.ToFloat64(c.(*prometheus.CounterVec).WithLabelValues(kind, ns)); got != 1 {
			t.Errorf("%s = %v, want 1", name, got)
		}
	}
	if n, err := testutil.GatherAndCount(reg, "troupe_job_startup_seconds", "troupe_launcher_wait_seconds"); err != nil || n != 2 {
		t.Errorf("histogram series = %d (%v), want one each", n, err)
	}
}

// troupe_build_info names the running build: the version and the revision --version prints.
func TestBuildInfo(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	if err := Register(reg); err != nil {
		t.Fatal(err)
	}
	v, revision := version.Get()
	want := `
# HELP troupe_build_info Always 1; its labels are the operator's version, git revision and Go version.
# TYPE troupe_build_info gauge
troupe_build_info{goversion="` + runtime.Version() + `",revision="` + revision + `",version="` + v + `"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "troupe_build_info"); err != nil {
		t.Error(err)
	}
}

// No family has a label that Prometheus gives the target it scrapes (its own job and
// instance, and those a Prometheus Operator ServiceMonitor adds): Prometheus would keep the
// target's value and rename ours exported_<name>, as namespace once was.
func TestNoTargetLabels(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	if err := Register(reg); err != nil {
		t.Fatal(err)
	}
	Touch("MPIJob", "target-labels")
	SetRunningCounter("MPIJob", func(context.Context) (map[string]int, bool, error) {
		return map[string]int{"target-labels": 1}, true, nil
	})
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	targetLabels := []string{"job", "instance", "namespace", "service", "pod", "container", "endpoint"}
	seen := 0
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if slices.Contains(targetLabels, l.GetName()) {
					t.Errorf("%s has the label %s, which a scrape renames exported_%s", f.GetName(), l.GetName(), l.GetName())
				}
			}
		}
		seen++
	}
	if seen != 10 {
		t.Errorf("%d families gathered, want troupe's 10", seen)
	}
}
