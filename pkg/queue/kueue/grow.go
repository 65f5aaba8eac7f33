package kueue

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueuev1 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/engine"
)

// errSwapping: Kueue is between finishing a job's Workload and admitting the slice that replaces
// it; the job is looked at again after SwapGrace (or on the slice's admission).
var errSwapping = errors.New("waiting for Kueue to admit the slice that replaces the job's Workload")

// SwapGrace is how long after Kueue finished a job's Workload in place of a slice the job runs
// on while the slice is not admitted yet: Kueue writes the two one after the other, and if the
// second write fails (Kueue then queues the slice again), the job is stopped after this.
const SwapGrace = 15 * time.Second

// Swapping reports whether wl, a slice not admitted, replaces a Workload among retired that Kueue
// finished for it (WorkloadSliceReplaced) less than SwapGrace before now.
func Swapping(wl *kueuev1.Workload, retired []*kueuev1.Workload, now time.Time) bool {
	key := ReplacementFor(wl)
	if key == "" {
		return false
	}
	for _, old := range retired {
		c := meta.FindStatusCondition(old.Status.Conditions, kueuev1.WorkloadFinished)
		if sliceKey(old) == key && c != nil && c.Status == metav1.ConditionTrue && c.Reason == kueuev1.WorkloadSliceReplaced &&
			now.Sub(c.LastTransitionTime.Time) < SwapGrace {
			return true
		}
	}
	return false
}

// growsBySlice reports whether the job, admitted under wl, grows by a Workload slice rather than
// by a stop: it opted in (SlicesEnabled), is running, and asks more than wl is charged for in
// the same pod sets, none fewer; wl is admitted, not evicted nor deleted, and Sliceable.
func (r *Reconciler) growsBySlice(job engine.Object, s *engine.Spec, wl *kueuev1.Workload) bool {
	if !SlicesEnabled(job, s) || wl == nil || job.JobStatus().Phase.Ended() {
		return false
	}
	if _, ok := troupev1.PrebuiltWorkload(job.GetLabels()); ok {
		return false // MultiKueue's copy runs under the one Workload MultiKueue made for it
	}
	if !wl.DeletionTimestamp.IsZero() || !Admitted(wl) || Evicted(wl) != nil || !Sliceable(wl) {
		return false
	}
	return Grows(ChargedPodSets(wl), PodSetCounts(s, job.(troupev1.QueuedJob).PodSets()[0].Name))
}

// growBySlice keeps an admitted elastic job running at its admission while the slice of its new
// size waits: it makes the slice (or makes it again when the job's size changed since), keeps the
// job's record of its admitted counts (so the engine makes no pod beyond them) and says on the
// job's Admitted condition what it waits for. Kueue admits the slice for what it adds and marks
// the Workload it replaces Finished; the next pass then finds the slice the job's Workload.
func (r *Reconciler) growBySlice(ctx context.Context, job engine.Object, s *engine.Spec, sl Slices, queue, change string) error {
	wl := sl.Current
	want := PodSetCounts(s, job.(troupev1.QueuedJob).PodSets()[0].Name)
	pending := sl.Pending
	switch {
	case pending != nil && PodSetCountsChange(pending.Spec.PodSets, want) != "":
		// Scaled again while it waited: a slice of the newest size follows once this one is gone.
		return r.withdrawSlice(ctx, job, pending, "the job's size changed again")
	case pending != nil && Stuck(pending):
		return r.withdrawSlice(ctx, job, pending, fmt.Sprintf(
			"Kueue could not mark Workload %s finished in its place (a write raced it) and left the slice aside; a new slice follows", wl.Name))
	case pending == nil:
		// Kueue finishes wl when it admits the slice, with wl's resourceVersion as its cache
		// holds it: a write of troupe's just before would make that fail (Stuck). So wl's last
		// write goes first, and the slice on a pass that writes nothing to wl.
		if wrote, err := r.writePodsReady(ctx, wl, PodsReady(job.JobStatus())); err != nil || wrote {
			return err
		}
		pending = BuildSlice(wl, r.workloadName(job, sl), want)
		if err := r.client.Create(ctx, pending); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create Workload slice %s: %w", pending.Name, err)
		}
		r.recorder.Eventf(job, pending, corev1.EventTypeNormal, EventCreatedWorkload, "Grow",
			"created Workload slice %s in LocalQueue %s to grow the job (%s) in place of Workload %s; it runs at its admitted size until Kueue admits the slice",
			pending.Name, queue, change, wl.Name)
	}
	// wl is not written while the slice waits (its PodsReady stays as it was: the job runs the
	// pods admitted), for the reason above.
	if err := r.recordCharged(ctx, job, wl); err != nil {
		return err
	}
	return r.setCondition(ctx, job, GrowingCondition(wl, pending, queue))
}

