package engine

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// prepareRunMode completes the run mode from what the job's status says and, for a paused job,
// deletes its master Job. It runs before the children are observed, so a paused job's master
// Job is not one of its desired children. A finished job is never paused: the master Job that
// recorded its end stays, even if pause is asked in the same moment it ended.
func (r *Reconciler) prepareRunMode(ctx context.Context, job Object, s *Spec, prev *troupev1.JobStatus) error {
	s.RunMode.WasPaused = WasPaused(prev)
	if !s.RunMode.Pause {
		return nil
	}
	if prev.Phase == troupev1.JobSucceeded || prev.Phase == troupev1.JobFailed {
		s.RunMode.Pause = false
		return nil
	}
	var master batchv1.Job
	err := r.client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: s.Master.JobName}, &master)
	switch {
	case client.IgnoreNotFound(err) != nil:
		return fmt.Errorf("get Job %s: %w", s.Master.JobName, err)
	case err != nil || !metav1.IsControlledBy(&master, job) || !master.DeletionTimestamp.IsZero():
		return nil
	case terminalJobCondition(&master) != nil:
		s.RunMode.Pause = false
		return nil
	}
	ctrl.LoggerFrom(ctx).V(2).Info("pausing: deleting the master Job", "job", s.Master.JobName)
	if err := r.client.Delete(ctx, &master, client.PropagationPolicy(metav1.DeletePropagationBackground),
		client.Preconditions{UID: &master.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete Job %s to pause: %w", s.Master.JobName, err)
	}
	return nil // the Paused event comes with the status that says so (events.go)
}

// settleRunMode acts on what was observed: a paused job's master pods are deleted now rather
// than left to the garbage collector, and a resuming job holds its new master Job back until
// the previous one's pods are gone.
func (r *Reconciler) settleRunMode(ctx context.Context, s *Spec, obs *Observed) error {
	if s.Paused() {
		return r.deleteMasterPods(ctx, obs)
	}
	if obs.MasterJob == nil {
		for i := range obs.Pods {
			if obs.Pods[i].Labels[troupev1.LabelRole] == troupev1.RoleMaster {
				s.RunMode.HoldMaster = true
				break
			}
		}
	}
	return nil
}
