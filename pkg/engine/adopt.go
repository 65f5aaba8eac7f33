package engine

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// A child whose owner reference was removed (by hand, by a tool that rewrote the object, by an
// `kubectl apply` of an exported copy) is still the job's: it carries the job's UID label, and
// no other controller claims it. Reporting it as a name
// conflict would leave the job stuck behind its own child (an orphaned master Job is never
// seen finishing; an orphaned StatefulSet is no longer kept in shape), and garbage collection
// would leave it behind when the job is deleted. So it is adopted back, as the Job and
// ReplicaSet controllers adopt orphans that match their selector. An object of anyone else
// (no label, another job's UID, another controller) is still never touched. The label alone
// proves nothing (whoever may create the object may write it): harmless for a child whose
// content the operator puts back, but not for a generated Secret, whose data it never
// rewrites; one is adopted only when its data is what the job's status records
// (adoptableSecret).

// adoptable reports whether cur is an orphan of job: no controller, and the job's UID label.
func adoptable(job Object, cur client.Object) bool {
	return metav1.GetControllerOf(cur) == nil && cur.GetLabels()[troupev1.LabelJobUID] == string(job.GetUID())
}

// adopt gives cur, the object found for the desired child want, the job's controller reference
// back. The patch carries cur's
// resourceVersion, so an object changed meanwhile is not adopted from a stale read: the
// conflict error makes the pass run again on fresh data.
func (r *Reconciler) adopt(ctx context.Context, job Object, s *Spec, want, cur client.Object) error {
	before := cur.DeepCopyObject().(client.Object)
	cur.SetOwnerReferences(append(cur.GetOwnerReferences(), s.Owner))
	k := keyOf(want) // cur may be metadata only (a Secret)
	if err := r.client.Patch(ctx, cur, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("adopt %s %s: %w", k.Kind, k.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("adopted a child that had lost its owner reference", "kind", k.Kind, "name", k.Name)
	r.recorder.Eventf(job, cur, corev1.EventTypeNormal, troupev1.EventAdopted, "Adopt",
		"adopted %s %s: it carries this job's UID label but had lost its owner reference", k.Kind, k.Name)
	return nil
}
