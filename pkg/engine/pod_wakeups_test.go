package engine

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// newQueue is a controller's queue on a clock the test moves.
func newQueue(t *testing.T) (workqueue.TypedRateLimitingInterface[reconcile.Request], *clocktesting.FakeClock) {
	clock := clocktesting.NewFakeClock(time.Unix(100, 0))
	q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request](),
		workqueue.TypedRateLimitingQueueConfig[reconcile.Request]{
			DelayingQueue: workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[reconcile.Request]{Clock: clock}),
		})
	t.Cleanup(q.ShutDown)
	return q, clock
}

// newManagerQueue is a controller's queue as the manager makes it: controller-runtime's priority
// queue, on the real clock.
func newManagerQueue(t *testing.T) priorityqueue.PriorityQueue[reconcile.Request] {
	q := priorityqueue.New[reconcile.Request]("test")
	t.Cleanup(q.ShutDown)
	return q
}

// passOrder takes n jobs off q, one after the other as a single worker would, and names them;
// it fails the test when fewer than n are queued within 5 s (Get would wait for ever).
func passOrder(t *testing.T, q workqueue.TypedRateLimitingInterface[reconcile.Request], n int) []string {
	t.Helper()
	var order []string
	for range n {
		if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 5*time.Second, true,
			func(context.Context) (bool, error) { return q.Len() > 0, nil }); err != nil {
			t.Fatalf("%d of %d jobs queued (%v)", len(order), n, order)
		}
		got, _ := q.Get()
		order = append(order, got.Name)
		q.Done(got)
	}
	return order
}

// stepUntilQueued moves the clock on by d, and once or twice more while nothing is queued: the
// delaying queue takes an item added with a delay in a goroutine of its own, on its own time, and
// a step made before it did would leave the item waiting for a moment the clock has already
// passed (a loaded machine made TestChildWakeups fail so). Three steps at most, so a delay much
// longer than d still fails.
func stepUntilQueued(t *testing.T, clock *clocktesting.FakeClock, q workqueue.TypedRateLimitingInterface[reconcile.Request], d time.Duration) {
	t.Helper()
	for range 3 {
		clock.Step(d)
		if wait.PollUntilContextTimeout(context.Background(), time.Millisecond, time.Second, true,
			func(context.Context) (bool, error) { return q.Len() > 0, nil }) == nil {
			return
		}
	}
}

// queuedOnce waits until the queue holds an entry (the delaying queue moves due items in a
// goroutine of its own), checks that it holds job alone, and takes it.
func queuedOnce(t *testing.T, q workqueue.TypedRateLimitingInterface[reconcile.Request], job reconcile.Request) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 5*time.Second, true,
		func(context.Context) (bool, error) { return q.Len() > 0, nil })
	if err != nil || q.Len() != 1 {
		t.Fatalf("jobs queued = %d, want 1", q.Len())
	}
	got, _ := q.Get()
	if got != job {
		t.Errorf("queued %v, want %v", got, job)
	}
	q.Done(got)
}

