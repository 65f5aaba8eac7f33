package engine

import (
	"context"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Node events wake the jobs with pods on the node when what makes a node lost changed
// (lost_nodes.go); the pass then reads the node from the cache.

// nodeHealthChanged passes the node events that may make a node lost or not: its Ready
// condition or its out-of-service taint changed, or it was deleted. A heartbeat is none.
var nodeHealthChanged = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return true },
	UpdateFunc: func(e event.UpdateEvent) bool {
		a, okA := e.ObjectOld.(*corev1.Node)
		b, okB := e.ObjectNew.(*corev1.Node)
		if !okA || !okB {
			return true
		}
		ra, rb := readyCondition(a), readyCondition(b)
		if (ra == nil) != (rb == nil) || (ra != nil && (ra.Status != rb.Status || !ra.LastTransitionTime.Equal(&rb.LastTransitionTime))) {
			return true
		}
		return outOfService(a) != outOfService(b)
	},
}

// jobsOnNode wakes the jobs of the reconciler's kind that have pods on a node whose health
// changed.
func (r *Reconciler) jobsOnNode(ctx context.Context, node client.Object) []reconcile.Request {
	var pods corev1.PodList
	if err := r.client.List(ctx, &pods, client.MatchingFields{nodeNameField: node.GetName()}); err != nil {
		return nil
	}
	wake := podWakeups{nameLabel: r.adapter.NameLabel()}
	var out []reconcile.Request
	for i := range pods.Items {
		if req, ok := wake.job(&pods.Items[i]); ok && !slices.Contains(out, req) {
			out = append(out, req)
		}
	}
	return out
}

// nodeWatch is the handler of node events.
func (r *Reconciler) nodeWatch() handler.EventHandler {
	return nodeWakeups{nodes: r.client, jobsOn: r.jobsOnNode, policy: r.lostNodes, now: r.clock.Now,
		after: func(d time.Duration, f func()) { time.AfterFunc(d, f) }, waiting: &sync.Map{}}
}

// nodeWakeups wakes the jobs with pods on a node when the node's loss (nodeLoss) changed, at
// the moment it does: a node that stops being Ready wakes them once it has been so for the
// lost-node timeout, and not at all when it is Ready again before (a node's heartbeats late
// for a while on a loaded cluster: every job with a pod on it would get two or three passes
// that change nothing); a node lost and then Ready again, deleted, or marked or unmarked out of
// service wakes them at once. A job's pass that reads a node not Ready asks for its own pass at
// the timeout too (NodeRecheck): the jobs of a node not Ready when the operator started.
type nodeWakeups struct {
	nodes  client.Reader // the cache: the node read again when its wait ends
	jobsOn func(context.Context, client.Object) []reconcile.Request
	policy LostNodePolicy
	now    func() time.Time
	after  func(time.Duration, func()) // time.AfterFunc
	// waiting holds the names of the nodes with a wait running: one a node, however often it
	// goes not Ready.
	waiting *sync.Map
}

// Create does nothing: a node the watch lists at its start is read by each job's first pass.
func (h nodeWakeups) Create(context.Context, event.CreateEvent, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
}

func (h nodeWakeups) Generic(context.Context, event.GenericEvent, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
}

func (h nodeWakeups) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.wake(ctx, e.Object, q)
}

func (h nodeWakeups) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	older, okOld := e.ObjectOld.(*corev1.Node)
	newer, okNew := e.ObjectNew.(*corev1.Node)
	if !okOld || !okNew || outOfService(older) != outOfService(newer) {
		h.wake(ctx, e.ObjectNew, q)
		return
	}
	now := h.now()
	_, wasLost, _ := nodeLoss(older, h.policy, now)
	_, isLost, left := nodeLoss(newer, h.policy, now)
	switch {
	case wasLost != isLost:
		h.wake(ctx, newer, q)
	case left > 0:
		h.wakeOnceLost(ctx, newer.Name, left, q)
	}
}

// wakeOnceLost reads the node again after wait and wakes its jobs if it is lost by then; if it is
// still on its way to being lost (not Ready since a later moment), it waits again. A wait that
// runs already for the node does this for it.
func (h nodeWakeups) wakeOnceLost(ctx context.Context, name string, wait time.Duration, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if _, running := h.waiting.LoadOrStore(name, true); running {
		return
	}
	h.after(wait, func() {
		h.waiting.Delete(name)
		var node corev1.Node
		if err := h.nodes.Get(ctx, client.ObjectKey{Name: name}, &node); err != nil {
			return // gone: its Delete woke the jobs
		}
		switch _, lost, left := nodeLoss(&node, h.policy, h.now()); {
		case lost:
			h.wake(ctx, &node, q)
		case left > 0:
			h.wakeOnceLost(ctx, name, left, q)
		}
	})
}

func (h nodeWakeups) wake(ctx context.Context, node client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	for _, req := range h.jobsOn(ctx, node) {
		q.Add(req)
	}
}
