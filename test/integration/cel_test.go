package integration

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// With no webhook registered (this suite's API server has none), the CRDs' OpenAPI bounds and
// CEL rules alone refuse every corpus spec marked "refused-by: crd", naming what the header
// expects, and admit every spec marked "refused-by: webhook", so the corpus's account of where
// each rule lives stays true both ways. test/admission checks the same specs with the webhooks.
func TestCRDRulesWithoutWebhook(t *testing.T) {
	cases, err := testutil.LoadAdmissionCases(filepath.Join("..", "testdata", "admission", "bad"))
	if err != nil {
		t.Fatal(err)
	}
	ns := newNamespace(t)
	byCRD := 0
	for _, c := range cases {
		if c.RefusedBy == testutil.LayerCRD {
			byCRD++
		}
		t.Run(c.Name, func(t *testing.T) {
			obj := c.Object.DeepCopy()
			obj.SetNamespace(ns)
			if !strings.Contains(c.Name, "name") {
				// A name of its own, so that a spec admitted by mistake cannot make the next
				// one's create fail for the wrong reason; a case about the name keeps it.
				obj.SetName(obj.GetName() + "-" + c.Name)
			}
			err := k8s.Create(context.Background(), obj)
			t.Logf("without the webhook: %v", err) // the refusal as a user reads it, with -v
			if err == nil {
				defer func() { _ = k8s.Delete(context.Background(), obj) }()
			}
			switch {
			case c.RefusedBy == testutil.LayerCRD && err == nil:
				t.Errorf("admitted without the webhook, but the corpus says the CRD refuses it (%s)", c.Why)
			case c.RefusedBy == testutil.LayerCRD && !strings.Contains(err.Error(), c.Expect):
				t.Errorf("refused without naming %q: %v", c.Expect, err)
			case c.RefusedBy == testutil.LayerWebhook && err != nil:
				t.Errorf("refused without the webhook, but the corpus says only the webhook does: %v", err)
			}
		})
	}
	t.Logf("%d of %d bad specs are refused by the CRD alone", byCRD, len(cases))
}

// The CRD's rules hold on the scale subresource too, which the validating webhook does not see:
// `kubectl scale` cannot leave a job with fewer pods than its gang's minAvailable, which no
// PodGroup could then ever admit.
func TestScaleBelowMinAvailableIsRefused(t *testing.T) {
	ns := newNamespace(t)
	job := &troupev1.MPIJob{
		ObjectMeta: metav1.ObjectMeta{Name: "scaled", Namespace: ns},
		Spec: troupev1.MPIJobSpec{MPIProgramSpec: troupev1.MPIProgramSpec{
			Worker: troupev1.MPIWorker{Replicas: ptr.To[int32](3), Cmd: []string{"./app"}, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: troupev1.MPIWorkerContainer, Image: "mpi:test"}}}}},
			SchedulingPolicy: troupev1.SchedulingPolicy{MinAvailable: ptr.To[int32](3)},
		}},
	}
	if err := k8s.Create(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 2}}
	if err := k8s.SubResource("scale").Update(context.Background(), job, client.WithSubResourceBody(scale)); err != nil {
		t.Fatalf("scale to 2 workers (3 pods, minAvailable 3): %v", err)
	}
	scale.Spec.Replicas = 1
	err := k8s.SubResource("scale").Update(context.Background(), job, client.WithSubResourceBody(scale))
	if err == nil || !strings.Contains(err.Error(), "spec.schedulingPolicy.minAvailable") || !strings.Contains(err.Error(), "the job's 2 pods") {
		t.Errorf("scale to 1 worker (2 pods, minAvailable 3): %v, want the minAvailable refusal", err)
	}
}
