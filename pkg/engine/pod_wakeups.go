package engine

import (
	"context"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// podProgressDelay is how long a pod's progress, or a child's count of it, waits before it wakes
// the job (podWakeups, childWakeups). The pods of a job are created and start within moments
// of each other, each in several steps (created, bound, started, ready) that the StatefulSet and
// Job controllers count again in their status; a second gathers most of them into one pass
// (docs/performance.md: 15-22% fewer passes at 200 jobs x 9 pods, a third at 50, than with
// only a pod's progress delayed).
const podProgressDelay = time.Second

// podWakeups queues a pass of a pod's job, named by the kind's name label on the pod (the pass
// then selects the job's pods by its UID). A pod that ended (Succeeded, Failed), is being
// deleted or is gone wakes its job at once: a job's verdict, restarts and status lag wait on
// these; one that reached Succeeded or Failed, ahead of the rest (endPriority). A pod created,
// or one that only moved on within its life (scheduled, started, ready, a container
// restarted), wakes it after podProgressDelay, and every such wake-up of the job within that
// time is the same one (the queue keeps one entry per job). A pod relabelled away
// from a job wakes that job at once, as handler.EnqueueRequestsFromMapFunc (used before) woke
// both.
type podWakeups struct {
	nameLabel string
	delay     time.Duration
}

func (h podWakeups) job(pod client.Object) (reconcile.Request, bool) {
	name, ok := pod.GetLabels()[h.nameLabel]
	return reconcile.Request{NamespacedName: client.ObjectKey{Namespace: pod.GetNamespace(), Name: name}}, ok
}

func (h podWakeups) now(pod client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if req, ok := h.job(pod); ok {
		q.Add(req)
	}
}

// Create: a new pod is progress (its set or Job, which the job's own pass created, made it). One
// that has ended already (first seen after a gap in the watch) wakes the job at once, ahead of
// progress (endPriority) unless the watch is listing what it has.
func (h podWakeups) Create(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if phase, ok := phaseOf(e.Object); ok && terminalPhase(phase) && !e.IsInInitialList {
		q = withEndPriority(q)
	}
	h.wake(e.Object, q)
}

func (h podWakeups) Update(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	// A pod relabelled away from a job leaves it: that job learns at once.
	if older, ok := h.job(e.ObjectOld); ok {
		if job, named := h.job(e.ObjectNew); !named || older != job {
			q.Add(older)
		}
	}
	if newlyTerminal(e.ObjectOld, e.ObjectNew) {
		q = withEndPriority(q)
	}
	h.wake(e.ObjectNew, q)
}

// newlyTerminal: the pod reached Succeeded or Failed between the two versions.
func newlyTerminal(older, newer client.Object) bool {
	o, ok := phaseOf(older)
	n, ok2 := phaseOf(newer)
	return ok && ok2 && terminalPhase(n) && !terminalPhase(o)
}

// wake queues the pod's job: at once when the pod has ended, after the delay otherwise.
func (h podWakeups) wake(obj client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	job, named := h.job(obj)
	if !named {
		return
	}
	// Not ended (podEnded), read off the watch's object without expanding it.
	if phase, ok := phaseOf(obj); ok && obj.GetDeletionTimestamp().IsZero() && !terminalPhase(phase) {
		q.AddAfter(job, h.delay)
		return
	}
	q.Add(job)
}

func (h podWakeups) Delete(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.now(e.Object, q)
}

func (h podWakeups) Generic(_ context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.now(e.Object, q)
}
