package e2e

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/backend/mpi"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

const exampleMPIJob = "../../examples/mpijob.yaml"

func loadMPIJob(t *testing.T, ns string) *troupev1.MPIJob {
	t.Helper()
	return testutil.Load[*troupev1.MPIJob](t, exampleMPIJob, ns)
}

// waitForExampleMPIJob waits until the example MPIJob in ns satisfies pred.
func waitForExampleMPIJob(t *testing.T, ns, what string, pred func(*troupev1.MPIJob) bool) {
	t.Helper()
	job := &troupev1.MPIJob{}
	eventually(t, "MPIJob mpi-example "+what, func(ctx context.Context) (bool, error) {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "mpi-example"}, job)
		return err == nil && pred(job), err
	})
}

// The T9k example, as written, runs to Succeeded with the real Job and StatefulSet
// controllers; `kubectl scale` on a running job changes the StatefulSet and the hostfile.
func TestMPIJobT9kExample(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	job := loadMPIJob(t, ns)
	job.Spec.Worker.Replicas = ptrInt32(2)
	// The generated launcher copies the worker template's metadata; this simulated run time
	// (a kwok stage reads it on Job pods only) leaves room to scale the job while it runs.
	job.Spec.Worker.Template.Annotations = map[string]string{simDurationAnnot: "15s"}
	if err := k8s.Create(context.Background(), job); err != nil {
		t.Fatalf("create the T9k example: %v", err)
	}
	waitForExampleMPIJob(t, ns, "Running with 2 ready workers", func(j *troupev1.MPIJob) bool {
		return j.Status.Phase == troupev1.JobRunning && j.Status.Workers == "2/2"
	})

	if out, err := kubectl("scale", "-n", ns, "mpijob/mpi-example", "--replicas=3"); err != nil {
		t.Fatalf("kubectl scale: %v: %s", err, out)
	}
	eventually(t, "3 workers and their hostfile", func(ctx context.Context) (bool, error) {
		var sts appsv1.StatefulSet
		var cm corev1.ConfigMap
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "mpi-example-worker"}, &sts); err != nil {
			return false, err
		}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "mpi-example-mpi"}, &cm); err != nil {
			return false, err
		}
		return sts.Status.ReadyReplicas == 3 && strings.Count(cm.Data[mpi.HostfileKey], "\n") == 3, nil
	})

	waitForExampleMPIJob(t, ns, "Succeeded", func(j *troupev1.MPIJob) bool {
		return j.Status.Phase == troupev1.JobSucceeded
	})
}

func ptrInt32(v int32) *int32 { return &v }

// Horovod jobs, plain and elastic, run to Succeeded on the simulated cluster; every troupe
// kind shows in `kubectl get troupe`.
func TestHorovodJobsSucceed(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	for _, file := range []string{"horovodjob.yaml", "horovodjob-elastic.yaml"} {
		job := testutil.Load[*troupev1.HorovodJob](t, "../../examples/"+file, ns)
		if err := k8s.Create(context.Background(), job); err != nil {
			t.Fatalf("create %s: %v", file, err)
		}
	}
	mpiJob := loadMPIJob(t, ns)
	if err := k8s.Create(context.Background(), mpiJob); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"horovod-mnist", "horovod-elastic"} {
		eventually(t, "HorovodJob "+name+" Succeeded", func(ctx context.Context) (bool, error) {
			job := &troupev1.HorovodJob{}
			err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, job)
			return err == nil && job.Status.Phase == troupev1.JobSucceeded, err
		})
	}
	out, err := kubectl("get", "troupe", "-n", ns)
	if err != nil {
		t.Fatalf("kubectl get troupe: %v: %s", err, out)
	}
	for _, want := range []string{"horovodjob.troupe.dev/horovod-mnist", "horovodjob.troupe.dev/horovod-elastic", "mpijob.troupe.dev/mpi-example"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl get troupe lacks %s:\n%s", want, out)
		}
	}
}

// A ChainerJob and an MPIJob may share a name in one namespace: the second one reports the
// names it would share (the headless Service, the hostfile ConfigMap) as a conflict and
// creates nothing; the first runs to Succeeded untouched.
func TestChainerJobAndMPIJobWithOneName(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	chainer := testutil.MakeChainerJob("same", ns).WorkerSet("ws0", 1).Obj()
	create(t, chainer)
	waitForJob(t, ns, "same", "Running", func(j *troupev1.ChainerJob) bool { return j.Status.Phase == troupev1.JobRunning })

	mpiJob := loadMPIJob(t, ns)
	mpiJob.Name = "same"
	if err := k8s.Create(context.Background(), mpiJob); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the MPIJob reports the shared names", func(ctx context.Context) (bool, error) {
		j := &troupev1.MPIJob{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "same"}, j); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(j.Status.Conditions, troupev1.ConditionInitialized)
		return c != nil && c.Reason == troupev1.ReasonChildConflict && strings.Contains(c.Message, "Service same"), nil
	})
	var sts appsv1.StatefulSetList
	if err := k8s.List(context.Background(), &sts, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, s := range sts.Items {
		if s.Name == "same-worker" {
			t.Errorf("the MPIJob created its workers despite the conflict")
		}
	}
	waitForJob(t, ns, "same", "Succeeded", func(j *troupev1.ChainerJob) bool { return j.Status.Phase == troupev1.JobSucceeded })
}
