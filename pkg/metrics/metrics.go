// Package metrics holds troupe's own Prometheus metrics, one family per fact about the jobs,
// served with controller-runtime's on the operator's metrics endpoint.
//
// Every family but troupe_build_info is labelled by the job's kind and namespace (the label
// job_namespace, LabelNamespace), and nothing else but a job's result or the kind of object that
// woke a job (LabelSource, a dozen kinds): a series per kind and
// namespace that had a job since the operator started, so the cardinality follows the number
// of namespaces that run jobs, never the number of jobs; but for the progress of running jobs
// that report it (progress.go), bounded on its own.
//
// The counters count transitions the engine has written into a job's status (pkg/engine:
// metrics.go), once each: a new operator process or a new leader starts from the status the
// API server holds, so it does not count again what its predecessor counted. Like every
// Prometheus counter they start at zero in each process; rate() and increase() handle that.
// The gauge of running jobs is read from the leader's cache when scraped, never kept by
// increments that could drift.
package metrics

import (
	"context"
	"runtime"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/troupe-dev/troupe/pkg/version"
)

var log = logf.Log.WithName("metrics")

// Label names. None is a label Prometheus gives every target it scrapes (job, instance, and
// with a Prometheus Operator ServiceMonitor namespace, service, pod, container, endpoint):
// with honor_labels off, as a ServiceMonitor leaves it, Prometheus would keep the target's
// value under that name and rename ours exported_<name>. So the job's namespace is
// job_namespace (as kubeflow's training-operator names it), not namespace.
const (
	LabelKind      = "kind"
	LabelNamespace = "job_namespace"
	// LabelResult is Succeeded or Failed.
	LabelResult = "result"
	// LabelSource is the kind of object whose event asked for a pass (Wakeup).
	LabelSource = "source"
)

// Results of a finished job, the values of LabelResult.
const (
	ResultSucceeded = "Succeeded"
	ResultFailed    = "Failed"
)

var jobLabels = []string{LabelKind, LabelNamespace}

var (
	jobsCreated = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "troupe_jobs_created_total",
		Help: "Jobs the operator took on (their first status was written).",
	}, jobLabels)
	jobsFinished = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "troupe_jobs_finished_total",
		Help: "Jobs that ended, by result (Succeeded or Failed).",
	}, []string{LabelKind, LabelNamespace, LabelResult})
	jobStartup = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "troupe_job_startup_seconds",
		Help: "Seconds from a job's creation, or from its resumption after a suspend or a pause, until its master runs and every worker pod is ready.",
		// From a warm simulated cluster (a second) to large jobs waiting for nodes or images.
		Buckets: []float64{1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600},
	}, jobLabels)
	launcherWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "troupe_launcher_wait_seconds",
		Help:    "Seconds a launcher waited for its workers to be reachable before starting (the troupe-wait init container), for waits that ended with every host reachable.",
		Buckets: []float64{0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600},
	}, jobLabels)
	launcherWaitTimeouts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "troupe_launcher_wait_timeouts_total",
		Help: "Launcher pods whose wait for their workers timed out (troupe-wait exited with its timeout code).",
	}, jobLabels)
	jobRestarts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "troupe_job_restarts_total",
		Help: "Restarts of a job as a whole (launcher and workers torn down and created again).",
	}, jobLabels)
	nameConflicts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "troupe_job_name_conflicts_total",
		Help: "Times a job found the name of one of its children taken by an object it does not own.",
	}, jobLabels)
	reconcileErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "troupe_reconcile_errors_total",
		Help: "Reconciles of a job that ended in an error (and are retried with backoff).",
	}, jobLabels)

	wakeups = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "troupe_wakeups_total",
		Help: "Passes of a job that the operator's watches asked for, by the kind of object whose event asked (source: the job's own kind, Pod, a child's kind, Node, ProgressReport). The work queue merges the asks that come while a job waits, so the passes are fewer.",
	}, []string{LabelKind, LabelNamespace, LabelSource})

	running = &runningCollector{counters: map[string]RunningCounter{}}

	// buildInfo is 1, labelled by the build: version and revision tell which release each
	// replica runs (during a rolling upgrade, two).
	buildInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "troupe_build_info",
		Help: "Always 1; its labels are the operator's version, git revision and Go version.",
	}, []string{"version", "revision", "goversion"})
)

