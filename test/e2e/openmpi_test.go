package e2e

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// With the real disruption and StatefulSet controllers: the job's PodDisruptionBudget refuses
// the eviction of a running worker, and `kubectl scale statefulset` on the workers is undone,
// the workers come back Ready, and the job says how to scale it instead.
func TestWorkersAreProtectedAndScaledThroughTheJob(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	job := loadMPIJob(t, ns)
	job.Spec.Worker.Replicas = ptrInt32(2)
	job.Spec.Worker.Template.Annotations = map[string]string{simDurationAnnot: "60s"}
	job.Spec.SchedulingPolicy.PodDisruptionBudget = &troupev1.PodDisruptionBudgetPolicy{Enabled: true}
	if err := k8s.Create(context.Background(), job); err != nil {
		t.Fatalf("create the MPIJob: %v", err)
	}
	waitForExampleMPIJob(t, ns, "Running with 2 ready workers", func(j *troupev1.MPIJob) bool {
		return j.Status.Phase == troupev1.JobRunning && j.Status.Workers == "2/2"
	})

	// The disruption controller counts the workers and allows no disruption.
	eventually(t, "the budget's status: 2 healthy, no disruption allowed", func(ctx context.Context) (bool, error) {
		var pdb policyv1.PodDisruptionBudget
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "mpi-example"}, &pdb); err != nil {
			return false, err
		}
		return pdb.Status.ObservedGeneration == pdb.Generation && pdb.Status.CurrentHealthy == 2 && pdb.Status.DisruptionsAllowed == 0, nil
	})
	worker := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mpi-example-worker-0"}}
	err := k8s.SubResource("eviction").Create(context.Background(), worker, &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: worker.Name},
	})
	if !apierrors.IsTooManyRequests(err) {
		t.Errorf("evicting a worker of a running job: %v, want 429 TooManyRequests from the budget", err)
	}

	if out, err := kubectl("scale", "-n", ns, "statefulset/mpi-example-worker", "--replicas=1"); err != nil {
		t.Fatalf("kubectl scale statefulset: %v: %s", err, out)
	}
	eventually(t, "the Warning that says how to scale the job", func(ctx context.Context) (bool, error) {
		var list eventsv1.EventList
		if err := k8s.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for _, e := range list.Items {
			if e.Regarding.Name == "mpi-example" && e.Reason == troupev1.EventScaledOutsideJob && e.Type == corev1.EventTypeWarning &&
				strings.Contains(e.Note, "kubectl scale mpijob/mpi-example --replicas=1") {
				return true, nil
			}
		}
		return false, nil
	})
	eventually(t, "the StatefulSet back at 2 Ready workers", func(ctx context.Context) (bool, error) {
		var sts appsv1.StatefulSet
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "mpi-example-worker"}, &sts); err != nil {
			return false, err
		}
		return *sts.Spec.Replicas == 2 && sts.Status.ReadyReplicas == 2, nil
	})
	waitForExampleMPIJob(t, ns, "2/2 workers, still Running", func(j *troupev1.MPIJob) bool {
		return j.Status.Phase == troupev1.JobRunning && j.Status.Workers == "2/2" && *j.Spec.Worker.Replicas == 2
	})
}
