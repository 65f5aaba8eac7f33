package integration

import (
	"context"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/troupe-dev/troupe/pkg/engine"
)

// The Indexed Job the engine builds for a worker set whose pods run to completion is one the
// API server accepts, and its size can change as the engine changes it (completions with
// parallelism), running or suspended.
func TestWorkerJobAcceptedAndResizable(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	s := &engine.Spec{
		Name: "train", Namespace: ns, NameLabel: "testjob.troupe.dev/name",
		Owner: metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: "uid-1"},
		WorkerSets: []engine.WorkerSet{{
			Name: "worker", ChildName: "train-worker", Replicas: 2, RunsToCompletion: true, BackoffLimit: 3,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "pytorch", Image: "train:1"}}}},
		}},
	}
	job := engine.BuildWorkerJob(s, &s.WorkerSets[0], false)
	job.OwnerReferences = nil // the owner is not stored here
	if err := k8s.Create(ctx, job); err != nil {
		t.Fatalf("create the worker Job: %v", err)
	}
	for _, step := range []struct {
		size    int32
		suspend bool
	}{{3, false}, {1, true}, {4, false}} {
		job.Spec.Completions, job.Spec.Parallelism, job.Spec.Suspend = ptr.To(step.size), ptr.To(step.size), ptr.To(step.suspend)
		if err := k8s.Update(ctx, job); err != nil {
			t.Fatalf("resize to %d (suspend %t): %v", step.size, step.suspend, err)
		}
	}
	var stored batchv1.Job
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(job), &stored); err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(stored.Spec.Completions, 0) != 4 || stored.Spec.Template.Spec.Subdomain != "train" {
		t.Errorf("stored: completions %d, subdomain %q", ptr.Deref(stored.Spec.Completions, 0), stored.Spec.Template.Spec.Subdomain)
	}
}
