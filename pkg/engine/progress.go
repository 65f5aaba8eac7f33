package engine

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// A job's training reports its progress to the operator's progress endpoint (pkg/progress,
// docs/progress.md), which keeps the latest report of each job in memory and wakes the job's
// pass; the pass folds it into status.progress, the durable copy, in its one status write. The
// engine gives every container of the job's pods what it needs to report (the endpoint's URL,
// a ServiceAccount token for the endpoint's audience alone, the CA), says when a job that
// reports has stalled, and makes a stall a failure of the attempt that failurePolicy's rules
// act on.

// ProgressReport is one report of a job's training as the endpoint accepted it.
type ProgressReport struct {
	Current, Total int64
	Unit, Message  string
	Metrics        []troupev1.ProgressMetric
	// Rate is how many units a second the training advanced, over the reports of its run
	// (the endpoint measures it between reports, to the nanosecond); 0 when not known yet.
	Rate float64
	// Received is when the endpoint accepted it.
	Received time.Time
}

// ProgressReports hands the engine the latest report of each job, by the job's UID.
type ProgressReports interface {
	Latest(job types.UID) (ProgressReport, bool)
}

// ProgressEndpoint is how the jobs' pods reach the progress endpoint and where its reports
// are.
type ProgressEndpoint struct {
	// Reports are the reports the endpoint accepted.
	Reports ProgressReports
	// URL is the URL of one job's reports (the endpoint's, with the job's namespace, kind and
	// name).
	URL func(namespace, kind, name string) string
	// CA is the PEM certificate of the CA that signed the endpoint's certificate; nil while
	// it is not known yet (the certificate is being made).
	CA func() []byte
	// Wakeups is the source that hands h a job of the kind when the endpoint accepted a report
	// of it (h queues its pass).
	Wakeups func(kind string, h handler.EventHandler) source.Source
}

// ProgressWiring is what every container of a job's pods is given to report its progress.
type ProgressWiring struct {
	URL, CA string
}

// progressTokenVolume is the projected volume with the pod's token for the progress endpoint.
const (
	progressTokenVolume = "troupe-progress-token"
	// ProgressTokenDir is where every container finds it (file "token").
	ProgressTokenDir = "/var/run/secrets/troupe.dev/progress"
	// progressTokenSeconds is the token's lifetime; the kubelet renews it at 80% of it.
	progressTokenSeconds = 3600
)

// decoratePod gives every container of tmpl the endpoint's URL, the path of the pod's token
// and the CA, and the pod the projected token, unless the job's templates set these names
// themselves. Nothing when the job is not wired (the operator serves no endpoint).
func (w *ProgressWiring) decoratePod(tmpl *corev1.PodTemplateSpec) {
	if w == nil {
		return
	}
	if !slices.ContainsFunc(tmpl.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == progressTokenVolume }) {
		tmpl.Spec.Volumes = append(tmpl.Spec.Volumes, corev1.Volume{Name: progressTokenVolume, VolumeSource: corev1.VolumeSource{
			Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
				Audience: troupev1.ProgressAudience, ExpirationSeconds: ptr.To[int64](progressTokenSeconds), Path: "token",
			}}}},
		}})
	}
	env := []corev1.EnvVar{
		{Name: troupev1.EnvProgressURL, Value: w.URL},
		{Name: troupev1.EnvProgressTokenFile, Value: ProgressTokenDir + "/token"},
		{Name: troupev1.EnvProgressCA, Value: w.CA},
	}
	for i := range tmpl.Spec.Containers {
		c := &tmpl.Spec.Containers[i]
		for _, e := range env {
			if !slices.ContainsFunc(c.Env, func(have corev1.EnvVar) bool { return have.Name == e.Name }) {
				c.Env = append(c.Env, e)
			}
		}
		if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == progressTokenVolume }) {
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: progressTokenVolume, MountPath: ProgressTokenDir, ReadOnly: true})
		}
	}
}

// AnnotationProgressWired marks a master Job, worker StatefulSet or worker Job whose pods are
// wired to the progress endpoint. A job whose children were made without it (by a release
// before the endpoint, or while it was off) stays unwired: wiring its pods would change their
// template, which a running job's must not (TemplateDrift; docs/architecture.md).
const AnnotationProgressWired = "troupe.dev/progress-wired"

