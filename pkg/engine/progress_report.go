package engine

import (
	"math"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/metrics"
)

// ReportProgress makes the reconciler wire the jobs' pods to the progress endpoint e and fold
// its reports into their status (progress.go); it is called before SetupWithManager.
func (r *Reconciler) ReportProgress(e ProgressEndpoint) { r.progress = &e }

// recordProgress emits the Stalled event when the job became stalled, and sets the job's
// progress metrics from the status written (removes them once the job ended).
func (r *Reconciler) recordProgress(job Object, prev, next *troupev1.JobStatus) {
	if c := meta.FindStatusCondition(next.Conditions, troupev1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue &&
		!meta.IsStatusConditionTrue(prev.Conditions, troupev1.ConditionStalled) {
		r.recorder.Eventf(job, nil, corev1.EventTypeWarning, troupev1.EventStalled, "Watch", "%s", c.Message)
	}
	kind, ns, name := r.gvk.Kind, job.GetNamespace(), job.GetName()
	p := next.Progress
	if p == nil || next.Phase.Ended() {
		metrics.ForgetProgress(kind, ns, name)
		return
	}
	var ratio, eta float64 = -1, -1
	if p.Total > 0 {
		ratio = math.Min(1, float64(p.Current)/float64(p.Total))
	}
	if p.EstimatedCompletionTime != nil {
		eta = math.Max(0, p.EstimatedCompletionTime.Sub(r.clock.Now()).Seconds())
	}
	values := map[string]float64{}
	for _, m := range p.Metrics {
		if v, err := strconv.ParseFloat(m.Value, 64); err == nil {
			values[m.Name] = v
		}
	}
	metrics.SetProgress(kind, ns, name, ratio, eta, values)
}

// podHolders are the observed children of the job that hold pods: its master Job, worker
// StatefulSets and worker Jobs.
func podHolders(obs *Observed) []client.Object {
	var out []client.Object
	if obs.MasterJob != nil {
		out = append(out, obs.MasterJob)
	}
	for _, sts := range obs.StatefulSets {
		if sts != nil {
			out = append(out, sts)
		}
	}
	for _, jobs := range obs.WorkerJobs {
		for _, j := range jobs {
			out = append(out, j)
		}
	}
	return out
}