func TestPodWakeups(t *testing.T) {
	nameLabel := troupev1.NameLabel("MPIJob") // a label the cache keeps (LabelsRead)
	pod := func(name, job string, phase corev1.PodPhase) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml"}, Status: corev1.PodStatus{Phase: phase}}
		if job != "" {
			p.Labels = map[string]string{nameLabel: job}
		}
		return p
	}
	deleting := pod("pi-worker-0", "pi", corev1.PodRunning)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	pi := reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "ml", Name: "pi"}}

	h := podWakeups{nameLabel: nameLabel, delay: time.Second}
	ctx := context.Background()

	t.Run("progress wakes the job a moment later, once for the pods that moved meanwhile", func(t *testing.T) {
		q, clock := newQueue(t)
		h.Update(ctx, event.UpdateEvent{ObjectOld: pod("pi-worker-0", "pi", corev1.PodPending), ObjectNew: pod("pi-worker-0", "pi", corev1.PodRunning)}, q)
		h.Update(ctx, event.UpdateEvent{ObjectOld: pod("pi-worker-1", "pi", corev1.PodPending), ObjectNew: pod("pi-worker-1", "pi", corev1.PodRunning)}, q)
		if q.Len() != 0 {
			t.Fatalf("a pod's progress woke its job at once (%d queued)", q.Len())
		}
		stepUntilQueued(t, clock, q, time.Second)
		queuedOnce(t, q, pi)
	})
	for name, newer := range map[string]*corev1.Pod{
		"succeeded": pod("pi-launcher-x", "pi", corev1.PodSucceeded),
		"failed":    pod("pi-worker-0", "pi", corev1.PodFailed),
		"deleting":  deleting,
	} {
		t.Run("a pod "+name+" wakes the job at once", func(t *testing.T) {
			q, _ := newQueue(t)
			h.Update(ctx, event.UpdateEvent{ObjectOld: pod(newer.Name, "pi", corev1.PodRunning), ObjectNew: newer}, q)
			queuedOnce(t, q, pi)
		})
	}
	t.Run("a pod created wakes the job a moment later, once for the pods created meanwhile", func(t *testing.T) {
		q, clock := newQueue(t)
		h.Create(ctx, event.CreateEvent{Object: pod("pi-worker-0", "pi", corev1.PodPending)}, q)
		h.Create(ctx, event.CreateEvent{Object: pod("pi-worker-1", "pi", corev1.PodPending)}, q)
		if q.Len() != 0 {
			t.Fatalf("a pod's create woke its job at once (%d queued)", q.Len())
		}
		stepUntilQueued(t, clock, q, time.Second)
		queuedOnce(t, q, pi)
	})
	t.Run("a pod first seen ended, or deleted, wakes the job at once", func(t *testing.T) {
		q, _ := newQueue(t)
		h.Create(ctx, event.CreateEvent{Object: pod("pi-worker-0", "pi", corev1.PodFailed)}, q)
		queuedOnce(t, q, pi)
		h.Delete(ctx, event.DeleteEvent{Object: pod("pi-worker-0", "pi", corev1.PodRunning)}, q)
		queuedOnce(t, q, pi)
	})
	t.Run("a pod relabelled away from its job wakes that job at once", func(t *testing.T) {
		q, _ := newQueue(t)
		h.Update(ctx, event.UpdateEvent{ObjectOld: pod("pi-worker-0", "pi", corev1.PodRunning), ObjectNew: pod("pi-worker-0", "", corev1.PodRunning)}, q)
		queuedOnce(t, q, pi)
	})
	// The manager's queue is controller-runtime's priority queue (its default), which takes
	// items in through a buffer, in order, and knows no fake clock: with an hour's delay, a
	// progress seen queued is a wake-up that did not wait.
	t.Run("on the manager's queue, progress waits and an end does not", func(t *testing.T) {
		q := newManagerQueue(t)
		later := podWakeups{nameLabel: nameLabel, delay: time.Hour}
		other := reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "ml", Name: "other"}}
		later.Update(ctx, event.UpdateEvent{ObjectOld: pod("pi-worker-0", "pi", corev1.PodPending), ObjectNew: pod("pi-worker-0", "pi", corev1.PodRunning)}, q)
		later.Delete(ctx, event.DeleteEvent{Object: pod("other-worker-0", "other", corev1.PodRunning)}, q)
		if got, _ := q.Get(); got != other {
			t.Fatalf("first queued %v, want %v (a pod's progress did not wait)", got, other)
		}
		if q.Len() != 0 {
			t.Fatalf("%d more queued: a pod's progress did not wait", q.Len())
		}
		later.Update(ctx, event.UpdateEvent{ObjectOld: pod("pi-worker-0", "pi", corev1.PodRunning), ObjectNew: pod("pi-worker-0", "pi", corev1.PodFailed)}, q)
		if got, _ := q.Get(); got != pi {
			t.Errorf("queued %v, want %v at once", got, pi)
		}
	})
	// A burst of ends queued behind other jobs' passes made the status lag (endPriority).
	t.Run("on the manager's queue, a pod's end goes ahead of the jobs already queued", func(t *testing.T) {
		q := newManagerQueue(t)
		for _, name := range []string{"a", "b", "c"} {
			h.Delete(ctx, event.DeleteEvent{Object: pod(name+"-worker-0", name, corev1.PodRunning)}, q)
		}
		h.Update(ctx, event.UpdateEvent{ObjectOld: pod("pi-launcher-x", "pi", corev1.PodRunning), ObjectNew: pod("pi-launcher-x", "pi", corev1.PodSucceeded)}, q)
		if order, want := passOrder(t, q, 4), []string{"pi", "a", "b", "c"}; !slices.Equal(order, want) {
			t.Errorf("passes in the order %v, want %v", order, want)
		}
	})
	t.Run("on the manager's queue, a pod listed ended when the watch starts does not go ahead", func(t *testing.T) {
		q := newManagerQueue(t)
		h.Delete(ctx, event.DeleteEvent{Object: pod("a-worker-0", "a", corev1.PodRunning)}, q)
		h.Create(ctx, event.CreateEvent{Object: pod("pi-launcher-x", "pi", corev1.PodSucceeded), IsInInitialList: true}, q)
		h.Create(ctx, event.CreateEvent{Object: pod("b-launcher-x", "b", corev1.PodFailed)}, q)
		if order, want := passOrder(t, q, 3), []string{"b", "a", "pi"}; !slices.Equal(order, want) {
			t.Errorf("passes in the order %v, want %v", order, want)
		}
	})
	// The manager's watch hands over the cache's records (cachedPod), read without expanding.
	t.Run("the cache's record of a pod wakes its job as the pod does", func(t *testing.T) {
		q := newManagerQueue(t)
		later := podWakeups{nameLabel: nameLabel, delay: time.Hour}
		goingAway := pod("b-worker-0", "b", corev1.PodRunning)
		goingAway.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
		later.Create(ctx, event.CreateEvent{Object: newCachedPod(pod("a-worker-0", "a", corev1.PodPending))}, q)
		later.Update(ctx, event.UpdateEvent{ObjectOld: newCachedPod(pod("b-worker-0", "b", corev1.PodRunning)), ObjectNew: newCachedPod(goingAway)}, q)
		later.Update(ctx, event.UpdateEvent{ObjectOld: newCachedPod(pod("pi-launcher-x", "pi", corev1.PodRunning)),
			ObjectNew: newCachedPod(pod("pi-launcher-x", "pi", corev1.PodSucceeded))}, q)
		if order, want := passOrder(t, q, 2), []string{"pi", "b"}; !slices.Equal(order, want) {
			t.Errorf("passes in the order %v, want %v (the end ahead, the deletion at once)", order, want)
		}
		if q.Len() != 0 {
			t.Errorf("%d more queued: a created pod's progress did not wait", q.Len())
		}
	})
	t.Run("a pod without the job's name label wakes nothing", func(t *testing.T) {
		q, clock := newQueue(t)
		h.Create(ctx, event.CreateEvent{Object: pod("other", "", corev1.PodPending)}, q)
		h.Update(ctx, event.UpdateEvent{ObjectOld: pod("other", "", corev1.PodPending), ObjectNew: pod("other", "", corev1.PodRunning)}, q)
		clock.Step(time.Second)
		if q.Len() != 0 {
			t.Errorf("%d jobs queued for a pod of none", q.Len())
		}
	})
}
