package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
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
	"github.com/troupe-dev/troupe/pkg/queue/kueue"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// TestKueueElasticJobGrowsInPlace: an admitted elastic PyTorchJob that opted in to Kueue's
// Workload slices (annotation kueue.x-k8s.io/elastic-job, the local Kueue's
// ElasticJobsViaWorkloadSlices gate on) is scaled up under the queue's 8 CPUs. To 3 x 2 CPUs,
// which fit: it keeps its 2 pods, is never stopped, its third worker runs, Kueue admits the slice
// of its new size and finishes the Workload it replaces, the third pod is made only once the
// slice is admitted, and the queue charges it 6 CPUs, so a job of 4 waits. To 5 x 2, which does
// not fit: it runs its 3 workers and says it waits for the slice. Scaled back to 3, the slice is
// withdrawn; scaled to 2, it hands a worker's 2 CPUs back, still without a stop.
func TestKueueElasticJobGrowsInPlace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(t)
	pool := "kueue-" + ns
	gangPool(t, pool)
	kc := kueueClient(t)
	low, _ := kueueQueue(t, kc, ns, pool)

	elastic := testutil.Load[*troupev1.PyTorchJob](t, filepath.Join(repoRoot, "examples", "pytorchjob-elastic.yaml"), ns)
	elastic.Spec.ElasticPolicy.MaxReplicas = ptr.To[int32](5)
	w := elastic.Spec.PyTorchReplicaSpecs.Worker
	requestCPU(&w.Template, "2")
	w.Template.Annotations = map[string]string{simDurationAnnot: "300s"}
	elastic.SetLabels(map[string]string{troupev1.LabelQueueName: "lq", troupev1.LabelWorkloadPriorityClass: low})
	elastic.SetAnnotations(map[string]string{troupev1.AnnotationElasticJob: "true"})
	createJob(t, elastic)
	waitPhase(t, elastic, troupev1.JobRunning)
	waitSteady(t, kc, elastic)
	before := waitWorkers(t, elastic, 2)

	// From here on the job is never suspended: sampled on every poll of the waits below.
	stops := stopWatch{job: elastic}

	start := time.Now()
	scale(t, elastic, 3)
	expectEvent(t, ns, elastic.Name, kueue.EventAdmittedSlice, "(worker=3)")
	eventually(t, "the third worker running beside the first two", func(ctx context.Context) (bool, error) {
		stops.sample(ctx)
		pods, err := queuedJobPods(ctx, elastic)
		running := slices.DeleteFunc(pods, func(p corev1.Pod) bool { return p.Status.Phase != corev1.PodRunning })
		return len(running) == 3, err
	})
	grown := time.Since(start)
	after := waitWorkers(t, elastic, 3)
	expectKept(t, before, after, "the scale up")
	got := &troupev1.PyTorchJob{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(elastic), got); err != nil {
		t.Fatal(err)
	}
	if a := got.Annotations[troupev1.AnnotationAdmittedPodSets]; a != "worker=3" {
		t.Errorf("admitted pod sets %q after the slice was admitted, want worker=3", a)
	}
	// One live Workload, the slice, admitted at 3 in place of the first, which Kueue finished.
	current, replaced := jobSlices(t, kc, elastic)
	if len(current) != 1 || len(replaced) != 1 {
		t.Fatalf("Workloads of the job: %d live, %d replaced; want 1 and 1", len(current), len(replaced))
	}
	if c := current[0]; !meta.IsStatusConditionTrue(c.Status.Conditions, kueuev1.WorkloadAdmitted) ||
		c.Spec.PodSets[0].Count != 3 || c.Annotations[kueue.AnnotationSliceReplacementFor] != ns+"/"+replaced[0].Name {
		t.Errorf("slice %s: admitted %v, %d workers, replaces %q; want admitted, 3, %s/%s", c.Name,
			meta.IsStatusConditionTrue(c.Status.Conditions, kueuev1.WorkloadAdmitted), c.Spec.PodSets[0].Count,
			c.Annotations[kueue.AnnotationSliceReplacementFor], ns, replaced[0].Name)
	}
	if len(replaced[0].Finalizers) != 0 {
		t.Errorf("replaced Workload %s keeps finalizers %v", replaced[0].Name, replaced[0].Finalizers)
	}
	// The new worker's pod was made once Kueue admitted the slice, not before.
	admitted := meta.FindStatusCondition(current[0].Status.Conditions, kueuev1.WorkloadAdmitted)
	if admitted != nil {
		expectNewPodsAfter(t, before, after, admitted)
		t.Logf("grown 2 -> 3 workers: slice %s admitted %s after it was made; third worker running %s after kubectl scale; pods kept: %s",
			current[0].Name, admitted.LastTransitionTime.Sub(current[0].CreationTimestamp.Time), grown.Round(100*time.Millisecond), podUIDs(before))
	}

	// The queue charges the job its 6 CPUs: a job of 2 x 2 CPUs waits for quota.
	waiting := pytorchExample(t, ns)
	waiting.Name = "waiting"
	waiting.Spec.PyTorchReplicaSpecs.Master = nil
	waiting.Spec.PyTorchReplicaSpecs.Worker.Replicas = ptr.To[int32](2)
	requestCPU(&waiting.Spec.PyTorchReplicaSpecs.Worker.Template, "2")
	waiting.Spec.PyTorchReplicaSpecs.Worker.Template.Annotations = map[string]string{simDurationAnnot: "5s"}
	waiting.SetLabels(map[string]string{troupev1.LabelQueueName: "lq", troupev1.LabelWorkloadPriorityClass: low})
	createJob(t, waiting)
	eventually(t, "waiting refused for quota", func(ctx context.Context) (bool, error) {
		stops.sample(ctx)
		wl, err := jobWorkload(ctx, kc, waiting)
		if err != nil || wl == nil {
			return false, err
		}
		q := meta.FindStatusCondition(wl.Status.Conditions, kueuev1.WorkloadQuotaReserved)
		return q != nil && q.Status == metav1.ConditionFalse && strings.Contains(q.Message, "insufficient unused quota"), nil
	})
	expectClusterQueueCPU(t, kc, pool, "6")
	if err := k8s.Delete(ctx, waiting); err != nil {
		t.Fatal(err)
	}

	// 5 x 2 CPUs do not fit the 8: the slice waits, and so do the pods beyond the 3 admitted.
	scale(t, elastic, 5)
	eventually(t, "the job says its new size waits for its slice", func(ctx context.Context) (bool, error) {
		stops.sample(ctx)
		got := &troupev1.PyTorchJob{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(elastic), got); err != nil {
			return false, err
		}
		a := meta.FindStatusCondition(got.Status.Conditions, troupev1.ConditionAdmitted)
		wr := meta.FindStatusCondition(got.Status.Conditions, troupev1.ConditionWorkersReady)
		return a != nil && a.Status == metav1.ConditionTrue && strings.Contains(a.Message, "its new size (worker=5) waits in LocalQueue lq for quota") &&
			strings.Contains(a.Message, "insufficient unused quota") &&
			wr != nil && wr.Reason == troupev1.ReasonAwaitingAdmission && strings.Contains(wr.Message, "worker: 5 asked, 3 admitted"), nil
	})
	if pods, err := queuedJobPods(ctx, elastic); err != nil || len(pods) != 3 {
		t.Errorf("pods while the slice of 5 waits: %d (%v), want the 3 admitted", len(pods), err)
	}
	expectClusterQueueCPU(t, kc, pool, "6")

	// Scaled back to what it runs, it needs the slice no more.
	scale(t, elastic, 3)
	expectEvent(t, ns, elastic.Name, "DeletedWorkload", "the job no longer grows by it")
	eventually(t, "one live Workload again, the job plainly admitted", func(ctx context.Context) (bool, error) {
		stops.sample(ctx)
		got := &troupev1.PyTorchJob{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(elastic), got); err != nil {
			return false, err
		}
		a := meta.FindStatusCondition(got.Status.Conditions, troupev1.ConditionAdmitted)
		current, _ := jobSlices(t, kc, elastic)
		return len(current) == 1 && a != nil && a.Status == metav1.ConditionTrue && !strings.Contains(a.Message, "waits"), nil
	})
	if pods, err := queuedJobPods(ctx, elastic); err != nil || len(pods) != 3 {
		t.Errorf("pods after the slice was withdrawn: %d (%v), want 3", len(pods), err)
	}

	// Scaled down to 2: it goes on with 2 of its pods and hands the third worker's 2 CPUs back.
	scale(t, elastic, 2)
	expectClusterQueueCPU(t, kc, pool, "4")
	eventually(t, "the elastic job down to 2 pods", func(ctx context.Context) (bool, error) {
		stops.sample(ctx)
		pods, err := queuedJobPods(ctx, elastic)
		return len(pods) == 2, err
	})
	for _, p := range waitWorkers(t, elastic, 2) {
		if !slices.ContainsFunc(after, func(a corev1.Pod) bool { return a.UID == p.UID }) {
			t.Errorf("pod %s (%s) is new after the scale down: the job's pods must be kept", p.Name, p.UID)
		}
		expectKept(t, []corev1.Pod{p}, []corev1.Pod{p}, "the scale down")
	}

	if s := stops.seen.Load(); s != nil {
		t.Errorf("the elastic job was stopped while it grew: %s", s)
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
}