// mark annotates a child that holds pods as wired, when w wires the job.
func (w *ProgressWiring) mark(o client.Object) {
	switch o.(type) {
	case *appsv1.StatefulSet, *batchv1.Job:
	default:
		return
	}
	if w == nil {
		return
	}
	a := o.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[AnnotationProgressWired] = "true"
	o.SetAnnotations(a)
}

// keptFor is w for a job whose children that hold pods are held: w when there are none yet or
// one of them is wired, else nil (the job's pods stay as they were made).
func (w *ProgressWiring) keptFor(held []client.Object) *ProgressWiring {
	if w == nil || len(held) == 0 {
		return w
	}
	for _, o := range held {
		if o.GetAnnotations()[AnnotationProgressWired] == "true" {
			return w
		}
	}
	return nil
}

// wiring is the wiring of a job's pods, nil when no endpoint is served (e nil); ok is false
// while the endpoint's CA is not known yet (the pass waits for it rather than build pods without
// it, which would change their template once it is known).
func (e *ProgressEndpoint) wiring(namespace, kind, name string) (w *ProgressWiring, ok bool) {
	if e == nil {
		return nil, true
	}
	ca := e.CA()
	if len(ca) == 0 {
		return nil, false
	}
	return &ProgressWiring{URL: e.URL(namespace, kind, name), CA: string(ca)}, true
}

// latest is the endpoint's latest report of the job, nil without one (or without an endpoint).
func (e *ProgressEndpoint) latest(uid types.UID) *ProgressReport {
	if e == nil || e.Reports == nil {
		return nil
	}
	if rep, ok := e.Reports.Latest(uid); ok {
		return &rep
	}
	return nil
}

// foldProgress is status.progress after the report rep (nil: none since prev): prev when rep
// is what prev already says, else the report with its percent and ETA. A report that does not
// move current forward keeps prev's lastProgressTime.
func foldProgress(prev *troupev1.ProgressStatus, rep *ProgressReport) *troupev1.ProgressStatus {
	if rep == nil {
		return prev.DeepCopy()
	}
	received := metav1.NewTime(rep.Received.Truncate(time.Second))
	next := &troupev1.ProgressStatus{
		Current: rep.Current, Total: rep.Total, Unit: rep.Unit, Message: rep.Message,
		Metrics: slices.Clone(rep.Metrics), LastReportTime: &received, LastProgressTime: &received,
	}
	if prev != nil {
		if len(next.Metrics) == 0 {
			next.Metrics = slices.Clone(prev.Metrics) // the last metrics stay until new ones come
		}
		if prev.LastProgressTime != nil && rep.Current <= prev.Current {
			next.LastProgressTime = prev.LastProgressTime.DeepCopy()
		}
		next.Rate = prev.Rate
	}
	if rep.Rate > 0 {
		next.Rate = formatDecimal(rep.Rate)
	}
	if rep.Total > 0 {
		next.Percent = ptr.To(int32(min(100, rep.Current*100/rep.Total)))
		rate, _ := strconv.ParseFloat(next.Rate, 64)
		switch left := rep.Total - rep.Current; {
		case left <= 0:
			next.Remaining, next.EstimatedCompletionTime = "0s", &received
		case rate > 0:
			d := time.Duration(math.Min(float64(left)/rate, float64(100*365*24*time.Hour/time.Second))) * time.Second
			next.Remaining = d.Round(time.Second).String()
			next.EstimatedCompletionTime = ptr.To(metav1.NewTime(received.Add(d)))
		}
	}
	if prev != nil && prev.LastReportTime != nil && prev.LastReportTime.Equal(&received) && sameReport(prev, next) {
		return prev.DeepCopy() // the report prev already folded, passed again
	}
	return next
}

// sameReport says a and b report the same: all but the times.
func sameReport(a, b *troupev1.ProgressStatus) bool {
	return a.Current == b.Current && a.Total == b.Total && a.Unit == b.Unit && a.Message == b.Message &&
		slices.Equal(a.Metrics, b.Metrics) && a.Rate == b.Rate
}

// formatDecimal is v as status.progress writes numbers: six significant digits at most.
func formatDecimal(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }

