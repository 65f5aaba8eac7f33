package engine

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// The master's verdict is the master Job's: Complete or Failed. kube-controller-manager's Job
// controller gives it after it has counted the pod and removed the pod's tracking finalizer,
// which under load comes many seconds after the launcher exited (docs/performance.md measured
// p50 21 s with 200 launchers ending together). When the Job's success is certain before the
// Job controller writes it, the engine does not wait for it: the launcher's exit is the job's
// end, and a user waiting on the job (kubectl wait, a pipeline) should learn it then.
//
// Success is certain, for troupe's master Job (completions 1, parallelism 1, a failed pod
// replaced only once it has terminated), when
//   - the Job says SuccessCriteriaMet: the Job controller's own decision, which it turns into
//     Complete once the Job's pods have terminated; or
//   - one of the Job's pods has succeeded and none of its pods is still active. The Job
//     controller could then still fail the Job for one reason only, a deadline
//     (activeDeadlineSeconds) that passes before it syncs, since it checks the deadline before
//     it counts completions: so not for a Job with a deadline. Failures count against
//     backoffLimit and the pod failure policy before a replacement pod is made; a pod that
//     exists and succeeded means neither stopped the Job, and no pod of it can fail any more.
//
// A failure is never anticipated: the Job's FailureTarget comes while its pods may still
// terminate, and a restart (restart.go) or a user's retry must not start a launcher while the
// failed one lives, which is why the Job controller holds Failed back until then.

// masterVerdict is the master's verdict: Succeeded or Failed once it is in (above), "" while the
// master runs. A pass computes it once, when its observation is complete (Observed.Verdict).
func masterVerdict(job *batchv1.Job, pods []corev1.Pod) troupev1.JobPhase {
	if c := terminalJobCondition(job); c != nil {
		if c.Type == batchv1.JobComplete {
			return troupev1.JobSucceeded
		}
		return troupev1.JobFailed
	}
	if successCertain(job, pods) {
		return troupev1.JobSucceeded
	}
	return ""
}

// successCertain: the master Job will be Complete, though it does not say so yet (above).
func successCertain(job *batchv1.Job, pods []corev1.Pod) bool {
	if job == nil || !job.DeletionTimestamp.IsZero() || managedByOther(job) {
		return false
	}
	if jobConditionTrue(job, batchv1.JobSuccessCriteriaMet) {
		return true
	}
	if jobConditionTrue(job, batchv1.JobFailureTarget) || job.Spec.ActiveDeadlineSeconds != nil ||
		derefOne(job.Spec.Completions) != 1 || derefOne(job.Spec.Parallelism) != 1 {
		return false
	}
	succeeded := false
	for i := range pods {
		p := &pods[i]
		if !metav1.IsControlledBy(p, job) {
			continue
		}
		switch p.Status.Phase {
		case corev1.PodSucceeded:
			succeeded = true
		case corev1.PodFailed:
		default:
			return false // still active: the Job is not done with its pods
		}
	}
	return succeeded
}

// masterFinishedAt is when the master Job's succeeded pod ended: the latest finish of its
// containers, or nil when no pod of the Job says.
func masterFinishedAt(job *batchv1.Job, pods []corev1.Pod) *metav1.Time {
	var at *metav1.Time
	for i := range pods {
		p := &pods[i]
		if job == nil || !metav1.IsControlledBy(p, job) || p.Status.Phase != corev1.PodSucceeded {
			continue
		}
		for _, cs := range p.Status.ContainerStatuses {
			if t := cs.State.Terminated; t != nil && !t.FinishedAt.IsZero() && (at == nil || at.Before(&t.FinishedAt)) {
				at = t.FinishedAt.DeepCopy()
			}
		}
	}
	return at
}

// managedByOther: the Job's spec.managedBy gives it to a controller other than the Job
// controller, whose rules the engine does not know.
func managedByOther(job *batchv1.Job) bool {
	return job.Spec.ManagedBy != nil && *job.Spec.ManagedBy != batchv1.JobControllerName
}

func jobConditionTrue(job *batchv1.Job, t batchv1.JobConditionType) bool {
	for _, c := range job.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// derefOne is a Job's completions or parallelism, both 1 when unset.
func derefOne(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}
