package engine

import (
	"context"
	"fmt"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/metrics"
)

// Whole-job restarts (runPolicy.failurePolicy; docs/failure-handling.md). An MPI run cannot
// lose a rank and go on, so when a worker pod is lost while the launcher runs, or the launcher
// Job fails, the job is restarted as a whole, up to maxRestarts times. Every step is derived
// from the API, never from the operator's memory, so an operator restarted at any point
// carries on where the last one stopped:
//
//   - status.restarts is the current attempt. Every pod of a job with a failure policy carries
//     it in its label troupe.dev/restart-attempt (the master Job in its pod template), so the
//     pods of an earlier attempt are told from the current one's by label alone.
//   - A failure of the current attempt is first recorded, and nothing else done: one status
//     write sets restarts to the next attempt and the Restarting condition to StoppingAttempt.
//     The write carries the job's resourceVersion, so a reconcile from a stale copy cannot
//     count the same failure twice.
//   - While the condition says StoppingAttempt, the worker StatefulSets are held at zero with
//     the new attempt's template, the old master Job and its pods are deleted, and no master is
//     created. Once no pod of an earlier attempt is left and every StatefulSet's controller
//     reports zero pods for its latest spec, a status write says StartingAttempt; only the
//     next reconcile creates pods, so a rank of one attempt never meets a rank of the next.
//   - StartingAttempt creates the workers and a new master Job as for a new job (the
//     Service, hostfile and credentials stayed); once its launcher runs, the condition turns
//     False with reason AttemptRunning.

// RestartState is observed, not desired: where the job is in a restart.
type RestartState struct {
	// Attempt is the job's current attempt (status.restarts); the pods get it as their label.
	Attempt int32
	// Stopping holds the workers at zero and creates no master: pods or the master Job of an
	// earlier attempt remain, or the status has not yet recorded that they are gone.
	Stopping bool
	// Deciding leaves the master Job alone for this reconcile: a failure of the current
	// attempt was seen and is recorded (status) before any child changes.
	Deciding bool
}

// RestartObservation is what the engine saw of the current attempt's failure.
type RestartObservation struct {
	// Cause says why the current attempt failed, naming the pod or Job; "" while it has not.
	Cause string
	// WorkerLost says the cause is a lost worker (the master Job has not failed).
	WorkerLost bool
	// Clean says no pod, master Job or worker pod template of an earlier attempt is left.
	Clean bool
}

// restartsEnabled says whether a lost rank restarts the job. Debug mode never restarts: its
// launcher sleeps while a user works in it.
func (s *Spec) restartsEnabled() bool {
	return s.RunPolicy.FailurePolicy != nil && s.RunMode.Debug == nil
}

// maxRestarts is runPolicy.failurePolicy.maxRestarts (0 without a failure policy).
func (s *Spec) maxRestarts() int32 {
	if fp := s.RunPolicy.FailurePolicy; fp != nil {
		return fp.MaxRestarts
	}
	return 0
}

// holdsMaster says the master Job is not a desired child while a restart stops the old
// attempt or records its failure.
func (r RestartState) holdsMaster() bool { return r.Stopping || r.Deciding }

// labelRestartAttempt puts the attempt on a pod template of a job with a failure policy. Jobs
// without one get no label, so their templates (and running pods) are as they always were.
func (s *Spec) labelRestartAttempt(tmpl *corev1.PodTemplateSpec) {
	if s.RunPolicy.FailurePolicy == nil {
		return
	}
	if tmpl.Labels == nil {
		tmpl.Labels = map[string]string{}
	}
	tmpl.Labels[troupev1.LabelRestartAttempt] = strconv.Itoa(int(s.Plan.Restart.Attempt))
}

// attemptOf reads a restart attempt label; a pod without one is of attempt 0.
func attemptOf(labels map[string]string) int32 {
	n, err := strconv.ParseInt(labels[troupev1.LabelRestartAttempt], 10, 32)
	if err != nil {
		return 0
	}
	return int32(n)
}

// restartPlan is what one pass decides about a whole-job restart: a pure function of the
// spec, the previous status and the observation (planRestart), carried out by settleRestart.
type restartPlan struct {
	state RestartState
	seen  RestartObservation
	// staleMasterJob is the master Job of an earlier attempt: deleted (when not being deleted
	// already) and no longer the job's master.
	staleMasterJob *batchv1.Job
	// staleMasterPods are master pods of earlier attempts to delete (the worker pods go with
	// the StatefulSets' scale to zero).
	staleMasterPods []*corev1.Pod
	// launcherToStop is the master Job of a job that failed because a worker was lost with no
	// restart left: suspended, so that its launcher does not run on against a broken group.
	launcherToStop *batchv1.Job
}

// forgetsMaster says the observed master Job is not the job's master for the rest of the pass:
// it is of an earlier attempt, or its failure is the attempt's, not the job's (the failed
// master Job must not finish the job, and it stays until the next attempt is recorded).
func (p *restartPlan) forgetsMaster() bool { return p.staleMasterJob != nil || p.state.Deciding }

