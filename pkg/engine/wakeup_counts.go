package engine

import (
	"context"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/troupe-dev/troupe/pkg/metrics"
)

// Every watch of a reconciler counts the passes it asks for by the kind of object it watches
// (troupe_wakeups_total): what keeps the operator busy is read off its metrics endpoint, not
// guessed (docs/performance.md).

// ProgressReportSource is the source of the passes a job's progress report asks for.
const ProgressReportSource = "ProgressReport"

// countedWakeups is a watch's handler whose every add to the work queue is counted under
// source. The handlers it wraps may wrap the queue again (childWakeups' delay, the end
// priority): each add still reaches the counting queue once.
type countedWakeups struct {
	handler.EventHandler
	kind, source string
}

func (h countedWakeups) Create(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.EventHandler.Create(ctx, e, h.counting(q))
}

func (h countedWakeups) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.EventHandler.Update(ctx, e, h.counting(q))
}

func (h countedWakeups) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.EventHandler.Delete(ctx, e, h.counting(q))
}

func (h countedWakeups) Generic(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.EventHandler.Generic(ctx, e, h.counting(q))
}

// counting is q counting its adds. A priority queue stays one, so that controller-runtime's
// handlers still add through AddWithOpts (an initial list's events at low priority) and
// withEndPriority still finds it.
func (h countedWakeups) counting(q workqueue.TypedRateLimitingInterface[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	count := func(req reconcile.Request) { metrics.Wakeup(h.kind, req.Namespace, h.source) }
	if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
		return countingPriorityQueue{PriorityQueue: pq, count: count}
	}
	return countingQueue{TypedRateLimitingInterface: q, count: count}
}

type countingQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	count func(reconcile.Request)
}

func (q countingQueue) Add(req reconcile.Request) {
	q.count(req)
	q.TypedRateLimitingInterface.Add(req)
}

func (q countingQueue) AddAfter(req reconcile.Request, after time.Duration) {
	q.count(req)
	q.TypedRateLimitingInterface.AddAfter(req, after)
}

func (q countingQueue) AddRateLimited(req reconcile.Request) {
	q.count(req)
	q.TypedRateLimitingInterface.AddRateLimited(req)
}

type countingPriorityQueue struct {
	priorityqueue.PriorityQueue[reconcile.Request]
	count func(reconcile.Request)
}

func (q countingPriorityQueue) Add(req reconcile.Request) {
	q.count(req)
	q.PriorityQueue.Add(req)
}

func (q countingPriorityQueue) AddAfter(req reconcile.Request, after time.Duration) {
	q.count(req)
	q.PriorityQueue.AddAfter(req, after)
}

func (q countingPriorityQueue) AddRateLimited(req reconcile.Request) {
	q.count(req)
	q.PriorityQueue.AddRateLimited(req)
}

func (q countingPriorityQueue) AddWithOpts(o priorityqueue.AddOpts, reqs ...reconcile.Request) {
	for _, req := range reqs {
		q.count(req)
	}
	q.PriorityQueue.AddWithOpts(o, reqs...)
}

// countedJobEvents counts the events of the job watch (For) that reach its handler, which adds
// the job once for each: the builder gives For no handler of ours to wrap. It is the last of
// the watch's predicates and lets every event through.
func countedJobEvents(kind string) predicate.Predicate {
	count := func(namespace string) bool { metrics.Wakeup(kind, namespace, kind); return true }
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return count(e.Object.GetNamespace()) },
		UpdateFunc:  func(e event.UpdateEvent) bool { return count(e.ObjectNew.GetNamespace()) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return count(e.Object.GetNamespace()) },
		GenericFunc: func(e event.GenericEvent) bool { return count(e.Object.GetNamespace()) },
	}
}
