package tamper

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/backend/mpi"
	"github.com/troupe-dev/troupe/pkg/engine"
)

// ForeignName is the name PreCreateForeign takes: the job's hostfile ConfigMap's, which every
// job with the MPI backend has (all MPIJobs and HorovodJobs, ChainerJobs but for backend none).
func ForeignName(t Target) string { return mpi.ConfigMapName(&engine.Spec{Name: t.Name}) }

// foreignLabel marks the foreign object as somebody else's, for anyone who finds it.
const foreignLabel = "troupe.dev/chaos-foreign"

// PreCreateForeign creates, before the job t exists, a ConfigMap of someone else (no owner, none
// of troupe's labels) with the name of the job's hostfile ConfigMap. A job created then must
// report the conflict (ConflictReported: Initialized=False, reason ChildNameConflict, naming
// the ConfigMap, and a Warning event) and create no child that holds pods; the operator must never
// adopt, change or delete the object. release checks exactly that (same UID, resourceVersion,
// labels and data, no owner reference) and deletes the object, after which the job proceeds
// (it looks again every 10 s: the foreign object carries no label whose change a watch would
// deliver). It may be called again after a failure: an object of that name carrying its label
// is taken as the one an earlier call made.
func PreCreateForeign(ctx context.Context, c client.Client, t Target) (release func(ctx context.Context) error, err error) {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: ForeignName(t), Namespace: t.Namespace,
			Labels: map[string]string{foreignLabel: t.Kind + "." + t.Name},
		},
		Data: map[string]string{"owner": "someone else", mpi.HostfileKey: "not-troupes slots=1\n"},
	}
	if err := c.Create(ctx, cm); apierrors.IsAlreadyExists(err) {
		// A create retried after its answer was lost (the API server restarting) finds the
		// object it made: take it, if it carries this call's label, as it was stored.
		want := cm.Labels[foreignLabel]
		if gerr := c.Get(ctx, client.ObjectKeyFromObject(cm), cm); gerr != nil || cm.Labels[foreignLabel] != want || len(cm.OwnerReferences) > 0 {
			return nil, fmt.Errorf("create the foreign ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("create the foreign ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	created := cm.DeepCopy()
	return func(ctx context.Context) error {
		var cur corev1.ConfigMap
		if err := c.Get(ctx, client.ObjectKeyFromObject(created), &cur); err != nil {
			return fmt.Errorf("the foreign ConfigMap %s: %w", created.Name, err)
		}
		var changed []string
		if cur.UID != created.UID {
			changed = append(changed, "UID (replaced)")
		}
		if cur.ResourceVersion != created.ResourceVersion {
			changed = append(changed, "resourceVersion (written)")
		}
		if len(cur.OwnerReferences) > 0 {
			changed = append(changed, "owner references (adopted)")
		}
		if !maps.Equal(cur.Labels, created.Labels) {
			changed = append(changed, "labels")
		}
		if !maps.Equal(cur.Data, created.Data) {
			changed = append(changed, "data")
		}
		if len(changed) > 0 {
			return fmt.Errorf("the foreign ConfigMap %s was touched: %s", created.Name, strings.Join(changed, ", "))
		}
		uid := cur.UID
		if err := c.Delete(ctx, &cur, client.Preconditions{UID: &uid}); err != nil {
			return fmt.Errorf("delete the foreign ConfigMap %s: %w", created.Name, err)
		}
		return nil
	}, nil
}

// ConflictReported reports whether job t says a child's name is taken by the foreign object:
// Initialized=False with reason ChildNameConflict and a message naming it.
func ConflictReported(ctx context.Context, c client.Client, t Target) (bool, error) {
	job, err := getJob(ctx, c, t)
	if err != nil {
		return false, err
	}
	cond := meta.FindStatusCondition(job.JobStatus().Conditions, troupev1.ConditionInitialized)
	return cond != nil && cond.Status == metav1.ConditionFalse && cond.Reason == troupev1.ReasonChildConflict &&
		strings.Contains(cond.Message, "ConfigMap "+ForeignName(t)), nil
}

// WaitFor polls cond every 50 ms until it is true, it fails, or timeout passes.
func WaitFor(ctx context.Context, timeout time.Duration, what string, cond func(context.Context) (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond(ctx)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %s", what, timeout)
		}
		if err := sleep(ctx, pollInterval); err != nil {
			return err
		}
	}
}