// scale sets the job's workers with kubectl scale, as a user would.
func scale(t *testing.T, job queuedJob, n int) {
	t.Helper()
	kind := strings.ToLower(jobKind(job))
	if out, err := kubectl("scale", kind, job.GetName(), "-n", job.GetNamespace(), fmt.Sprintf("--replicas=%d", n)); err != nil {
		t.Fatalf("kubectl scale %s --replicas=%d: %v\n%s", kind, n, err, out)
	}
}

// waitWorkers waits until the job has n live pods and returns them.
func waitWorkers(t *testing.T, job queuedJob, n int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	eventually(t, fmt.Sprintf("%s with %d pods", job.GetName(), n), func(ctx context.Context) (bool, error) {
		var err error
		pods, err = queuedJobPods(ctx, job)
		return len(pods) == n, err
	})
	return pods
}

// jobSlices are the job's Workloads (troupe labels each with the job's UID): the live ones, and
// those Kueue finished as replaced by a slice.
func jobSlices(t *testing.T, kc client.Client, job queuedJob) (live, replaced []kueuev1.Workload) {
	t.Helper()
	list := &kueuev1.WorkloadList{}
	if err := kc.List(context.Background(), list, client.InNamespace(job.GetNamespace()),
		client.MatchingLabels{troupev1.LabelJobUID: string(job.GetUID())}); err != nil {
		t.Fatal(err)
	}
	for _, wl := range list.Items {
		if !wl.DeletionTimestamp.IsZero() {
			continue
		}
		if c := meta.FindStatusCondition(wl.Status.Conditions, kueuev1.WorkloadFinished); c != nil && c.Status == metav1.ConditionTrue {
			if c.Reason == kueuev1.WorkloadSliceReplaced {
				replaced = append(replaced, wl)
			}
			continue
		}
		live = append(live, wl)
	}
	return live, replaced
}