// Register adds troupe's metrics to reg (the operator passes controller-runtime's registry,
// which its metrics endpoint serves).
func Register(reg prometheus.Registerer) error {
	v, revision := version.Get()
	buildInfo.WithLabelValues(v, revision, runtime.Version()).Set(1)
	for _, c := range []prometheus.Collector{jobsCreated, jobsFinished, running, jobStartup, launcherWait,
		launcherWaitTimeouts, jobRestarts, nameConflicts, reconcileErrors, wakeups, buildInfo, progressRatio, progressETA, progressMetric} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// Touch makes every counter and histogram of a kind and namespace exist, at zero until
// something happens, so that a dashboard's rate() and increase() see the first increment
// rather than a series appearing from nothing. The engine calls it on every reconcile.
func Touch(kind, namespace string) {
	for _, v := range []*prometheus.CounterVec{jobsCreated, launcherWaitTimeouts, jobRestarts, nameConflicts, reconcileErrors} {
		v.WithLabelValues(kind, namespace)
	}
	jobsFinished.WithLabelValues(kind, namespace, ResultSucceeded)
	jobsFinished.WithLabelValues(kind, namespace, ResultFailed)
	jobStartup.WithLabelValues(kind, namespace)
	launcherWait.WithLabelValues(kind, namespace)
}

// JobCreated counts a job the operator took on.
func JobCreated(kind, namespace string) { jobsCreated.WithLabelValues(kind, namespace).Inc() }

// JobFinished counts a job that ended with result ResultSucceeded or ResultFailed.
func JobFinished(kind, namespace, result string) {
	jobsFinished.WithLabelValues(kind, namespace, result).Inc()
}

// JobStarted observes how long a job took from its creation (or resumption) until all its
// pods ran.
func JobStarted(kind, namespace string, d time.Duration) {
	jobStartup.WithLabelValues(kind, namespace).Observe(d.Seconds())
}

// LauncherWaited observes how long a launcher waited for its workers.
func LauncherWaited(kind, namespace string, d time.Duration) {
	launcherWait.WithLabelValues(kind, namespace).Observe(d.Seconds())
}

// LauncherWaitTimedOut counts a launcher whose wait for its workers timed out.
func LauncherWaitTimedOut(kind, namespace string) {
	launcherWaitTimeouts.WithLabelValues(kind, namespace).Inc()
}

// JobRestarted counts one restart of a job as a whole. Call it once per restart, when the
// status that records the new attempt has been written.
func JobRestarted(kind, namespace string) { jobRestarts.WithLabelValues(kind, namespace).Inc() }

// NameConflict counts a job that found a child's name taken.
func NameConflict(kind, namespace string) { nameConflicts.WithLabelValues(kind, namespace).Inc() }

// ReconcileError counts a reconcile of a job that returned an error.
func ReconcileError(kind, namespace string) { reconcileErrors.WithLabelValues(kind, namespace).Inc() }

// Wakeup counts one pass of a job of the kind and namespace that a watch asked for because an
// object of the source kind changed.
func Wakeup(kind, namespace, source string) {
	wakeups.WithLabelValues(kind, namespace, source).Inc()
}

// RunningCounter returns how many jobs of one kind run now, by namespace (every namespace
// with a job of the kind, zero included). ok is false when this replica does not know: it
// does not lead, so it neither reconciles nor caches the jobs.
type RunningCounter func(ctx context.Context) (byNamespace map[string]int, ok bool, err error)

// SetRunningCounter makes troupe_jobs_running report a kind's running jobs as c counts them.
func SetRunningCounter(kind string, c RunningCounter) {
	running.mu.Lock()
	defer running.mu.Unlock()
	running.counters[kind] = c
}

// runningCounterTimeout bounds a scrape's wait for a cache that is still syncing.
const runningCounterTimeout = 5 * time.Second

var runningDesc = prometheus.NewDesc("troupe_jobs_running",
	"Jobs whose phase is Running now, read from the leading replica's cache at scrape time.",
	jobLabels, nil)

// runningCollector reports troupe_jobs_running at scrape time.
type runningCollector struct {
	mu       sync.Mutex
	counters map[string]RunningCounter
}

func (c *runningCollector) Describe(ch chan<- *prometheus.Desc) { ch <- runningDesc }

func (c *runningCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), runningCounterTimeout)
	defer cancel()
	for kind, count := range c.counters {
		byNS, ok, err := count(ctx)
		if err != nil {
			// An invalid metric would fail the whole scrape (the endpoint answers 500 on any
			// error); the other families are still worth having.
			log.Error(err, "count the running jobs", "kind", kind)
			continue
		}
		if !ok {
			continue
		}
		for ns, n := range byNS {
			ch <- prometheus.MustNewConstMetric(runningDesc, prometheus.GaugeValue, float64(n), kind, ns)
		}
	}
}
