package tamper

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/backend/mpi"
)

// tampering is one action: the write that tampers, and the test of the child read back
// (restored, or what is still missing).
type tampering struct {
	apply    func(ctx context.Context, c client.Client, before client.Object) error
	restored func(job, before, cur client.Object) (bool, string)
	outcome  string
}

var tamperings = map[string]tampering{
	ActionDeleteMaster:    deletion,
	ActionDeleteWorkers:   deletion,
	ActionDeleteService:   deletion,
	ActionDeleteHostfile:  deletion,
	ActionDeleteExecRole:  deletion,
	ActionDeleteSSHSecret: deletion,
	ActionEditHostfile: {
		apply: func(ctx context.Context, c client.Client, before client.Object) error {
			return mergePatch(ctx, c, before, map[string]any{"data": map[string]string{mpi.HostfileKey: "tampered-host slots=64\n"}})
		},
		restored: func(_, before, cur client.Object) (bool, string) {
			if cur.GetUID() != before.GetUID() {
				return false, "replaced by another object"
			}
			if !maps.Equal(cur.(*corev1.ConfigMap).Data, before.(*corev1.ConfigMap).Data) {
				return false, "data still differs from the operator's"
			}
			return true, ""
		},
		outcome: "data put back",
	},
	ActionScaleWorkers: {
		apply: func(ctx context.Context, c client.Client, before client.Object) error {
			n := ptr.Deref(before.(*appsv1.StatefulSet).Spec.Replicas, 1) + 1
			return mergePatch(ctx, c, before, map[string]any{"spec": map[string]any{"replicas": n}})
		},
		restored: func(_, before, cur client.Object) (bool, string) {
			want, got := ptr.Deref(before.(*appsv1.StatefulSet).Spec.Replicas, 1), ptr.Deref(cur.(*appsv1.StatefulSet).Spec.Replicas, 1)
			if cur.GetUID() != before.GetUID() {
				return false, "replaced by another object"
			}
			if got != want {
				return false, fmt.Sprintf("replicas %d, want %d", got, want)
			}
			return true, ""
		},
		outcome: "replicas put back",
	},
	ActionRemoveOwnerRef: {
		apply: removeControllerRef,
		restored: func(job, before, cur client.Object) (bool, string) {
			if cur.GetUID() != before.GetUID() {
				return false, "replaced by another object, not re-adopted"
			}
			if !metav1.IsControlledBy(cur, job) {
				return false, "no owner reference to the job"
			}
			return true, ""
		},
		outcome: "re-adopted (same UID, the job its controller again)",
	},
}

// deletion deletes the child as kubectl does (background propagation: a Job's or
// StatefulSet's pods go with it; the API's default for a batch/v1 Job would orphan them).
var deletion = tampering{
	apply: func(ctx context.Context, c client.Client, before client.Object) error {
		uid := before.GetUID()
		return c.Delete(ctx, before, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	},
	restored: func(job, before, cur client.Object) (bool, string) {
		if cur.GetUID() == before.GetUID() {
			return false, "the deleted object is still there"
		}
		if !metav1.IsControlledBy(cur, job) {
			return false, "an object of that name not controlled by the job"
		}
		if got, want := cur.GetAnnotations()[troupev1.AnnotationSpecHash], before.GetAnnotations()[troupev1.AnnotationSpecHash]; got != want {
			return false, fmt.Sprintf("spec hash %q, want %q", got, want)
		}
		if what := sameContent(before, cur); what != "" {
			return false, what + " differs from before"
		}
		return true, ""
	},
	outcome: "recreated (new UID, same spec hash and content)",
}

// sameContent compares what the engine keeps of a child beyond its spec hash (the fields it
// restores when someone changes them); it returns the field that differs, or "".
func sameContent(before, cur client.Object) string {
	switch b := before.(type) {
	case *corev1.ConfigMap:
		if !maps.Equal(b.Data, cur.(*corev1.ConfigMap).Data) {
			return "data"
		}
	case *rbacv1.Role:
		if !equality.Semantic.DeepEqual(b.Rules, cur.(*rbacv1.Role).Rules) {
			return "rules"
		}
	case *corev1.Service:
		if !maps.Equal(b.Spec.Selector, cur.(*corev1.Service).Spec.Selector) {
			return "selector"
		}
	case *appsv1.StatefulSet:
		if !equality.Semantic.DeepEqual(b.Spec.Replicas, cur.(*appsv1.StatefulSet).Spec.Replicas) {
			return "replicas"
		}
	}
	return ""
}

// mergePatch applies a JSON merge patch to obj.
func mergePatch(ctx context.Context, c client.Client, obj client.Object, patch map[string]any) error {
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	return c.Patch(ctx, obj.DeepCopyObject().(client.Object), client.RawPatch(types.MergePatchType, data))
}

// removeControllerRef removes the controller owner reference from obj with a JSON patch that
// first tests it is still the one at that index, so no concurrent write is overwritten.
func removeControllerRef(ctx context.Context, c client.Client, obj client.Object) error {
	for i, ref := range obj.GetOwnerReferences() {
		if ref.Controller == nil || !*ref.Controller {
			continue
		}
		path := fmt.Sprintf("/metadata/ownerReferences/%d", i)
		data, err := json.Marshal([]map[string]any{
			{"op": "test", "path": path + "/uid", "value": ref.UID},
			{"op": "remove", "path": path},
		})
		if err != nil {
			return err
		}
		return c.Patch(ctx, obj.DeepCopyObject().(client.Object), client.RawPatch(types.JSONPatchType, data))
	}
	return fmt.Errorf("%s has no controller owner reference", childName(obj))
}

// waitSecretLossFails waits for the documented outcome of a deleted generated SSH Secret: the
// job fails with reason GeneratedSecretDeleted and no Secret of that name is generated again
// (new keys would not match the ones the running pods hold).
func waitSecretLossFails(ctx context.Context, c client.Client, t Target, want, before client.Object,
	start time.Time, timeout time.Duration, res Result) Result {
	deadline := start.Add(timeout)
	for {
		if cur, err := readChild(ctx, c, want); err == nil && cur.GetUID() != before.GetUID() {
			res.Outcome = "a new Secret was generated"
			res.Err = fmt.Errorf("%s: Secret %s was generated again after the job started; docs/security.md says the job fails", t, want.GetName())
			return res
		}
		job, err := getJob(ctx, c, t)
		if err != nil {
			res.Err = err
			return res
		}
		if c := meta.FindStatusCondition(job.JobStatus().Conditions, troupev1.ConditionFailed); c != nil &&
			c.Status == metav1.ConditionTrue && c.Reason == troupev1.ReasonGeneratedSecretDeleted {
			res.AsDocumented = true
			res.Outcome = fmt.Sprintf("the job failed (%s) after %s, as documented; the Secret was not generated again",
				c.Reason, time.Since(start).Round(time.Millisecond))
			return res
		}
		if time.Now().After(deadline) {
			res.Outcome = "the job did not fail"
			res.Err = fmt.Errorf("%s: no Failed=True/%s within %s after deleting Secret %s (phase %s)",
				t, troupev1.ReasonGeneratedSecretDeleted, timeout, want.GetName(), job.JobStatus().Phase)
			return res
		}
		if err := sleep(ctx, pollInterval); err != nil {
			res.Err = err
			return res
		}
	}
}
