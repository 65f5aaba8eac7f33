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

// The Jobs the engine builds for a worker set whose pods run to completion (one per pod) are
// ones the API server accepts, with their pods' hostnames under the job's Service, and they can
// be suspended and resumed as the engine releases and brings back workers.
func TestWorkerJobsAccepted(t *testing.T) {
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
	for _, job := range engine.BuildWorkerJobs(s, &s.WorkerSets[0], false) {
		job.OwnerReferences = nil // the owner is not stored here
		if err := k8s.Create(ctx, job); err != nil {
			t.Fatalf("create worker Job %s: %v", job.Name, err)
		}
		for _, suspend := range []bool{true, false} {
			job.Spec.Suspend = ptr.To(suspend)
			if err := k8s.Update(ctx, job); err != nil {
				t.Fatalf("suspend %t: %v", suspend, err)
			}
		}
		var stored batchv1.Job
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(job), &stored); err != nil {
			t.Fatal(err)
		}
		if tmpl := stored.Spec.Template.Spec; tmpl.Hostname != job.Name || tmpl.Subdomain != "train" {
			t.Errorf("stored %s: hostname %q, subdomain %q", job.Name, tmpl.Hostname, tmpl.Subdomain)
		}
	}
}
