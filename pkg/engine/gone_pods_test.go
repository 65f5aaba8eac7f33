package engine

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

func goneWorkerPod(job, pod string, evicted bool) *corev1.Pod {
	deleted := metav1.Now()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pod, UID: types.UID(pod), DeletionTimestamp: &deleted,
		Labels: map[string]string{troupev1.LabelJobUID: job, troupev1.LabelRole: troupev1.RoleWorker}}}
	if evicted {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}}
	}
	return p
}

// A gone worker's reason is kept for goneWorkerTTL after its deletion, and a worker recorded
// again (its pod's deletion seen twice) keeps the later reason for the later time.
func TestGoneWorkersExpireInTheirOrder(t *testing.T) {
	g := newGoneWorkers()
	t0 := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	g.record(goneWorkerPod("a", "a-0", true), t0)
	g.record(goneWorkerPod("a", "a-1", false), t0.Add(time.Minute))
	g.record(goneWorkerPod("b", "b-0", false), t0.Add(2*time.Minute))
	g.record(goneWorkerPod("a", "a-0", false), t0.Add(3*time.Minute)) // seen again, deleted by hand
	if got := g.of("a"); len(got) != 2 || got["a-0"] != troupev1.FailureDeleted {
		t.Fatalf("job a's gone workers %v, want a-0 Deleted (its later record) and a-1", got)
	}
	// Past a-0's first record and a-1's: a-1 goes, a-0's later record stays.
	g.record(goneWorkerPod("c", "c-0", false), t0.Add(goneWorkerTTL+time.Minute+time.Second))
	if got := g.of("a"); len(got) != 1 || got["a-0"] != troupev1.FailureDeleted {
		t.Errorf("job a after a-1 expired: %v, want a-0 only", got)
	}
	if got := g.of("b"); len(got) != 1 {
		t.Errorf("job b's worker went before its time: %v", got)
	}
	// Past everything but c-0.
	g.record(goneWorkerPod("c", "c-1", false), t0.Add(goneWorkerTTL+4*time.Minute))
	if len(g.of("a")) != 0 || len(g.of("b")) != 0 || len(g.of("c")) != 2 {
		t.Errorf("after the TTL: a %v, b %v, c %v; want only c's two", g.of("a"), g.of("b"), g.of("c"))
	}
	if len(g.jobs) != 1 || len(g.recorded) != 2 {
		t.Errorf("kept %d jobs and %d records, want 1 and 2", len(g.jobs), len(g.recorded))
	}
	// Not a worker of a troupe job: not recorded.
	launcher := goneWorkerPod("c", "c-launcher", false)
	launcher.Labels[troupev1.LabelRole] = troupev1.RoleMaster
	g.record(launcher, t0.Add(goneWorkerTTL+5*time.Minute))
	if len(g.of("c")) != 2 {
		t.Errorf("a master pod was recorded as a gone worker: %v", g.of("c"))
	}
}

// BenchmarkGoneWorkersRecord is the cost of recording one deleted worker while 10,000 others,
// deleted within goneWorkerTTL, are remembered (the cleanup of 1,000 jobs of 10 workers): it
// does not grow with them.
func BenchmarkGoneWorkersRecord(b *testing.B) {
	g := newGoneWorkers()
	t0 := time.Now()
	for i := range 10000 {
		g.record(goneWorkerPod(fmt.Sprint("job-", i/10), fmt.Sprint("pod-", i), false), t0)
	}
	p := goneWorkerPod("job-x", "pod-x", false)
	b.ReportAllocs()
	for b.Loop() {
		g.record(p, t0)
	}
}

// The pods' cache transform records a worker's eviction before the cache holds the evicted pod,
// so a pass that finds the worker gone (its replacement already there) reads Evicted even when
// the pod watch's handler has not yet seen the deletion; a worker that is not going, or a
// launcher, is not recorded.
func TestCacheTransformRecordsAGoingWorkerFirst(t *testing.T) {
	job := types.UID("transform-job")
	t.Cleanup(func() {
		workersGone.mu.Lock()
		delete(workersGone.jobs, job)
		workersGone.mu.Unlock()
	})
	running := goneWorkerPod(string(job), "transform-running", false)
	running.DeletionTimestamp = nil
	running.Status.Phase = corev1.PodRunning
	evicted := goneWorkerPod(string(job), "transform-evicted", true)
	evicted.DeletionTimestamp = nil // the condition comes first, the deletion after it
	launcher := goneWorkerPod(string(job), "transform-launcher", true)
	launcher.Labels[troupev1.LabelRole] = troupev1.RoleMaster
	for _, p := range []*corev1.Pod{running, evicted, launcher} {
		held, err := trimPod(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := held.(*cachedPod); !ok {
			t.Fatalf("the transform held %T, want a cachedPod", held)
		}
	}
	got := workersGone.of(job)
	if len(got) != 1 || got["transform-evicted"] != troupev1.FailureEvicted {
		t.Errorf("recorded %v, want only the evicted worker, Evicted", got)
	}
}
