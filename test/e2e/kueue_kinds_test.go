package e2e

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueuev1 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// TestKueueAdmitsEveryKind runs an MPIJob (the operator's generated launcher and 2 workers) and a
// non-elastic HorovodJob (a launcher and 2 workers) through the queue of TestKueueAdmission: each
// is stored suspended, gets a Workload of pod sets launcher=1 and worker=2, is admitted, has every
// pod on the flavor's tainted pool (its node label and toleration on the launcher and the
// workers), and Succeeds, its Workload Finished.
func TestKueueAdmitsEveryKind(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	pool := "kueue-" + ns
	gangPool(t, pool)
	kc := kueueClient(t)
	low, _ := kueueQueue(t, kc, ns, pool)

	mpiJob := loadMPIJob(t, ns)
	mpiJob.Spec.Worker.Replicas = ptr.To[int32](2)
	requestCPU(&mpiJob.Spec.Worker.Template, "1")
	// The generated launcher copies the worker template's metadata: it runs long enough to be
	// seen bound next to the workers.
	mpiJob.Spec.Worker.Template.Annotations = map[string]string{simDurationAnnot: "8s"}
	horovodJob := testutil.Load[*troupev1.HorovodJob](t, "../../examples/horovodjob.yaml", ns)
	horovodJob.Spec.Worker.Replicas = ptr.To[int32](2)
	requestCPU(&horovodJob.Spec.Worker.Template, "1")
	horovodJob.Spec.Worker.Template.Annotations = map[string]string{simDurationAnnot: "8s"}

	for _, job := range []queuedJob{mpiJob, horovodJob} {
		job.SetLabels(map[string]string{troupev1.LabelQueueName: "lq", troupev1.LabelWorkloadPriorityClass: low})
		createJob(t, job)
	}
	for _, job := range []queuedJob{mpiJob, horovodJob} {
		eventually(t, job.GetName()+" admitted", func(ctx context.Context) (bool, error) {
			got := job.DeepCopyObject().(queuedJob)
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(job), got); err != nil {
				return false, err
			}
			if c := meta.FindStatusCondition(got.JobStatus().Conditions, troupev1.ConditionAdmitted); c == nil || c.Status != metav1.ConditionTrue {
				return false, fmt.Errorf("Admitted: %+v", c)
			}
			return true, nil
		})
		expectWorkloadPodSets(t, kc, job, "launcher=1,worker=2")
		expectPlacedOnPool(t, job, pool)
	}
	for _, job := range []queuedJob{mpiJob, horovodJob} {
		waitPhase(t, job, troupev1.JobSucceeded)
		eventually(t, job.GetName()+"'s Workload Finished", func(ctx context.Context) (bool, error) {
			wl, err := jobWorkload(ctx, kc, job)
			return wl != nil && meta.IsStatusConditionTrue(wl.Status.Conditions, kueuev1.WorkloadFinished), err
		})
	}
}

// TestKueueAdmitsPyTorchJobs runs two PyTorchJobs through a queue: one of a Master and 2
// Workers (pod sets master=1 and worker=2) and one of 3 Workers and no Master (one pod set,
// worker=3). Each is stored suspended, admitted, has every pod on the flavor's tainted pool (the
// Kueue node label and toleration reach the pods of the per-worker Jobs), and Succeeds, its
// Workload Finished.
func TestKueueAdmitsPyTorchJobs(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	pool := "kueue-" + ns
	gangPool(t, pool)
	kc := kueueClient(t)
	low, _ := kueueQueue(t, kc, ns, pool)

	withMaster := pytorchExample(t, ns)
	withMaster.Name = "ptj-master"
	workersOnly := pytorchExample(t, ns)
	workersOnly.Name = "ptj-workers"
	workersOnly.Spec.PyTorchReplicaSpecs.Master = nil
	workersOnly.Spec.PyTorchReplicaSpecs.Worker.Replicas = ptr.To[int32](3)
	for _, job := range []*troupev1.PyTorchJob{withMaster, workersOnly} {
		for _, r := range []*troupev1.ReplicaSpec{job.Spec.PyTorchReplicaSpecs.Master, job.Spec.PyTorchReplicaSpecs.Worker} {
			if r != nil {
				requestCPU(&r.Template, "1")
				r.Template.Annotations = map[string]string{simDurationAnnot: "8s"}
			}
		}
		job.SetLabels(map[string]string{troupev1.LabelQueueName: "lq", troupev1.LabelWorkloadPriorityClass: low})
		createJob(t, job)
	}
	for job, podSets := range map[*troupev1.PyTorchJob]string{withMaster: "master=1,worker=2", workersOnly: "worker=3"} {
		eventually(t, job.Name+" admitted", func(ctx context.Context) (bool, error) {
			got := &troupev1.PyTorchJob{}
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(job), got); err != nil {
				return false, err
			}
			if c := meta.FindStatusCondition(got.Status.Conditions, troupev1.ConditionAdmitted); c == nil || c.Status != metav1.ConditionTrue {
				return false, fmt.Errorf("Admitted: %+v", c)
			}
			return true, nil
		})
		expectWorkloadPodSets(t, kc, job, podSets)
		expectPlacedOnPool(t, job, pool)
	}
	for _, job := range []*troupev1.PyTorchJob{withMaster, workersOnly} {
		waitPhase(t, job, troupev1.JobSucceeded)
		eventually(t, job.Name+"'s Workload Finished", func(ctx context.Context) (bool, error) {
			wl, err := jobWorkload(ctx, kc, job)
			return wl != nil && meta.IsStatusConditionTrue(wl.Status.Conditions, kueuev1.WorkloadFinished), err
		})
	}
}
