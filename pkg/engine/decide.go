package engine

import (
	"context"
	"fmt"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// decision is what a pass decides once it has observed the job (decide): the plan, the
// observation the rest of the pass reads, and the writes that carry the plan out before any
// child is created or updated (carryOut).
type decision struct {
	plan Plan
	// obs is the observation as the plan reads it: without the master Job when a restart sets
	// it aside (an earlier attempt's, or one whose failure is the attempt's, not the job's).
	obs *Observed
	// suspendLauncher is the master Job of a job failed for good by a lost worker: suspended so
	// that its launcher does not run on against a broken group.
	suspendLauncher *batchv1.Job
	// deleteMasterJob is the master Job of an earlier attempt or of a job that pauses
	// (deleteMasterWhy says which); deletePods are the master pods of earlier attempts and a
	// paused job's, deleted rather than left to the garbage collector.
	deleteMasterJob *batchv1.Job
	deleteMasterWhy string
	deletePods      []*corev1.Pod
	// replaceWorkerJob is a failed worker Job a failure policy rule ignores: deleted, and made
	// again as a missing child.
	replaceWorkerJob *batchv1.Job
}

// decide makes, once, every decision of a pass: the pause (planPause), the restart
// (planRestart), the master's pods (planMasterPods), the verdict, the ready workers and whether
// missing children may be created. It is a pure function of the spec the adapter described,
// the observation and the previous status; the plan it returns goes into copies of that spec
// (withPlan).
func decide(described *Spec, obs *Observed, prev *troupev1.JobStatus) decision {
	pause := planPause(described, prev, liveMasterJob(obs))
	s := described.withPlan(Plan{Pause: pause.pause, WasPaused: WasPaused(prev)})
	d := decision{plan: s.Plan, obs: obs, deleteMasterJob: pause.deleteMaster, deleteMasterWhy: "pausing"}
	if pause.pause {
		d.obs = obs.withoutMaster() // a paused job has no master Job: it is deleted, or going
	}
	restart := planRestart(s, d.obs, prev)
	d.suspendLauncher, d.deletePods, d.replaceWorkerJob = restart.launcherToStop, restart.staleMasterPods, restart.replaceWorkerJob
	if j := restart.staleMasterJob; j != nil && j.DeletionTimestamp.IsZero() {
		d.deleteMasterJob, d.deleteMasterWhy = j, fmt.Sprintf("restart: the master Job of attempt %d", attemptOf(j.Spec.Template.Labels))
	}
	if restart.forgetsMaster() && d.obs.MasterJob != nil {
		d.obs = d.obs.withoutMaster()
	}
	pods := planMasterPods(s, d.obs)
	for _, p := range pods.delete {
		if !slices.Contains(d.deletePods, p) { // a paused job's master pod of an earlier attempt
			d.deletePods = append(d.deletePods, p)
		}
	}
	d.plan.Restart, d.plan.RestartSeen = restart.state, restart.seen
	d.plan.HoldMaster = pods.holdMaster
	d.plan.ReadyWorkers = ReadyWorkers(s, d.obs)
	d.plan.Verdict = Verdict(prev, d.obs)
	d.plan.HoldCreates = holdCreates(d.plan.Ended(), d.obs)
	d.plan.CompletedWorkers = completedWorkers(s, d.obs)
	d.plan.Expired = d.plan.Ended() && ttlExpired(s, prev, obs.Now)
	return d
}

// carryOut makes the writes a pass's decision calls for before any child is created or updated
// (decide): a failed job's launcher suspended, an earlier attempt's master Job and the master
// pods of earlier attempts or of a paused job deleted. Deletes carry the object's UID, so that
// a namesake created since is not deleted.
func (r *Reconciler) carryOut(ctx context.Context, d decision) error {
	if j := d.suspendLauncher; j != nil {
		stopped := j.DeepCopy() // the observation keeps the Job as observed
		stopped.Spec.Suspend = ptr.To(true)
		if err := r.client.Patch(ctx, stopped, client.MergeFrom(j)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("suspend Job %s of the failed job: %w", j.Name, err)
		}
	}
	if j := d.replaceWorkerJob; j != nil {
		ctrl.LoggerFrom(ctx).V(2).Info("a failure policy rule ignores the failed worker Job: making it again", "job", j.Name)
		if err := r.deleteWorkerJob(ctx, j); err != nil {
			return err
		}
	}
	if j := d.deleteMasterJob; j != nil {
		ctrl.LoggerFrom(ctx).V(2).Info("deleting the master Job", "job", j.Name, "why", d.deleteMasterWhy)
		if err := r.client.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground),
			client.Preconditions{UID: &j.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete Job %s (%s): %w", j.Name, d.deleteMasterWhy, err)
		}
	}
	return r.deletePods(ctx, d.deletePods)
}
