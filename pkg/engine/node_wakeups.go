package engine

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
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
	return handler.EnqueueRequestsFromMapFunc(r.jobsOnNode)
}
