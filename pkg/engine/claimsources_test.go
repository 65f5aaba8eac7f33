package engine

import (
	"context"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// boundClaimAdapter is masterOnlyAdapter with a shared claim bound to a named PersistentVolume,
// and the operator's setting allow.
type boundClaimAdapter struct {
	masterOnlyAdapter
	allow bool
}

func (a boundClaimAdapter) Describe(job Object, s *Spec) error {
	if err := a.masterOnlyAdapter.Describe(job, s); err != nil {
		return err
	}
	spec := claimSpec("1Gi")
	spec.VolumeName = "pv-of-someone-else"
	s.RunPolicy.Storage = &troupev1.Storage{SharedClaims: []troupev1.SharedClaim{{Name: "data", Spec: spec}}}
	s.AllowClaimVolumeSources = a.allow
	return nil
}

// A job that got past admission (created while the webhook was down, or before an upgrade)
// with a claim bound to a named volume is not run while the operator does not allow it:
// InvalidSpec naming the field and the flag, and no claim nor anything else created. With the
// flag, the claim is created as asked.
func TestClaimVolumeSourcesRefusedByTheEngine(t *testing.T) {
	for _, allow := range []bool{false, true} {
		ctx := context.Background()
		job := &troupev1.ChainerJob{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ml", UID: "uid-1"}}
		c := fakeJobClient(t, job)
		r := &Reconciler{deferred: newDeferredWrites(0), podCreates: newPodCreatePace(), client: c, apiReader: c, recorder: events.NewFakeRecorder(10),
			adapter: boundClaimAdapter{allow: allow}, gvk: chainerJobGVK, clock: clocktesting.NewFakePassiveClock(metav1.Now().Time)}
		if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(job)}); err != nil {
			t.Fatal(err)
		}
		var got troupev1.ChainerJob
		if err := c.Get(ctx, client.ObjectKeyFromObject(job), &got); err != nil {
			t.Fatal(err)
		}
		ini := meta.FindStatusCondition(got.Status.Conditions, troupev1.ConditionInitialized)
		claimErr := c.Get(ctx, client.ObjectKey{Namespace: "ml", Name: "train-data"}, &corev1.PersistentVolumeClaim{})
		masterErr := c.Get(ctx, client.ObjectKey{Namespace: "ml", Name: "train-master"}, &batchv1.Job{})
		if allow {
			if claimErr != nil || masterErr != nil {
				t.Errorf("allowed: claim %v, master Job %v; want both created", claimErr, masterErr)
			}
			continue
		}
		const field = "spec.runPolicy.storage.sharedClaims[0].spec.volumeName"
		if ini == nil || ini.Reason != troupev1.ReasonInvalidSpec || !strings.Contains(ini.Message, field) ||
			!strings.Contains(ini.Message, troupev1.AllowClaimVolumeSourcesFlag) {
			t.Errorf("not allowed: Initialized = %+v, want InvalidSpec naming %s and %s", ini, field, troupev1.AllowClaimVolumeSourcesFlag)
		}
		if claimErr == nil || masterErr == nil {
			t.Errorf("not allowed: claim %v, master Job %v; want neither created", claimErr, masterErr)
		}
	}
}
