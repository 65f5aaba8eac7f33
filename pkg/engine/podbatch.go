package engine

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// podBatchPeriod is how long a pod's progress (created, scheduled, started, ready) waits before
// it queues its job's pass. A job's pods move one after the other within a moment (nine pods of
// an MPI job are created, bound and started within a second or two), and each change queued a
// pass of its own: the passes wrote the job's status as it moved (Running with the launcher
// started, then WorkersReady a moment later) where one pass a second later writes it once.
// kube-controller-manager's Job controller batches its pods' updates for one second the same
// way. What a user or the engine acts on is not batched (podNeedsPassNow).
const podBatchPeriod = time.Second

// podEvents maps a pod to its job (by the kind's name label; the pass then selects the job's
// pods by UID) and queues the job's pass: at once when the pod ended, is going away, was
// disrupted or restarted a container, or is gone; within podBatchPeriod for its progress. A
// pass already queued for sooner keeps its time (the queue keeps the earlier of two).
func podEvents(nameLabel string) handler.Funcs {
	jobOf := func(pod client.Object) (reconcile.Request, bool) {
		name, ok := pod.GetLabels()[nameLabel]
		return reconcile.Request{NamespacedName: client.ObjectKey{Namespace: pod.GetNamespace(), Name: name}}, ok
	}
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	now := func(pod client.Object, q queue) {
		if req, ok := jobOf(pod); ok {
			q.Add(req)
		}
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q queue) {
			if req, ok := jobOf(e.Object); ok {
				q.AddAfter(req, podBatchPeriod)
			}
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q queue) {
			req, ok := jobOf(e.ObjectNew)
			if !ok {
				return
			}
			if podNeedsPassNow(e.ObjectOld, e.ObjectNew) {
				q.Add(req)
				return
			}
			q.AddAfter(req, podBatchPeriod)
		},
		DeleteFunc:  func(_ context.Context, e event.DeleteEvent, q queue) { now(e.Object, q) },
		GenericFunc: func(_ context.Context, e event.GenericEvent, q queue) { now(e.Object, q) },
	}
}

// podNeedsPassNow: the update is one the job's status or the engine reacts to, not the pod's
// progress: the pod succeeded (a launcher's end is the job's), was lost (it failed, was marked
// as disrupted by an eviction or a preemption, or is being deleted: podLost), or a container of
// it restarted. Anything that is not a *corev1.Pod passes at once.
func podNeedsPassNow(older, newer client.Object) bool {
	o, okOld := older.(*corev1.Pod)
	n, okNew := newer.(*corev1.Pod)
	if !okOld || !okNew {
		return true
	}
	return n.Status.Phase == corev1.PodSucceeded || podLost(n) != "" || containerRestarts(n) != containerRestarts(o)
}

func containerRestarts(p *corev1.Pod) int32 {
	var n int32
	for _, cs := range p.Status.InitContainerStatuses {
		n += cs.RestartCount
	}
	for _, cs := range p.Status.ContainerStatuses {
		n += cs.RestartCount
	}
	return n
}
