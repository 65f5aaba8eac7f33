package engine

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// A node's health wakes the jobs with pods on it when the node's loss changes: a node not Ready
// for less than the lost-node timeout wakes none, one lost wakes them at the timeout, one Ready
// again after being lost, deleted or marked out of service at once.
func TestNodeWakeups(t *testing.T) {
	const timeout = time.Minute
	type wait struct {
		after time.Duration
		run   func()
	}
	jobs := []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: "ml", Name: "a"}}, {NamespacedName: client.ObjectKey{Namespace: "ml", Name: "b"}}}
	start := now.Time
	setup := func(t *testing.T, current *corev1.Node) (nodeWakeups, *time.Time, *[]wait, client.Client) {
		clock := start
		var waits []wait
		c := fakeJobClient(t, current)
		return nodeWakeups{
			nodes:   c,
			jobsOn:  func(context.Context, client.Object) []reconcile.Request { return jobs },
			policy:  LostNodePolicy{Timeout: timeout},
			now:     func() time.Time { return clock },
			after:   func(d time.Duration, f func()) { waits = append(waits, wait{d, f}) },
			waiting: &sync.Map{},
		}, &clock, &waits, c
	}
	// runWaits runs the waits due by the clock, as their timers would, and the waits they start.
	runWaits := func(clock *time.Time, waits *[]wait) {
		for len(*waits) > 0 {
			w := (*waits)[0]
			*waits = (*waits)[1:]
			*clock = clock.Add(w.after)
			w.run()
		}
	}
	ctx := context.Background()
	ready := node("n", corev1.ConditionTrue, start.Add(-time.Hour))
	unknown := node("n", corev1.ConditionUnknown, start)

	t.Run("not Ready, then lost at the timeout", func(t *testing.T) {
		h, clock, waits, _ := setup(t, unknown)
		q := newManagerQueue(t)
		h.Update(ctx, event.UpdateEvent{ObjectOld: ready, ObjectNew: unknown}, q)
		if q.Len() != 0 {
			t.Fatalf("a node not Ready for a moment woke %d jobs", q.Len())
		}
		if len(*waits) != 1 || (*waits)[0].after != timeout {
			t.Fatalf("waits %v, want one of the timeout", len(*waits))
		}
		runWaits(clock, waits)
		if q.Len() != 2 {
			t.Errorf("a node lost at the timeout woke %d jobs, want 2", q.Len())
		}
	})

	t.Run("not Ready, then Ready before the timeout: no job woken", func(t *testing.T) {
		back := node("n", corev1.ConditionTrue, start.Add(20*time.Second))
		h, clock, waits, _ := setup(t, back) // the cache when the wait ends
		q := newManagerQueue(t)
		h.Update(ctx, event.UpdateEvent{ObjectOld: ready, ObjectNew: unknown}, q)
		// Late heartbeats again and again: still one wait.
		h.Update(ctx, event.UpdateEvent{ObjectOld: ready, ObjectNew: unknown}, q)
		*clock = clock.Add(20 * time.Second)
		h.Update(ctx, event.UpdateEvent{ObjectOld: unknown, ObjectNew: back}, q)
		if len(*waits) != 1 {
			t.Errorf("%d waits for one node, want 1", len(*waits))
		}
		runWaits(clock, waits)
		if q.Len() != 0 {
			t.Errorf("a node Ready again within the timeout woke %d jobs", q.Len())
		}
	})

	t.Run("not Ready since a later moment when the wait ends: it waits again", func(t *testing.T) {
		later := node("n", corev1.ConditionFalse, start.Add(30*time.Second))
		h, clock, waits, _ := setup(t, later)
		q := newManagerQueue(t)
		h.Update(ctx, event.UpdateEvent{ObjectOld: ready, ObjectNew: unknown}, q)
		*clock = start.Add(timeout)
		(*waits)[0].run() // the node is not Ready since 30 s after the wait began
		if q.Len() != 0 || len(*waits) != 2 || (*waits)[1].after != 30*time.Second {
			t.Fatalf("queued %d, waits %d", q.Len(), len(*waits))
		}
		*clock = start.Add(timeout + 30*time.Second)
		(*waits)[1].run()
		if q.Len() != 2 {
			t.Errorf("woke %d jobs, want 2", q.Len())
		}
	})

	lost := node("n", corev1.ConditionUnknown, start.Add(-2*timeout))
	outOfService := ready.DeepCopy()
	outOfService.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeOutOfService, Effect: corev1.TaintEffectNoExecute}}
	for name, e := range map[string]event.UpdateEvent{
		"Ready again after being lost": {ObjectOld: lost, ObjectNew: node("n", corev1.ConditionTrue, start)},
		"lost, seen late":              {ObjectOld: ready, ObjectNew: lost},
		"marked out of service":        {ObjectOld: ready, ObjectNew: outOfService},
		"unmarked":                     {ObjectOld: outOfService, ObjectNew: ready},
	} {
		t.Run(name+": at once", func(t *testing.T) {
			h, _, waits, _ := setup(t, e.ObjectNew.(*corev1.Node))
			q := newManagerQueue(t)
			h.Update(ctx, e, q)
			if q.Len() != 2 || len(*waits) != 0 {
				t.Errorf("queued %d, waits %d; want 2 and none", q.Len(), len(*waits))
			}
		})
	}
	t.Run("deleted: at once", func(t *testing.T) {
		h, _, _, _ := setup(t, ready)
		q := newManagerQueue(t)
		h.Delete(ctx, event.DeleteEvent{Object: ready}, q)
		if q.Len() != 2 {
			t.Errorf("queued %d, want 2", q.Len())
		}
	})
}
