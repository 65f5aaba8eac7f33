package integration

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// A pod the API server refuses shows on the job: what the StatefulSet controller writes on a
// sync whose creates were refused, its FailedCreate event and the set's status counting no pod
// (written here, as envtest runs no controller; test/e2e has the real one), becomes the job's
// ReplicaFailure condition, reason FailedCreate, with the API server's message.
func TestRefusedPodsShowOnTheJob(t *testing.T) {
	ns := newNamespace(t)
	createMPIJob(t, smallMPIJob(t, ns))
	sts := waitFor(t, &appsv1.StatefulSet{}, ns, "mpi-example-worker")
	sts.Status = appsv1.StatefulSetStatus{ObservedGeneration: sts.Generation, Replicas: 0}
	if err := k8s.Status().Update(context.Background(), sts); err != nil {
		t.Fatal(err)
	}
	refusal := `create Pod mpi-example-worker-0 in StatefulSet mpi-example-worker failed error: pods "mpi-example-worker-0" is forbidden: exceeded quota: pods, requested: pods=1, used: pods=4, limited: pods=4`
	now := metav1.Now()
	event := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: "mpi-example-worker.", Namespace: ns},
		InvolvedObject: corev1.ObjectReference{Kind: "StatefulSet", APIVersion: "apps/v1", Namespace: ns, Name: sts.Name, UID: sts.UID},
		Reason:         "FailedCreate", Message: refusal, Type: corev1.EventTypeWarning,
		Source:         corev1.EventSource{Component: "statefulset-controller"},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}
	if err := k8s.Create(context.Background(), event); err != nil {
		t.Fatal(err)
	}
	job := waitForMPIJob(t, ns, "mpi-example", "ReplicaFailure FailedCreate", func(j *troupev1.MPIJob) bool {
		c := meta.FindStatusCondition(j.Status.Conditions, troupev1.ConditionReplicaFailure)
		return c != nil && c.Reason == troupev1.ReasonFailedCreate
	})
	c := meta.FindStatusCondition(job.Status.Conditions, troupev1.ConditionReplicaFailure)
	if c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "StatefulSet mpi-example-worker: "+refusal) {
		t.Errorf("ReplicaFailure = %s %q, want True with the API server's message", c.Status, c.Message)
	}
}
