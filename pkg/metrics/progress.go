package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// The training's progress, per job (docs/progress.md): the one place where a series names a job,
// because a dashboard of a run's progress must. The cardinality stays bounded: series exist only
// for jobs that reported and have not ended (they go when the job ends or is deleted), at most
// MaxProgressMetrics metrics a job (the endpoint refuses more), and for at most
// MaxProgressJobs jobs at once; a job beyond that has none until others end.

// LabelJob names the job; LabelMetric a metric the training reported.
const (
	LabelJob    = "job_name"
	LabelMetric = "metric"
)

// MaxProgressJobs bounds the jobs that have progress series at once.
const MaxProgressJobs = 2000

var progressLabels = []string{LabelKind, LabelNamespace, LabelJob}

var (
	progressRatio = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "troupe_job_progress_ratio",
		Help: "How far a running job's training got, 0 to 1, as it last reported (current over total steps).",
	}, progressLabels)
	progressETA = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "troupe_job_progress_eta_seconds",
		Help: "Seconds until a running job's training should end at the rate it reports, as of the last status write.",
	}, progressLabels)
	progressMetric = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "troupe_job_progress_metric",
		Help: "The last value of each metric a running job's training reported (loss, accuracy, throughput), by its name.",
	}, append(progressLabels[:len(progressLabels):len(progressLabels)], LabelMetric))

	progressJobs = struct {
		sync.Mutex
		metrics map[[3]string]map[string]bool // per job, the metrics it has series of
	}{metrics: map[[3]string]map[string]bool{}}
)

// SetProgress sets a job's progress series: ratio and eta (negative: unknown, no series) and
// the value of each metric; a metric it had and no longer reports loses its series.
func SetProgress(kind, namespace, job string, ratio, eta float64, values map[string]float64) {
	key := [3]string{kind, namespace, job}
	progressJobs.Lock()
	defer progressJobs.Unlock()
	had, ok := progressJobs.metrics[key]
	if !ok && len(progressJobs.metrics) >= MaxProgressJobs {
		return
	}
	labels := prometheus.Labels{LabelKind: kind, LabelNamespace: namespace, LabelJob: job}
	setOrDelete(progressRatio, labels, ratio)
	setOrDelete(progressETA, labels, eta)
	now := map[string]bool{}
	for name, v := range values {
		progressMetric.WithLabelValues(kind, namespace, job, name).Set(v)
		now[name] = true
	}
	for name := range had {
		if !now[name] {
			progressMetric.DeleteLabelValues(kind, namespace, job, name)
		}
	}
	progressJobs.metrics[key] = now
}

func setOrDelete(g *prometheus.GaugeVec, labels prometheus.Labels, v float64) {
	if v < 0 {
		g.Delete(labels)
		return
	}
	g.With(labels).Set(v)
}

// ForgetProgress removes a job's progress series (it ended, or is gone).
func ForgetProgress(kind, namespace, job string) {
	key := [3]string{kind, namespace, job}
	progressJobs.Lock()
	defer progressJobs.Unlock()
	if _, ok := progressJobs.metrics[key]; !ok {
		return
	}
	delete(progressJobs.metrics, key)
	labels := prometheus.Labels{LabelKind: kind, LabelNamespace: namespace, LabelJob: job}
	progressRatio.Delete(labels)
	progressETA.Delete(labels)
	progressMetric.DeletePartialMatch(labels)
}
