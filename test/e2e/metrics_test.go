package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/engine"
	"github.com/troupe-dev/troupe/pkg/metrics"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
	"github.com/troupe-dev/troupe/pkg/version"
)

// Jobs of every outcome run on the simulated cluster; the operator's own /metrics endpoint
// then counts them in their namespace, the Grafana dashboard's every query names a metric the
// endpoint serves, Prometheus scraping it as the shipped ServiceMonitor does answers every
// query of the dashboard for the jobs' namespace, and a new operator process counts nothing
// twice.
func TestMetricsScraped(t *testing.T) {
	// Not parallel: restarts the operator, which resets every counter the other tests check.
	ns := newNamespace(t)
	taken := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "taken-mpi", Namespace: ns}}
	if err := k8s.Create(context.Background(), taken); err != nil {
		t.Fatal(err)
	}
	create(t, testutil.MakeChainerJob("taken", ns).WorkerSet("ws0", 1).Obj())
	create(t, testutil.MakeChainerJob("ok", ns).WorkerSet("ws0", 1).Obj())
	late := testutil.MakeChainerJob("late", ns).WorkerSet("ws0", 1).Obj()
	late.Spec.Master.Template.Labels = map[string]string{simOutcomeLabel: simOutcomeWaitTimeout}
	create(t, late)
	long := testutil.MakeChainerJob("long", ns).WorkerSet("ws0", 2).Obj()
	// Long enough to be running still after the operator's restart below.
	long.Spec.Master.Template.Annotations = map[string]string{simDurationAnnot: "300s"}
	create(t, long)

	waitForJob(t, ns, "ok", "Succeeded", func(j *troupev1.ChainerJob) bool { return j.Status.Phase == troupev1.JobSucceeded })
	waitForJob(t, ns, "late", "Failed", func(j *troupev1.ChainerJob) bool { return j.Status.Phase == troupev1.JobFailed })
	waitForJob(t, ns, "long", "Running with its workers ready", func(j *troupev1.ChainerJob) bool {
		return j.Status.Phase == troupev1.JobRunning && meta.IsStatusConditionTrue(j.Status.Conditions, troupev1.ConditionWorkersReady)
	})
	waitForJob(t, ns, "taken", "blocked by the taken name", func(j *troupev1.ChainerJob) bool {
		c := meta.FindStatusCondition(j.Status.Conditions, troupev1.ConditionInitialized)
		return c != nil && c.Reason == troupev1.ReasonChildConflict
	})

	// The running job's training reports its progress, as its pod would: the dashboard's
	// progress panels show it.
	var longJob troupev1.ChainerJob
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "long"}, &longJob); err != nil {
		t.Fatal(err)
	}
	reportProgressUntilETA(t, ns, "long", newProgressReporter(t, ns, string(longJob.UID), troupev1.RoleMaster))

	const kind = "ChainerJob"
	want := func(name string, v float64, labels ...string) check { return check{name, kind, ns, labels, v} }
	checks := []check{
		want("troupe_jobs_created_total", 4),
		want("troupe_jobs_finished_total", 1, "result", "Succeeded"),
		want("troupe_jobs_finished_total", 1, "result", "Failed"),
		want("troupe_jobs_running", 1),
		want("troupe_launcher_wait_timeouts_total", 1),
		want("troupe_job_name_conflicts_total", 1),
		want("troupe_job_restarts_total", 0),
		want("troupe_job_progress_ratio", 0.2, "job_name", "long"),
		want("troupe_job_progress_metric", 0.75, "job_name", "long", "metric", "loss"),
		want("troupe_job_progress_metric", 0.5, "job_name", "long", "metric", "accuracy"),
	}
	families := waitForMetrics(t, checks)
	// Histograms (sample counts): ok and long started, late never ran; each launcher that
	// ran waited (0 s on the simulated cluster).
	for _, name := range []string{"troupe_job_startup_seconds", "troupe_launcher_wait_seconds"} {
		if n := value(families, check{name: name, kind: kind, ns: ns}); n < 1 || n > 2 {
			t.Errorf("%s{job_namespace=%s} has %v observations, want 1 or 2 (ok, long)", name, ns, n)
		}
	}
	if value(families, check{name: "troupe_reconcile_errors_total", kind: kind, ns: ns}) < 0 {
		t.Errorf("troupe_reconcile_errors_total{job_namespace=%s} is not served", ns)
	}
	// What asked for the jobs' passes: their own events, their pods', their Jobs', and the
	// long job's progress reports.
	for _, source := range []string{kind, "Pod", "Job", engine.ProgressReportSource} {
		if n := value(families, check{name: "troupe_wakeups_total", kind: kind, ns: ns, labels: []string{metrics.LabelSource, source}}); n < 1 {
			t.Errorf("troupe_wakeups_total{job_namespace=%s,source=%s} is %v, want at least 1", ns, source, n)
		}
	}
	t.Logf("troupe's metrics of namespace %s, scraped from %s:\n%s", ns, operator.MetricsURL, troupeLines(t, ns))

	checkDashboard(t, families)
	checkBuildInfo(t, families)
	// The same endpoint scraped by a real Prometheus as the shipped ServiceMonitor has it
	// scraped, with the target labels it adds: the dashboard shows the jobs' namespace.
	start := time.Now()
	checkDashboardOnPrometheus(t, startPrometheus(t), ns)
	t.Logf("Prometheus started, scraped and answered the dashboard in %s", time.Since(start).Round(100*time.Millisecond))

	// A new operator process (a rolling update, a new leader) starts from the jobs' written
	// status: it counts none of them again, and reads the running job from its cache.
	restartOperator(t)
	waitForMetrics(t, []check{
		want("troupe_jobs_running", 1),
		want("troupe_jobs_created_total", 0),
		want("troupe_jobs_finished_total", 0, "result", "Succeeded"),
		want("troupe_jobs_finished_total", 0, "result", "Failed"),
		want("troupe_launcher_wait_timeouts_total", 0),
	})
	create(t, testutil.MakeChainerJob("after", ns).Obj())
	waitForMetrics(t, []check{want("troupe_jobs_created_total", 1)})
}

