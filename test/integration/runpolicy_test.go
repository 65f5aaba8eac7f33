package integration

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// A suspended job keeps its master Job suspended and its workers at zero; resuming starts both.
func TestSuspendAndResume(t *testing.T) {
	ns := newNamespace(t)
	create(t, testutil.MakeChainerJob("mn", ns).WorkerSet("ws0", 2).Suspend(true).Obj())
	waitForJob(t, ns, "mn", "Suspended", func(j *troupev1.ChainerJob) bool { return j.Status.Phase == troupev1.JobSuspended })
	master := waitFor(t, &batchv1.Job{}, ns, "mn-master")
	sts := waitFor(t, &appsv1.StatefulSet{}, ns, "mn-workerset-ws0")
	if !ptr.Deref(master.Spec.Suspend, false) || *sts.Spec.Replicas != 0 {
		t.Fatalf("suspended job: master suspend %v, workers %d; want true and 0", master.Spec.Suspend, *sts.Spec.Replicas)
	}

	job := &troupev1.ChainerJob{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "mn"}, job); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(job.DeepCopy())
	job.Spec.RunPolicy.Suspend = ptr.To(false)
	if err := k8s.Patch(context.Background(), job, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, "master resumed and workers scaled up", func(ctx context.Context) (bool, error) {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(master), master); err != nil {
			return false, err
		}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(sts), sts); err != nil {
			return false, err
		}
		return !ptr.Deref(master.Spec.Suspend, true) && *sts.Spec.Replicas == 2, nil
	})
	waitForJob(t, ns, "mn", "Pending again", func(j *troupev1.ChainerJob) bool { return j.Status.Phase == troupev1.JobPending })
}

// cleanPodPolicy None leaves the workers running after the master ends.
func TestCleanPodPolicyNone(t *testing.T) {
	ns := newNamespace(t)
	create(t, testutil.MakeChainerJob("mn", ns).WorkerSet("ws0", 2).CleanPodPolicy(troupev1.CleanPodPolicyNone).Obj())
	waitFor(t, &appsv1.StatefulSet{}, ns, "mn-workerset-ws0")
	finishMaster(t, ns, "mn", batchv1.JobComplete, "CompletionsReached", "done")
	waitForJob(t, ns, "mn", "Succeeded", func(j *troupev1.ChainerJob) bool { return j.Status.Phase == troupev1.JobSucceeded })
	sts := &appsv1.StatefulSet{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "mn-workerset-ws0"}, sts); err != nil {
		t.Fatal(err)
	}
	if *sts.Spec.Replicas != 2 {
		t.Errorf("workers = %d after the master ended with cleanPodPolicy None, want 2", *sts.Spec.Replicas)
	}
}

// A finished job is deleted ttlSecondsAfterFinished after it finished.
func TestTTLAfterFinished(t *testing.T) {
	ns := newNamespace(t)
	create(t, testutil.MakeChainerJob("mn", ns).TTL(1).Obj())
	finishMaster(t, ns, "mn", batchv1.JobComplete, "CompletionsReached", "done")
	eventually(t, "the job deleted after its TTL", func(ctx context.Context) (bool, error) {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "mn"}, &troupev1.ChainerJob{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	expectEvent(t, ns, "mn", troupev1.EventTTLExpired)
}

// A finished job is never started again, even if its master Job is deleted.
func TestFinishedJobIsNotRestarted(t *testing.T) {
	ns := newNamespace(t)
	create(t, testutil.MakeChainerJob("mn", ns).WorkerSet("ws0", 1).Obj())
	finishMaster(t, ns, "mn", batchv1.JobComplete, "CompletionsReached", "done")
	waitForJob(t, ns, "mn", "Succeeded", func(j *troupev1.ChainerJob) bool { return j.Status.Phase == troupev1.JobSucceeded })
	master := waitFor(t, &batchv1.Job{}, ns, "mn-master")
	if err := k8s.Delete(context.Background(), master, client.PropagationPolicy("Background")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the master Job gone", func(ctx context.Context) (bool, error) {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(master), &batchv1.Job{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	// Give the operator a reconcile to make the mistake: touch the job, then wait for the
	// status to acknowledge the new generation.
	job := &troupev1.ChainerJob{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "mn"}, job); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(job.DeepCopy())
	job.Spec.RunPolicy.TTLSecondsAfterFinished = ptr.To[int32](3600)
	if err := k8s.Patch(context.Background(), job, patch); err != nil {
		t.Fatal(err)
	}
	got := waitForJob(t, ns, "mn", "the update observed", func(j *troupev1.ChainerJob) bool {
		return j.Status.ObservedGeneration == j.Generation
	})
	if got.Status.Phase != troupev1.JobSucceeded {
		t.Errorf("phase = %q after the master Job was deleted, want Succeeded", got.Status.Phase)
	}
	err := k8s.Get(context.Background(), client.ObjectKeyFromObject(master), &batchv1.Job{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("the master Job of a finished job was created again (err %v)", err)
	}
}
