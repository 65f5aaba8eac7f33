package engine

import (
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// endPriority is the work-queue priority of a pass woken by an end that may carry its job's
// verdict: a pod that reached Succeeded or Failed, a Job that the Job controller gave Complete
// or Failed. The manager's queue (controller-runtime's priority queue) otherwise hands out jobs
// in the order they became due, so when many jobs end together each end waited behind the
// passes that pods' progress and the cleanup of jobs ended before it had queued: status lag p99
// 15.3 s at 1,000 jobs whose launchers ended 11 a second (docs/performance.md). Ends are one or
// two a pod, so nothing waits long behind them. Events of the watch's initial list keep the
// priority they have (an operator's restart is not a burst of news).
const endPriority = 10

// withEndPriority is q adding at endPriority, or q itself when it is not a priority queue.
func withEndPriority(q workqueue.TypedRateLimitingInterface[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request])
	if !ok {
		return q
	}
	return raisedPriority{PriorityQueue: pq, priority: endPriority}
}

// raisedPriority is a priority queue whose adds that name no priority get priority. It is a
// priority queue itself, so that controller-runtime's handlers wrapped around it (the owner
// handler) add through AddWithOpts and keep it.
type raisedPriority struct {
	priorityqueue.PriorityQueue[reconcile.Request]
	priority int
}

func (q raisedPriority) Add(req reconcile.Request) {
	q.AddWithOpts(priorityqueue.AddOpts{}, req)
}

func (q raisedPriority) AddAfter(req reconcile.Request, after time.Duration) {
	q.AddWithOpts(priorityqueue.AddOpts{After: after}, req)
}

func (q raisedPriority) AddRateLimited(req reconcile.Request) {
	q.AddWithOpts(priorityqueue.AddOpts{RateLimited: true}, req)
}

func (q raisedPriority) AddWithOpts(o priorityqueue.AddOpts, reqs ...reconcile.Request) {
	if o.Priority == nil {
		o.Priority = &q.priority
	}
	q.PriorityQueue.AddWithOpts(o, reqs...)
}
