package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueuev1 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// A job scaled after its Workload was made is charged for its new size (docs/kueue.md): a job
// still waiting in the queue gets a new Workload of the new size; an admitted, running job is
// stopped, queued again at its new size and run with it, as Kueue does for its own kinds.
func TestKueueChargesAScaledJobForItsSize(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	pool := "kueue-" + ns
	gangPool(t, pool)
	kc := kueueClient(t)
	low, _ := kueueQueue(t, kc, ns, pool)

	// The queue's 8 CPUs: a blocker takes 6, so a second job of 6 waits; scaled to 1 worker
	// while it waits, its Workload is made anew at 4 CPUs and it still waits, then runs so.
	// The blocker runs long enough for the steps below on a loaded machine: in a cold CI run
	// the waiting job's first status came 9 s after the blocker ran.
	blocker := queuedChainerJob("blocker", ns, low, "30s")
	createJob(t, blocker)
	waitPhase(t, blocker, troupev1.JobRunning)
	waiting := queuedChainerJob("waiting", ns, low, "3s")
	createJob(t, waiting)
	// Kueue's side (the Workload, the Admitted condition) can be done before the engine's first
	// pass of the job has written its phase: wait for both, so that the check after the scale
	// sees what the scale did, not a status not written yet.
	eventually(t, "waiting waits in LocalQueue lq, Suspended", func(ctx context.Context) (bool, error) {
		c, job, err := admittedCondition(ctx, waiting)
		return c != nil && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, "insufficient") &&
			job.Status.Phase == troupev1.JobSuspended, err
	})
	expectWorkload(t, kc, waiting)
	if out, err := kubectl("patch", "chainerjob", "waiting", "-n", ns, "--type=merge",
		"-p", `{"spec":{"workerSets":{"ws0":{"replicas":1}}}}`); err != nil {
		t.Fatalf("scale the waiting job: %v\n%s", err, out)
	}
	eventually(t, "waiting's Workload made anew with master=1,ws0=1", func(ctx context.Context) (bool, error) {
		wl, err := jobWorkload(ctx, kc, waiting)
		return wl != nil && wl.DeletionTimestamp.IsZero() && len(wl.Spec.PodSets) == 2 && wl.Spec.PodSets[1].Count == 1, err
	})
	expectEvent(t, ns, "waiting", "DeletedWorkload", "ws0: 2 -> 1")
	if job := getJob(t, waiting); job.Status.Phase != troupev1.JobSuspended {
		t.Errorf("waiting is %s after its scale, want still Suspended behind the blocker", job.Status.Phase)
	}
	waitPhase(t, blocker, troupev1.JobSucceeded)
	waitPhase(t, waiting, troupev1.JobSucceeded)
	if job := getJob(t, waiting); workerReplicas(job) != 1 {
		t.Errorf("waiting ran with %d workers, want 1", workerReplicas(job))
	}

	// An admitted MPIJob scaled with kubectl scale: stopped, queued again, run with 3 workers.
	mpiJob := queuedMPIJob(t, ns, low, "1", "20s")
	createJob(t, mpiJob)
	waitPhase(t, mpiJob, troupev1.JobRunning)
	expectWorkloadPodSets(t, kc, mpiJob, "launcher=1,worker=2")
	if out, err := kubectl("scale", "mpijob", mpiJob.Name, "-n", ns, "--replicas=3"); err != nil {
		t.Fatalf("kubectl scale mpijob: %v\n%s", err, out)
	}
	expectEvent(t, ns, mpiJob.Name, "Stopped", "worker: 2 -> 3")
	eventually(t, mpiJob.Name+" admitted again with worker=3", func(ctx context.Context) (bool, error) {
		wl, err := jobWorkload(ctx, kc, mpiJob)
		if err != nil || wl == nil || len(wl.Spec.PodSets) != 2 {
			return false, err
		}
		return wl.Spec.PodSets[1].Count == 3 && meta.IsStatusConditionTrue(wl.Status.Conditions, kueuev1.WorkloadAdmitted), nil
	})
	eventually(t, mpiJob.Name+" runs 3 workers", func(ctx context.Context) (bool, error) {
		got := &troupev1.MPIJob{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(mpiJob), got); err != nil {
			return false, err
		}
		for _, rs := range got.Status.ReplicaStatuses {
			if rs.Name == troupev1.MPIWorkerSetName {
				return rs.Replicas == 3 && rs.Ready == 3, nil
			}
		}
		return false, nil
	})
	waitPhase(t, mpiJob, troupev1.JobSucceeded)
}