// expectClusterQueueCPU: the ClusterQueue (named after the pool) reserves cpu for its admitted
// Workloads.
func expectClusterQueueCPU(t *testing.T, kc client.Client, cq, cpu string) {
	t.Helper()
	eventually(t, "ClusterQueue "+cq+" reserving "+cpu+" CPUs", func(ctx context.Context) (bool, error) {
		got := &kueuev1.ClusterQueue{}
		if err := kc.Get(ctx, client.ObjectKey{Name: cq}, got); err != nil {
			return false, err
		}
		for _, f := range got.Status.FlavorsReservation {
			for _, r := range f.Resources {
				if r.Name == corev1.ResourceCPU {
					return r.Total.String() == cpu, nil
				}
			}
		}
		return false, nil
	})
}

// expectKept: every pod of kept is among all, the same pod (UID) never restarted.
func expectKept(t *testing.T, kept, all []corev1.Pod, when string) {
	t.Helper()
	for _, k := range kept {
		i := slices.IndexFunc(all, func(p corev1.Pod) bool { return p.UID == k.UID })
		if i < 0 {
			t.Errorf("pod %s (%s) is gone after %s: the job's running pods must be kept", k.Name, k.UID, when)
			continue
		}
		for _, cs := range all[i].Status.ContainerStatuses {
			if cs.RestartCount != 0 {
				t.Errorf("pod %s container %s restarted %d times by %s", k.Name, cs.Name, cs.RestartCount, when)
			}
		}
	}
}

// waitSteady waits until the job runs steadily, as it must before it is scaled: its workers
// ready and its Workload told so (PodsReady).
func waitSteady(t *testing.T, kc client.Client, job queuedJob) {
	t.Helper()
	eventually(t, job.GetName()+"'s workers ready, its Workload PodsReady", func(ctx context.Context) (bool, error) {
		got := job.DeepCopyObject().(queuedJob)
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(job), got); err != nil {
			return false, err
		}
		wl, err := jobWorkload(ctx, kc, job)
		return err == nil && wl != nil && meta.IsStatusConditionTrue(wl.Status.Conditions, kueuev1.WorkloadPodsReady) &&
			meta.IsStatusConditionTrue(got.JobStatus().Conditions, troupev1.ConditionWorkersReady), err
	})
}

// stopWatch remembers whether its job was ever seen suspended or out of Running, each time it is
// sampled (on every poll of a wait while the job grows or shrinks).
type stopWatch struct {
	job  queuedJob
	seen atomic.Value // what was seen, as "suspend <bool>, phase <phase>"
}