// checkDashboard checks that every query of config/monitoring's Grafana dashboard names only
// metrics the operator serves: sample names (with a histogram's _bucket, _sum and _count) of
// the scrape, after jobs ran.
func checkDashboard(t *testing.T, families map[string]*dto.MetricFamily) {
	t.Helper()
	served := map[string]bool{}
	for name, f := range families {
		served[name] = true
		if f.GetType() == dto.MetricType_HISTOGRAM {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				served[name+suffix] = true
			}
		}
	}
	data, err := os.ReadFile(filepath.Join(repoRoot, "config", "monitoring", "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	queries, err := testutil.DashboardQueries(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(queries) == 0 {
		t.Fatal("the dashboard has no queries")
	}
	var named []string
	for _, q := range queries {
		names := testutil.MetricNames(q.Expr)
		if len(names) == 0 {
			t.Errorf("%s names no metric: %s", q.Where, q.Expr)
		}
		for _, n := range names {
			if !served[n] {
				t.Errorf("%s names %s, which the operator does not serve: %s", q.Where, n, q.Expr)
			}
			if !slices.Contains(named, n) {
				named = append(named, n)
			}
		}
	}
	t.Logf("the dashboard's %d queries name %d metrics, all served: %s", len(queries), len(named), strings.Join(named, ", "))
}

// check is one expected series of troupe's metrics: a counter's or gauge's value, or a
// histogram's count of observations.
type check struct {
	name, kind, ns string
	labels         []string // more label name, value pairs
	want           float64
}

// waitForMetrics scrapes the operator until every check holds, and returns the last scrape.
func waitForMetrics(t *testing.T, checks []check) map[string]*dto.MetricFamily {
	t.Helper()
	var families map[string]*dto.MetricFamily
	eventually(t, "the operator's metrics", func(context.Context) (bool, error) {
		var err error
		if families, err = scrape(); err != nil {
			return false, err
		}
		for _, c := range checks {
			if got := value(families, c); got != c.want {
				return false, fmt.Errorf("%s%v{job_namespace=%s} = %v, want %v", c.name, c.labels, c.ns, got, c.want)
			}
		}
		return true, nil
	})
	return families
}

// scrape reads the operator's endpoint as Prometheus does: HTTPS, with a reader's token.
func scrape() (map[string]*dto.MetricFamily, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	body, err := operator.Metrics(ctx)
	if err != nil {
		return nil, err
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(bytes.NewReader(body))
}

// value is a check's series value in the scrape, -1 when it is not served.
func value(families map[string]*dto.MetricFamily, c check) float64 {
	f := families[c.name]
	if f == nil {
		return -1
	}
	want := map[string]string{metrics.LabelKind: c.kind, metrics.LabelNamespace: c.ns}
	for i := 0; i+1 < len(c.labels); i += 2 {
		want[c.labels[i]] = c.labels[i+1]
	}
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		if len(got) != len(want) {
			continue
		}
		match := true
		for k, v := range want {
			match = match && got[k] == v
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	return -1
}

// troupeLines is the scrape's text for the namespace's troupe_ series, with their HELP and
// TYPE lines.
func troupeLines(t *testing.T, ns string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	body, err := operator.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "# HELP troupe_") || strings.HasPrefix(line, "# TYPE troupe_") ||
			(strings.HasPrefix(line, "troupe_") && strings.Contains(line, metrics.LabelNamespace+`="`+ns+`"`)) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// checkBuildInfo: troupe_build_info names the operator's version and the commit it was built
// from (pkg/testing.StartOperator stamps the commit, as make build does).
func checkBuildInfo(t *testing.T, families map[string]*dto.MetricFamily) {
	t.Helper()
	head, err := exec.Command("git", "-C", repoRoot, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	f := families["troupe_build_info"]
	if f == nil || len(f.GetMetric()) != 1 {
		t.Fatalf("troupe_build_info: want one series, got %v", f)
	}
	m := f.GetMetric()[0]
	labels := map[string]string{}
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	if labels["version"] != version.Version || !strings.HasPrefix(labels["revision"], strings.TrimSpace(string(head))) || m.GetGauge().GetValue() != 1 {
		t.Errorf("troupe_build_info%v = %v, want version %s, revision %s", labels, m.GetGauge().GetValue(), version.Version, head)
	}
}