// With Kueue's waitForPodsReady on (hack/controlplane/kueue-config.yaml: 20 s), a job that runs
// longer than the timeout is not evicted: troupe tells Kueue its pods are ready.
func TestKueueWaitForPodsReady(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	pool := "kueue-" + ns
	gangPool(t, pool)
	kc := kueueClient(t)
	low, _ := kueueQueue(t, kc, ns, pool)

	job := queuedChainerJob("long", ns, low, "35s")
	createJob(t, job)
	waitPhase(t, job, troupev1.JobRunning)
	eventually(t, "the Workload says PodsReady True, reason Started", func(ctx context.Context) (bool, error) {
		wl, err := jobWorkload(ctx, kc, job)
		if err != nil || wl == nil {
			return false, err
		}
		c := meta.FindStatusCondition(wl.Status.Conditions, kueuev1.WorkloadPodsReady)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == kueuev1.WorkloadStarted, nil
	})
	waitPhase(t, job, troupev1.JobSucceeded)
	wl, err := jobWorkload(context.Background(), kc, job)
	if err != nil || wl == nil {
		t.Fatalf("the Workload: %v %v", wl, err)
	}
	if c := meta.FindStatusCondition(wl.Status.Conditions, kueuev1.WorkloadEvicted); c != nil {
		t.Errorf("the Workload was evicted: %s: %s", c.Reason, c.Message)
	}
	if got := getJob(t, job); meta.FindStatusCondition(got.Status.Conditions, troupev1.ConditionAdmitted).Status != metav1.ConditionTrue {
		t.Errorf("Admitted after the run: %+v", meta.FindStatusCondition(got.Status.Conditions, troupev1.ConditionAdmitted))
	}
}

// expectEvent waits for an event of the named object with the reason, whose message contains
// want.
func expectEvent(t *testing.T, ns, name, reason, want string) {
	t.Helper()
	eventually(t, fmt.Sprintf("event %s of %s saying %q", reason, name, want), func(ctx context.Context) (bool, error) {
		var list eventsv1.EventList
		if err := k8s.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, err
		}
		return slices.ContainsFunc(list.Items, func(e eventsv1.Event) bool {
			return e.Regarding.Name == name && e.Reason == reason && strings.Contains(e.Note, want)
		}), nil
	})
}

func workerReplicas(job *troupev1.ChainerJob) int32 {
	return ptr.Deref(job.Spec.WorkerSets["ws0"].Replicas, 1)
}

// An admitted job scaled past its admission never runs more than Kueue admitted (issue 49): an
// MPIJob of 2 workers x 3 CPUs under the queue's 8 CPUs, `kubectl scale --replicas=4`: sampled
// every second, its Running pods never ask more than 8 CPUs; the job is stopped and waits in the
// queue at its new size (12 CPUs, never admitted); scaled back to 2, it is admitted and runs.
func TestScaledJobNeverRunsPastItsAdmission(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	pool := "kueue-" + ns
	gangPool(t, pool)
	kc := kueueClient(t)
	low, _ := kueueQueue(t, kc, ns, pool)

	job := queuedMPIJob(t, ns, low, "3", "30s")
	createJob(t, job)
	waitPhase(t, job, troupev1.JobRunning)
	expectWorkloadPodSets(t, kc, job, "launcher=1,worker=2")

	ctx, stop := context.WithCancel(context.Background())
	samples := make(chan int64, 1)
	go func() { samples <- peakRunningMilliCPU(ctx, ns) }()
	if out, err := kubectl("scale", "mpijob", job.Name, "-n", ns, "--replicas=4"); err != nil {
		stop()
		t.Fatalf("kubectl scale mpijob: %v\n%s", err, out)
	}
	expectEvent(t, ns, job.Name, "Stopped", "worker: 2 -> 4")
	eventually(t, job.Name+" queued again at worker=4, not admitted (12 of 8 CPUs)", func(ctx context.Context) (bool, error) {
		wl, err := jobWorkload(ctx, kc, job)
		if err != nil || wl == nil || len(wl.Spec.PodSets) != 2 {
			return false, err
		}
		got := &troupev1.MPIJob{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(job), got); err != nil {
			return false, err
		}
		return wl.Spec.PodSets[1].Count == 4 && !meta.IsStatusConditionTrue(wl.Status.Conditions, kueuev1.WorkloadAdmitted) &&
			meta.IsStatusConditionFalse(got.Status.Conditions, troupev1.ConditionAdmitted), nil
	})
	waitPhase(t, job, troupev1.JobSuspended)
	stop()
	if peak := <-samples; peak > 8000 {
		t.Errorf("the job's Running pods asked %dm CPU at their peak, more than the queue's 8 CPUs admitted", peak)
	} else {
		t.Logf("peak CPU asked by the job's Running pods, sampled every second: %dm of 8000m", peak)
	}

	if out, err := kubectl("scale", "mpijob", job.Name, "-n", ns, "--replicas=2"); err != nil {
		t.Fatalf("kubectl scale mpijob back: %v\n%s", err, out)
	}
	waitPhase(t, job, troupev1.JobSucceeded)
}

