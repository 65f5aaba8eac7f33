package kueue

import (
	"context"
	"errors"
	"fmt"
	"maps"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueuev1 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/engine"
)

// MultiKueue (docs/kueue.md): a manager cluster queues a job whose spec.managedBy is
// kueue.x-k8s.io/multikueue, and Kueue's generic adapter for external frameworks copies it into
// the worker cluster whose Kueue reserved quota for a copy of its Workload, labelled with that
// Workload's name (troupev1.LabelPrebuiltWorkload). The adapter then copies the copy's status
// into the manager's job, and deletes the copy when the manager's Workload goes or loses its
// quota. Kueue makes no Workload for a kind it does not know, so the manager's troupe makes it,
// as for any queued job; the worker's troupe adopts the one MultiKueue made.

// errPrebuiltMissing: the job names a Workload MultiKueue made, which is not there (yet).
var errPrebuiltMissing = errors.New("the Workload MultiKueue made for this copy of the job is not there")

// reconcileDispatched drives the Workload of a job MultiKueue dispatches, in the manager
// cluster: the operator makes it and keeps it as a queued job's (its PodsReady condition, its
// quota handed back on eviction, its finalizer), but writes neither the job's spec nor its
// status, which MultiKueue copies from the worker cluster. The job's runPolicy.suspend is the
// user's own: suspended, its Workload is made inactive (Kueue evicts it and MultiKueue deletes
// the copy and its pods in the worker cluster); resumed, active again.
func (r *Reconciler) reconcileDispatched(ctx context.Context, job engine.Object, qj troupev1.QueuedJob, queue string) error {
	wl, err := r.workload(ctx, job)
	if err != nil {
		return err
	}
	switch {
	case !job.GetDeletionTimestamp().IsZero(), wl != nil && !wl.DeletionTimestamp.IsZero():
		return r.removeFinalizer(ctx, wl)
	case job.JobStatus().Phase.Ended():
		return r.finish(ctx, job, wl)
	case wl == nil:
		_, err := r.makeWorkload(ctx, job, queue, WorkloadName(r.gvk, job.GetName(), job.GetUID()), nil)
		return err
	}
	if active := !ptr.Deref(qj.JobRunPolicy().Suspend, false); ptr.Deref(wl.Spec.Active, true) != active {
		orig := wl.DeepCopy()
		wl.Spec.Active = ptr.To(active)
		if err := r.client.Patch(ctx, wl, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return fmt.Errorf("set Workload %s active: %v: %w", wl.Name, active, err)
		}
		return nil
	}
	if !HasQuota(wl) {
		if string(wl.Spec.QueueName) != queue {
			orig := wl.DeepCopy()
			wl.Spec.QueueName = kueuev1.LocalQueueName(queue)
			if err := r.client.Patch(ctx, wl, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
				return fmt.Errorf("move Workload %s to LocalQueue %s: %w", wl.Name, queue, err)
			}
		}
		if _, change := r.podSetsChanged(ctx, job, wl); change != "" {
			return r.deleteWorkload(ctx, job, wl, change)
		}
		return nil
	}
	if ev := Evicted(wl); ev != nil {
		// No pod of the job runs here: its quota goes back at once, and MultiKueue then deletes
		// the copy in the worker cluster.
		return r.releaseQuota(ctx, wl, ev)
	}
	if Admitted(wl) {
		// Kueue's waitForPodsReady times the manager's Workload too: the job's status, copied
		// from the worker cluster, says whether its pods are ready there.
		return r.setPodsReady(ctx, wl, PodsReady(job.JobStatus()))
	}
	return nil
}

// prebuiltWorkload is the Workload MultiKueue made for its copy of a job in a worker cluster,
// named by the copy's label, with the copy made its controller (the owner reference, and
// troupe's and Kueue's job UID labels, by which the operator's cache selects it): nil when there
// is none, or when another object controls it (MultiKueue's copy of a job with the same name
// from another manager, say), which is left alone.
func (r *Reconciler) prebuiltWorkload(ctx context.Context, job engine.Object, name string) (*kueuev1.Workload, error) {
	wl := &kueuev1.Workload{}
	key := client.ObjectKey{Namespace: job.GetNamespace(), Name: name}
	err := r.client.Get(ctx, key, wl)
	if apierrors.IsNotFound(err) {
		// Not adopted yet, it may lack the label the cache selects Workloads by.
		err = r.reader.Get(ctx, key, wl)
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("get Workload %s: %w", name, err)
	}
	if owner := metav1.GetControllerOf(wl); owner != nil {
		if owner.UID == job.GetUID() {
			return wl, nil
		}
		ctrl.LoggerFrom(ctx).Info("the Workload the job names is another object's; not using it",
			"workload", name, "controller", owner.Kind+"/"+owner.Name)
		return nil, nil
	}
	orig := wl.DeepCopy()
	ref := *metav1.NewControllerRef(job, r.gvk)
	wl.OwnerReferences = append(wl.OwnerReferences, ref)
	wl.Labels = maps.Clone(wl.Labels)
	if wl.Labels == nil {
		wl.Labels = map[string]string{}
	}
	wl.Labels[troupev1.LabelManagedBy] = troupev1.ManagedByTroupe
	wl.Labels[troupev1.LabelJobUID] = string(job.GetUID())
	wl.Labels[LabelKueueJobUID] = string(job.GetUID())
	if err := r.client.Patch(ctx, wl, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return nil, fmt.Errorf("adopt Workload %s: %w", name, err)
	}
	return wl, nil
}

// finishOutOfSync ends a prebuilt Workload whose job now asks for other pod sets than it holds,
// as Kueue does for its own kinds: the copy cannot run under it, and troupe makes no other.
func (r *Reconciler) finishOutOfSync(ctx context.Context, wl *kueuev1.Workload, change string) error {
	if Finished(wl) {
		return nil
	}
	orig := wl.DeepCopy()
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{
		Type: kueuev1.WorkloadFinished, Status: metav1.ConditionTrue, Reason: kueuev1.WorkloadFinishedReasonOutOfSync,
		Message:            "the job's pod sets changed (" + change + ") from those of the Workload MultiKueue made for it",
		LastTransitionTime: metav1.NewTime(r.clock.Now()), ObservedGeneration: wl.Generation,
	})
	if err := r.client.Status().Patch(ctx, wl, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("mark Workload %s finished: %w", wl.Name, err)
	}
	return nil
}