func (w *stopWatch) sample(ctx context.Context) {
	got := w.job.DeepCopyObject().(queuedJob)
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(w.job), got); err != nil {
		return
	}
	if suspend := ptr.Deref(got.JobRunPolicy().Suspend, false); suspend || got.JobStatus().Phase != troupev1.JobRunning {
		w.seen.Store(fmt.Sprintf("suspend %v, phase %s", suspend, got.JobStatus().Phase))
	}
}

// expectNewPodsAfter: every pod of after that is not in before was made once Kueue admitted the
// slice (admitted, its Admitted condition), not before.
func expectNewPodsAfter(t *testing.T, before, after []corev1.Pod, admitted *metav1.Condition) {
	t.Helper()
	for _, p := range after {
		if !slices.ContainsFunc(before, func(b corev1.Pod) bool { return b.UID == p.UID }) &&
			p.CreationTimestamp.Before(&admitted.LastTransitionTime) {
			t.Errorf("pod %s made at %s, before Kueue admitted the slice at %s", p.Name, p.CreationTimestamp, admitted.LastTransitionTime)
		}
	}
}

// podUIDs says pods as "name=uid, ...".
func podUIDs(pods []corev1.Pod) string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, p.Name+"="+string(p.UID))
	}
	return strings.Join(out, ", ")
}

// TestKueueElasticHorovodGrowsInPlace: an admitted elastic HorovodJob (its launcher and 2
// workers of 1 CPU) that opted in to Workload slices is scaled to 3 workers under the queue's 8
// CPUs: its launcher and its 2 workers keep their pods without a restart, it is never stopped,
// Kueue admits the slice of launcher=1,worker=3 in place of its Workload, and the third worker's
// pod is made once the slice is admitted.
func TestKueueElasticHorovodGrowsInPlace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(t)
	pool := "kueue-" + ns
	gangPool(t, pool)
	kc := kueueClient(t)
	low, _ := kueueQueue(t, kc, ns, pool)

	job := testutil.Load[*troupev1.HorovodJob](t, filepath.Join(repoRoot, "examples", "horovodjob-elastic.yaml"), ns)
	job.Spec.Worker.Replicas = ptr.To[int32](2)
	requestCPU(&job.Spec.Worker.Template, "1")
	job.Spec.Worker.Template.Annotations = map[string]string{simDurationAnnot: "300s"}
	job.SetLabels(map[string]string{troupev1.LabelQueueName: "lq", troupev1.LabelWorkloadPriorityClass: low})
	job.SetAnnotations(map[string]string{troupev1.AnnotationElasticJob: "true"})
	createJob(t, job)
	waitPhase(t, job, troupev1.JobRunning)
	waitSteady(t, kc, job)
	before := waitWorkers(t, job, 3) // the launcher and 2 workers

	stops := stopWatch{job: job}
	start := time.Now()
	scale(t, job, 3)
	expectEvent(t, ns, job.Name, kueue.EventAdmittedSlice, "(launcher=1,worker=3)")
	eventually(t, "the third worker running beside the launcher and the first two", func(ctx context.Context) (bool, error) {
		stops.sample(ctx)
		pods, err := queuedJobPods(ctx, job)
		running := slices.DeleteFunc(pods, func(p corev1.Pod) bool { return p.Status.Phase != corev1.PodRunning })
		return len(running) == 4, err
	})
	grown := time.Since(start)
	after := waitWorkers(t, job, 4)
	expectKept(t, before, after, "the scale up")

	got := &troupev1.HorovodJob{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(job), got); err != nil {
		t.Fatal(err)
	}
	if a := got.Annotations[troupev1.AnnotationAdmittedPodSets]; a != "launcher=1,worker=3" {
		t.Errorf("admitted pod sets %q after the slice was admitted, want launcher=1,worker=3", a)
	}
	current, replaced := jobSlices(t, kc, job)
	if len(current) != 1 || len(replaced) != 1 {
		t.Fatalf("Workloads of the job: %d live, %d replaced; want 1 and 1", len(current), len(replaced))
	}
	admitted := meta.FindStatusCondition(current[0].Status.Conditions, kueuev1.WorkloadAdmitted)
	if admitted == nil || admitted.Status != metav1.ConditionTrue {
		t.Fatalf("slice %s not admitted: %v", current[0].Name, admitted)
	}
	expectNewPodsAfter(t, before, after, admitted)
	t.Logf("grown to 3 workers: slice %s admitted %s after it was made; the third worker running %s after kubectl scale; pods kept: %s",
		current[0].Name, admitted.LastTransitionTime.Sub(current[0].CreationTimestamp.Time), grown.Round(100*time.Millisecond), podUIDs(before))
	if s := stops.seen.Load(); s != nil {
		t.Errorf("the elastic HorovodJob was stopped while it grew: %s", s)
	}
}
