package engine

import (
	"context"
	"fmt"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// pausePlan is what a pass decides about pause before it observes the children: whether the
// pause asked is in force, and the master Job it deletes for it (nil: none to delete).
type pausePlan struct {
	pause        bool
	deleteMaster *batchv1.Job
}

// planPause decides pause from the spec, the previous status and the job's master Job as read
// (nil when it does not exist, is not the job's or is being deleted). A finished job is never
// paused: the master Job that recorded its end stays, even if pause is asked in the same moment
// it ended.
func planPause(s *Spec, prev *troupev1.JobStatus, master *batchv1.Job) pausePlan {
	switch {
	case !s.RunMode.Pause:
		return pausePlan{}
	case Finished(prev, nil):
		return pausePlan{}
	case master == nil:
		return pausePlan{pause: true}
	case terminalJobCondition(master) != nil:
		return pausePlan{}
	}
	return pausePlan{pause: true, deleteMaster: master}
}

// prepareRunMode decides whether pause is in force (planPause) and, for a paused job, deletes
// its master Job. It runs before the children are observed, so a paused job's master Job is not
// one of its desired children.
func (r *Reconciler) prepareRunMode(ctx context.Context, job Object, s *Spec, prev *troupev1.JobStatus) (paused bool, err error) {
	var master *batchv1.Job
	if s.RunMode.Pause && !Finished(prev, nil) {
		var j batchv1.Job
		err := r.client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: s.Master.JobName}, &j)
		if client.IgnoreNotFound(err) != nil {
			return false, fmt.Errorf("get Job %s: %w", s.Master.JobName, err)
		}
		if err == nil && metav1.IsControlledBy(&j, job) && j.DeletionTimestamp.IsZero() {
			master = &j
		}
	}
	p := planPause(s, prev, master)
	if j := p.deleteMaster; j != nil {
		ctrl.LoggerFrom(ctx).V(2).Info("pausing: deleting the master Job", "job", j.Name)
		if err := r.client.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground),
			client.Preconditions{UID: &j.UID}); client.IgnoreNotFound(err) != nil {
			return false, fmt.Errorf("delete Job %s to pause: %w", j.Name, err)
		}
	}
	return p.pause, nil // the Paused event comes with the status that says so (events.go)
}

// masterPodsPlan is what a pass decides about the master's pods once it has observed them:
// those to delete now (a paused job's, rather than left to the garbage collector), and whether
// a master Job to be created again waits for the previous one's pods to be gone, so that two
// master pods never share the master's host name.
type masterPodsPlan struct {
	delete     []*corev1.Pod
	holdMaster bool
}

// planMasterPods decides it from the run mode and the observation.
func planMasterPods(s *Spec, obs *Observed) masterPodsPlan {
	switch {
	case s.Paused():
		return masterPodsPlan{delete: liveMasterPods(obs)}
	case obs.MasterJob != nil:
		return masterPodsPlan{}
	}
	return masterPodsPlan{holdMaster: slices.ContainsFunc(obs.Pods, func(p corev1.Pod) bool {
		return p.Labels[troupev1.LabelRole] == troupev1.RoleMaster // terminating ones too
	})}
}

// settleRunMode carries out planMasterPods and says whether the master is held back.
func (r *Reconciler) settleRunMode(ctx context.Context, s *Spec, obs *Observed) (holdMaster bool, err error) {
	p := planMasterPods(s, obs)
	return p.holdMaster, r.deletePods(ctx, p.delete)
}

// deletePods deletes pods of the job (a master's, for pause or the clean-pod policy All).
func (r *Reconciler) deletePods(ctx context.Context, pods []*corev1.Pod) error {
	for _, p := range pods {
		if err := r.client.Delete(ctx, p); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete master pod %s: %w", p.Name, err)
		}
	}
	return nil
}