// planRestart decides the restart state from the status and the observation: the attempt,
// whether what is left of earlier attempts must go first (Stopping), and whether a failure of
// the current attempt is to be recorded (Deciding). Jobs without a failure policy get the zero
// plan, and are left exactly as before.
func planRestart(s *Spec, obs *Observed, prev *troupev1.JobStatus) restartPlan {
	var p restartPlan
	if s.RunPolicy.FailurePolicy == nil {
		return p
	}
	p.state.Attempt = prev.Restarts
	if Finished(prev, nil) {
		p.launcherToStop = launcherToStop(obs, prev)
		return p
	}
	stale := false
	if j := obs.MasterJob; j != nil && attemptOf(j.Spec.Template.Labels) != p.state.Attempt {
		stale = true
		p.staleMasterJob = j
	}
	for i := range obs.Pods {
		pod := &obs.Pods[i]
		if attemptOf(pod.Labels) == p.state.Attempt {
			continue
		}
		stale = true
		if pod.Labels[troupev1.LabelRole] == troupev1.RoleMaster && pod.DeletionTimestamp.IsZero() {
			p.staleMasterPods = append(p.staleMasterPods, pod)
		}
	}
	p.seen.Clean = !stale && statefulSetsAtAttempt(s, obs, p.state.Attempt)
	p.state.Stopping = stale || restartReason(prev) == troupev1.ReasonStoppingAttempt
	if p.state.Stopping || !s.restartsEnabled() {
		return p
	}
	p.seen.Cause, p.seen.WorkerLost = attemptFailure(s, obs, prev)
	p.state.Deciding = p.seen.Cause != "" && p.state.Attempt < s.maxRestarts()
	return p
}

// settleRestart carries out planRestart's plan: it removes what is left of earlier attempts and
// stops the launcher of a job failed for good. It runs after the children are observed and
// before anything is created, and returns the plan and the observation the rest of the pass
// goes on with: without the master Job when the plan sets it aside (withoutMaster).
func (r *Reconciler) settleRestart(ctx context.Context, s *Spec, obs *Observed, prev *troupev1.JobStatus) (restartPlan, *Observed, error) {
	p := planRestart(s, obs, prev)
	if j := p.launcherToStop; j != nil {
		before := j.DeepCopy()
		j.Spec.Suspend = ptr.To(true)
		if err := r.client.Patch(ctx, j, client.MergeFrom(before)); client.IgnoreNotFound(err) != nil {
			return p, obs, fmt.Errorf("suspend Job %s of the failed job: %w", j.Name, err)
		}
	}
	if j := p.staleMasterJob; j != nil && j.DeletionTimestamp.IsZero() {
		ctrl.LoggerFrom(ctx).V(2).Info("restart: deleting the master Job of an earlier attempt", "job", j.Name,
			"attempt", attemptOf(j.Spec.Template.Labels))
		if err := r.client.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground),
			client.Preconditions{UID: &j.UID}); client.IgnoreNotFound(err) != nil {
			return p, obs, fmt.Errorf("delete Job %s of an earlier attempt: %w", j.Name, err)
		}
	}
	for _, pod := range p.staleMasterPods {
		if err := r.client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}); client.IgnoreNotFound(err) != nil {
			return p, obs, fmt.Errorf("delete master pod %s of an earlier attempt: %w", pod.Name, err)
		}
	}
	if p.forgetsMaster() && obs.MasterJob != nil {
		obs = obs.withoutMaster()
	}
	return p, obs, nil
}

// statefulSetsAtAttempt says every worker StatefulSet has the current attempt's template and
// its controller, having seen that spec, counts no pod: no pod of an earlier attempt can exist
// that the cache has not shown yet.
func statefulSetsAtAttempt(s *Spec, obs *Observed, attempt int32) bool {
	for i := range s.WorkerSets {
		sts := obs.StatefulSets[s.WorkerSets[i].Name]
		if sts == nil {
			continue
		}
		if attemptOf(sts.Spec.Template.Labels) != attempt ||
			sts.Status.ObservedGeneration < sts.Generation || sts.Status.Replicas > 0 {
			return false
		}
	}
	return true
}

// launcherToStop is the master Job to suspend of a job that failed because a worker was lost
// with no restart left, or nil. The Job stays, with the pods that ended before, for inspection.
func launcherToStop(obs *Observed, prev *troupev1.JobStatus) *batchv1.Job {
	c := meta.FindStatusCondition(prev.Conditions, troupev1.ConditionFailed)
	j := obs.MasterJob
	if c == nil || c.Reason != troupev1.ReasonWorkerFailed || j == nil || terminalJobCondition(j) != nil ||
		ptr.Deref(j.Spec.Suspend, false) || !j.DeletionTimestamp.IsZero() {
		return nil
	}
	return j
}

// recordRestart emits the Restarting event once a restart is recorded in the status.
func (r *Reconciler) recordRestart(job Object, prev, next *troupev1.JobStatus) {
	if next.Restarts <= prev.Restarts {
		return
	}
	msg := fmt.Sprintf("attempt %d", next.Restarts)
	if c := meta.FindStatusCondition(next.Conditions, troupev1.ConditionRestarting); c != nil {
		msg = c.Message
	}
	r.recorder.Eventf(job, nil, corev1.EventTypeWarning, troupev1.EventRestarting, "Restart", "%s", msg)
	metrics.JobRestarted(r.gvk.Kind, job.GetNamespace())
}

// masterJobFailure says why a master Job failed, for a restart's cause: its reason, its
// message and what the launcher said.
func masterJobFailure(s *Spec, j *batchv1.Job, c *batchv1.JobCondition, pods []corev1.Pod) string {
	msg := fmt.Sprintf("%s Job %s failed (%s", s.masterType(), j.Name, c.Reason)
	if c.Message != "" {
		msg += ": " + c.Message
	}
	msg += ")"
	if why := masterInitFailure(pods); why != "" {
		msg += "; " + why
	} else if why := masterExitMessage(pods); why != "" {
		msg += "; " + why
	}
	return msg
}