// withdrawSlice deletes a slice that waits for nothing now; its finalizer goes on the pass its
// deletion brings (tidySlices).
func (r *Reconciler) withdrawSlice(ctx context.Context, job engine.Object, wl *kueuev1.Workload, why string) error {
	if err := r.client.Delete(ctx, wl, client.Preconditions{UID: &wl.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete Workload slice %s: %w", wl.Name, err)
	}
	r.recorder.Eventf(job, wl, corev1.EventTypeNormal, EventDeletedWorkload, "Withdraw",
		"deleted Workload slice %s: %s", wl.Name, why)
	return nil
}

// tidySlices finishes the job's Workloads that an admitted slice superseded without Kueue
// finishing them, deletes the ones that are neither its Workload nor its pending slice, and lets
// the retired ones go (Kueue's finalizer), saying so once for a slice Kueue replaced.
func (r *Reconciler) tidySlices(ctx context.Context, job engine.Object, sl Slices) error {
	for _, wl := range sl.Superseded {
		orig := wl.DeepCopy()
		meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{
			Type: kueuev1.WorkloadFinished, Status: metav1.ConditionTrue, Reason: kueuev1.WorkloadFinishedReasonOutOfSync,
			Message:            fmt.Sprintf("replaced by Workload %s, admitted for the job's new size", sl.Current.Name),
			LastTransitionTime: metav1.NewTime(r.clock.Now()), ObservedGeneration: wl.Generation,
		})
		if err := r.client.Status().Patch(ctx, wl, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return fmt.Errorf("mark Workload %s finished: %w", wl.Name, err)
		}
		if err := r.removeFinalizer(ctx, wl); err != nil {
			return err
		}
	}
	for _, wl := range sl.Unwanted {
		if err := r.withdrawSlice(ctx, job, wl, "the job has another Workload"); err != nil {
			return err
		}
	}
	for _, wl := range sl.Retired {
		c := meta.FindStatusCondition(wl.Status.Conditions, kueuev1.WorkloadFinished)
		replaced := c != nil && c.Reason == kueuev1.WorkloadSliceReplaced && HasFinalizer(wl)
		if replaced && (sl.Current == nil || !Admitted(sl.Current)) {
			continue // Kueue admits the slice next (Swapping); said once it has
		}
		if err := r.removeFinalizer(ctx, wl); err != nil {
			return err
		}
		if replaced {
			r.recorder.Eventf(job, sl.Current, corev1.EventTypeNormal, EventAdmittedSlice, "Grow",
				"Kueue admitted Workload slice %s (%s) in place of Workload %s: the job grows without a stop",
				sl.Current.Name, AdmittedPodSets(sl.Current), wl.Name)
		}
	}
	return nil
}

// HasFinalizer reports whether the Workload still carries Kueue's finalizer.
func HasFinalizer(wl *kueuev1.Workload) bool {
	for _, f := range wl.Finalizers {
		if f == ResourceInUseFinalizer {
			return true
		}
	}
	return false
}

// workloadName is the name of a new Workload of the job: WorkloadName, or SliceName at the job's
// generation once one of its slices has that name.
func (r *Reconciler) workloadName(job engine.Object, sl Slices) string {
	first := WorkloadName(r.gvk, job.GetName(), job.GetUID())
	for _, wl := range append([]*kueuev1.Workload{sl.Current, sl.Pending}, sl.Retired...) {
		if wl != nil && wl.Name == first {
			return SliceName(first, job.GetGeneration())
		}
	}
	return first
}