// stalledSince says whether a job in phase, with its Running condition running and progress p,
// has stalled at now: it reported at least once, and neither its last move forward nor its
// start of running (after a restart, a resume) is within its deadline. since is the later of
// the two.
func stalledSince(deadline *int32, phase troupev1.JobPhase, running *metav1.Condition, p *troupev1.ProgressStatus, now time.Time) (since time.Time, stalled bool) {
	if deadline == nil || p == nil || p.LastProgressTime == nil || phase != troupev1.JobRunning {
		return time.Time{}, false
	}
	since = p.LastProgressTime.Time
	if running != nil && running.Status == metav1.ConditionTrue && running.LastTransitionTime.After(since) {
		since = running.LastTransitionTime.Time
	}
	return since, !now.Before(since.Add(time.Duration(*deadline) * time.Second))
}

// stalledCondition is the Stalled condition of status st (its phase and Running condition
// computed) at now, and whether the job has one: only a job with a deadline that reported.
// While the job does not run, the condition keeps its last word.
func stalledCondition(deadline *int32, st *troupev1.JobStatus, now time.Time) (metav1.Condition, bool) {
	const t = troupev1.ConditionStalled
	last := meta.FindStatusCondition(st.Conditions, t)
	p := st.Progress
	if deadline == nil || p == nil || p.LastProgressTime == nil {
		if last != nil && last.Status == metav1.ConditionTrue {
			return metav1.Condition{Type: t, Status: metav1.ConditionFalse, Reason: troupev1.ReasonProgressing, Message: "runPolicy.progressDeadlineSeconds is not set"}, true
		}
		return metav1.Condition{}, false
	}
	if st.Phase != troupev1.JobRunning {
		if last == nil {
			return metav1.Condition{}, false
		}
		return *last, true
	}
	since, stalled := stalledSince(deadline, st.Phase, meta.FindStatusCondition(st.Conditions, troupev1.ConditionRunning), p, now)
	if stalled {
		return metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: troupev1.ReasonProgressStalled, Message: stallMessage(*deadline, p, since)}, true
	}
	return metav1.Condition{Type: t, Status: metav1.ConditionFalse, Reason: troupev1.ReasonProgressing, Message: fmt.Sprintf("last moved at %s (%s)",
		p.LastProgressTime.UTC().Format(time.RFC3339), progressText(p))}, true
}

// stallMessage says when the job last moved, and how far it was.
func stallMessage(deadline int32, p *troupev1.ProgressStatus, since time.Time) string {
	return fmt.Sprintf("no progress reported since %s (%s; runPolicy.progressDeadlineSeconds: %d)",
		since.UTC().Format(time.RFC3339), progressText(p), deadline)
}

// progressText is "120/1000 steps", or "120 steps" without a total.
func progressText(p *troupev1.ProgressStatus) string {
	unit := p.Unit
	if unit == "" {
		unit = "steps"
	}
	if p.Total > 0 {
		return fmt.Sprintf("%d/%d %s", p.Current, p.Total, unit)
	}
	return fmt.Sprintf("%d %s", p.Current, unit)
}

// stalledFailure is the failure of the current attempt when the previous status says it runs
// and stalled (the Stalled condition is written first, then acted on): reason Stalled, of no
// replica (a stall is the job's, not one pod's).
func stalledFailure(deadline *int32, prev *troupev1.JobStatus, now time.Time) (string, Failure) {
	if !meta.IsStatusConditionTrue(prev.Conditions, troupev1.ConditionStalled) {
		return "", Failure{}
	}
	since, stalled := stalledSince(deadline, prev.Phase, meta.FindStatusCondition(prev.Conditions, troupev1.ConditionRunning), prev.Progress, now)
	if !stalled {
		return "", Failure{}
	}
	return "the job stalled: " + stallMessage(*deadline, prev.Progress, since), Failure{Reason: troupev1.FailureStalled}
}

// stallWakeup is how long until the job, running and reporting, would stall: the pass that
// says so must run then, though no watch event comes (0: no such wake-up).
func stallWakeup(deadline *int32, st *troupev1.JobStatus, now time.Time) time.Duration {
	if meta.IsStatusConditionTrue(st.Conditions, troupev1.ConditionStalled) {
		return 0
	}
	since, stalled := stalledSince(deadline, st.Phase,
		meta.FindStatusCondition(st.Conditions, troupev1.ConditionRunning), st.Progress, now)
	switch {
	case since.IsZero():
		return 0
	case stalled:
		return time.Second
	}
	return since.Add(time.Duration(*deadline)*time.Second).Sub(now) + time.Second
}
