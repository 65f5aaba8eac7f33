package webhooks

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// v1KubeflowJob is a kubeflow.org/v1 MPIJob (with only apiVersion changed) that writes the
// clean-pod policy at spec.cleanPodPolicy; its worker runs two containers.
func v1KubeflowJob(clean troupev1.CleanPodPolicy) *troupev1.MPIJob {
	pod := func(names ...string) corev1.PodTemplateSpec {
		var cs []corev1.Container
		for _, n := range names {
			cs = append(cs, corev1.Container{Name: n, Image: "horovod:1"})
		}
		return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: cs}}
	}
	return &troupev1.MPIJob{ObjectMeta: metav1.ObjectMeta{Name: "v1", Namespace: "ns"}, Spec: troupev1.MPIJobSpec{
		CleanPodPolicy: ptr.To(clean),
		MPIReplicaSpecs: &troupev1.MPIReplicaSpecs{
			Launcher: &troupev1.ReplicaSpec{Template: pod("mpi")},
			Worker:   &troupev1.ReplicaSpec{Replicas: ptr.To[int32](2), Template: pod("sidecar", "mpi")},
		},
	}}
}

func updateRequest(t *testing.T, stored *troupev1.MPIJob) context.Context {
	t.Helper()
	raw, err := json.Marshal(stored)
	if err != nil {
		t.Fatal(err)
	}
	return admission.NewContextWithRequest(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Update, OldObject: runtime.RawExtension{Raw: raw}}})
}

// kubeflow.org/v1's spec.cleanPodPolicy is the job's clean-pod policy where runPolicy names
// none; re-applying the manifest with it changed carries the change (the stored runPolicy value
// was filled from it); writing both differently is refused naming both; other forms refuse it.
func TestKubeflowV1CleanPodPolicy(t *testing.T) {
	w := MPIJob{}
	job := v1KubeflowJob(troupev1.CleanPodPolicyRunning)
	if err := w.Default(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	if got := ptr.Deref(job.Spec.RunPolicy.CleanPodPolicy, ""); got != troupev1.CleanPodPolicyRunning {
		t.Fatalf("runPolicy.cleanPodPolicy %q, want Running from spec.cleanPodPolicy", got)
	}
	if _, err := w.ValidateCreate(context.Background(), job); err != nil {
		t.Fatalf("create: %v", err)
	}

	changed := job.DeepCopy()
	changed.Spec.CleanPodPolicy = ptr.To(troupev1.CleanPodPolicyAll)
	if err := w.Default(updateRequest(t, job), changed); err != nil {
		t.Fatal(err)
	}
	if got := ptr.Deref(changed.Spec.RunPolicy.CleanPodPolicy, ""); got != troupev1.CleanPodPolicyAll {
		t.Errorf("after changing spec.cleanPodPolicy to All, runPolicy.cleanPodPolicy is %q", got)
	}
	if _, err := w.ValidateUpdate(context.Background(), job, changed); err != nil {
		t.Errorf("update with spec.cleanPodPolicy changed: %v", err)
	}

	both := v1KubeflowJob(troupev1.CleanPodPolicyRunning)
	both.Spec.RunPolicy.CleanPodPolicy = ptr.To(troupev1.CleanPodPolicyNone)
	if err := w.Default(context.Background(), both); err != nil {
		t.Fatal(err)
	}
	_, err := w.ValidateCreate(context.Background(), both)
	if err == nil || !strings.Contains(err.Error(), "spec.cleanPodPolicy") || !strings.Contains(err.Error(), "contradicts spec.runPolicy.cleanPodPolicy (None)") {
		t.Errorf("both written differently: %v; want spec.cleanPodPolicy contradicting spec.runPolicy.cleanPodPolicy", err)
	}

	other := runModeMPIJob()
	other.Spec.CleanPodPolicy = ptr.To(troupev1.CleanPodPolicyAll)
	other.Spec.MainContainer = "mpi"
	errs := ValidateMPIJob(other).ToAggregate()
	if errs == nil || !strings.Contains(errs.Error(), "spec.cleanPodPolicy: Forbidden") || !strings.Contains(errs.Error(), "spec.mainContainer: Forbidden") {
		t.Errorf("the spec.worker form with kubeflow.org/v1's fields: %v; want both forbidden", errs)
	}
}

// kubeflow.org/v1's spec.mainContainer names the workers' main container (not the first), and
// a name no worker container has is refused at the worker template.
func TestKubeflowV1MainContainer(t *testing.T) {
	job := v1KubeflowJob(troupev1.CleanPodPolicyNone)
	job.Spec.MainContainer = "mpi"
	job.SetDefaults(Options{}.Defaults())
	if _, main := job.Spec.Program(); main != "mpi" {
		t.Errorf("main container %q, want mpi (spec.mainContainer)", main)
	}
	if errs := ValidateMPIJob(job); len(errs) > 0 {
		t.Errorf("valid job refused: %v", errs)
	}
	job.Spec.MainContainer = "trainer"
	errs := ValidateMPIJob(job).ToAggregate()
	if errs == nil || !strings.Contains(errs.Error(), "spec.mpiReplicaSpecs.Worker.template") || !strings.Contains(errs.Error(), `"trainer"`) {
		t.Errorf("mainContainer naming no container: %v; want the worker template named", errs)
	}
}