// peakRunningMilliCPU samples, every second until ctx ends, the CPU the Running pods of ns ask
// (their containers' requests), and returns the highest sample.
func peakRunningMilliCPU(ctx context.Context, ns string) int64 {
	var peak int64
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		var pods corev1.PodList
		if err := k8s.List(ctx, &pods, client.InNamespace(ns)); err == nil {
			var sum int64
			for _, p := range pods.Items {
				if p.Status.Phase != corev1.PodRunning {
					continue
				}
				for _, c := range p.Spec.Containers {
					sum += c.Resources.Requests.Cpu().MilliValue()
				}
			}
			peak = max(peak, sum)
		}
		select {
		case <-ctx.Done():
			return peak
		case <-tick.C:
		}
	}
}

// An admitted elastic PyTorchJob scaled down goes on (issue 49, elastic admission): its other
// workers keep their pods, the quota of the pod it no longer runs goes back to Kueue (the
// Workload's reclaimablePods), and a job waiting for that quota is admitted while it runs.
// Scaled up again past what it is still charged for, it is stopped and queued at its new size.
func TestKueueElasticJobShrinksInPlace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(t)
	pool := "kueue-" + ns
	gangPool(t, pool)
	kc := kueueClient(t)
	low, _ := kueueQueue(t, kc, ns, pool)

	elastic := testutil.Load[*troupev1.PyTorchJob](t, filepath.Join(repoRoot, "examples", "pytorchjob-elastic.yaml"), ns)
	w := elastic.Spec.PyTorchReplicaSpecs.Worker
	w.Replicas = ptr.To[int32](3) // its maxReplicas: 3 x 2 CPUs of the queue's 8
	requestCPU(&w.Template, "2")
	w.Template.Annotations = map[string]string{simDurationAnnot: "60s"}
	elastic.SetLabels(map[string]string{troupev1.LabelQueueName: "lq", troupev1.LabelWorkloadPriorityClass: low})
	createJob(t, elastic)
	waitPhase(t, elastic, troupev1.JobRunning)
	expectWorkloadPodSets(t, kc, elastic, "worker=3")
	before, err := queuedJobPods(ctx, elastic)
	if err != nil || len(before) != 3 {
		t.Fatalf("pods of the elastic job: %d (%v), want 3", len(before), err)
	}

	// A job of 2 x 2 CPUs waits: 6 + 4 is more than the queue's 8.
	waiting := pytorchExample(t, ns)
	waiting.Name = "waiting"
	waiting.Spec.PyTorchReplicaSpecs.Master = nil
	waiting.Spec.PyTorchReplicaSpecs.Worker.Replicas = ptr.To[int32](2)
	requestCPU(&waiting.Spec.PyTorchReplicaSpecs.Worker.Template, "2")
	waiting.Spec.PyTorchReplicaSpecs.Worker.Template.Annotations = map[string]string{simDurationAnnot: "5s"}
	waiting.SetLabels(map[string]string{troupev1.LabelQueueName: "lq", troupev1.LabelWorkloadPriorityClass: low})
	createJob(t, waiting)
	eventually(t, "waiting queued, not admitted", func(ctx context.Context) (bool, error) {
		wl, err := jobWorkload(ctx, kc, waiting)
		return wl != nil && !meta.IsStatusConditionTrue(wl.Status.Conditions, kueuev1.WorkloadAdmitted), err
	})

	if out, err := kubectl("scale", "pytorchjob", elastic.Name, "-n", ns, "--replicas=2"); err != nil {
		t.Fatalf("kubectl scale pytorchjob: %v\n%s", err, out)
	}
	expectEvent(t, ns, elastic.Name, "ReclaimedPods", "(worker: 1)")
	waitPhase(t, waiting, troupev1.JobSucceeded) // admitted on the quota handed back
	got := &troupev1.PyTorchJob{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(elastic), got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != troupev1.JobRunning || got.Annotations[troupev1.AnnotationAdmittedPodSets] != "worker=2" {
		t.Errorf("elastic job after the scale down: phase %s, admitted %q; want Running, worker=2", got.Status.Phase, got.Annotations[troupev1.AnnotationAdmittedPodSets])
	}
	after, err := queuedJobPods(ctx, elastic)
	if err != nil {
		t.Fatal(err)
	}
	kept := 0
	for _, p := range after {
		kept += len(slices.DeleteFunc(slices.Clone(before), func(b corev1.Pod) bool { return b.UID != p.UID }))
	}
	if len(after) != 2 || kept != 2 {
		t.Errorf("%d pods after the scale down, %d of them from before; want the 2 workers kept running", len(after), kept)
	}
	var events eventsv1.EventList
	if err := k8s.List(ctx, &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.Regarding.Name == elastic.Name && e.Reason == "Stopped" {
			t.Errorf("the elastic job was stopped: %s", e.Note)
		}
	}

	if out, err := kubectl("scale", "pytorchjob", elastic.Name, "-n", ns, "--replicas=3"); err != nil {
		t.Fatalf("kubectl scale pytorchjob back: %v\n%s", err, out)
	}
	expectEvent(t, ns, elastic.Name, "Stopped", "worker: 2 -> 3")
	expectWorkloadPodSets(t, kc, elastic, "worker=3")
	waitPhase(t, elastic, troupev1.JobRunning)
}
