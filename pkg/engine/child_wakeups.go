package engine

import (
	"context"
	"reflect"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// childWakeups queues a pass of a StatefulSet's or Job's owning job, as the owner handler it
// embeds does, but wakes it podProgressDelay later when the child's controller only counted
// its pods' progress: the StatefulSet controller rewrites a set's status as each pod is created,
// starts and becomes ready, the Job controller a Job's active and ready counts, each step a
// moment after the pod's own event, which podWakeups gathers already (a master Job's count of
// its pod's end too: jobProgressOnly). Everything else wakes the job at once: a create or
// delete, a change of the child's spec, labels, owners or deletion, a Job's conditions (its
// verdict: the status lag waits on it; ahead of the rest, endPriority) or failed count, a worker
// Job's terminal counts, a set's controller having seen a new spec or counting fewer pods
// (restarts wait on both: statefulSetsAtAttempt).
type childWakeups struct {
	handler.EventHandler // the owner handler: creates, deletes and every other update
	delay                time.Duration
}

func (h childWakeups) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	switch {
	case childProgressOnly(e.ObjectOld, e.ObjectNew):
		q = delayedAdds{TypedRateLimitingInterface: q, delay: h.delay}
	case jobGotVerdict(e.ObjectOld, e.ObjectNew):
		q = withEndPriority(q)
	}
	h.EventHandler.Update(ctx, e, q)
}

// jobGotVerdict: the Job controller gave the Job Complete or Failed between the two versions
// (a master's failure is its Job's Failed: masterVerdict).
func jobGotVerdict(older, newer client.Object) bool {
	o, ok := older.(*batchv1.Job)
	n, ok2 := newer.(*batchv1.Job)
	return ok && ok2 && terminalJobCondition(n) != nil && terminalJobCondition(o) == nil
}

// delayedAdds is a queue whose Add waits delay: the owner handler adds at once.
type delayedAdds struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	delay time.Duration
}

func (q delayedAdds) Add(req reconcile.Request) { q.AddAfter(req, q.delay) }

// childProgressOnly: between the two versions only the status moved, and only by counts of
// pods that came or progressed (see childWakeups).
func childProgressOnly(older, newer client.Object) bool {
	if !sameChildMeta(older, newer) {
		return false
	}
	switch n := newer.(type) {
	case *appsv1.StatefulSet:
		o, ok := older.(*appsv1.StatefulSet)
		return ok && statefulSetProgressOnly(o, n)
	case *batchv1.Job:
		o, ok := older.(*batchv1.Job)
		return ok && jobProgressOnly(o, n)
	}
	return false
}

// sameChildMeta: the child's spec (generation), labels, annotations, owners and deletion are
// as they were.
func sameChildMeta(older, newer client.Object) bool {
	return older.GetGeneration() == newer.GetGeneration() &&
		older.GetDeletionTimestamp().Equal(newer.GetDeletionTimestamp()) &&
		reflect.DeepEqual(older.GetLabels(), newer.GetLabels()) &&
		reflect.DeepEqual(older.GetAnnotations(), newer.GetAnnotations()) &&
		reflect.DeepEqual(older.GetOwnerReferences(), newer.GetOwnerReferences())
}

func statefulSetProgressOnly(o, n *appsv1.StatefulSet) bool {
	return n.Status.ObservedGeneration == o.Status.ObservedGeneration &&
		n.Status.Replicas >= o.Status.Replicas &&
		equality.Semantic.DeepEqual(n.Status.Conditions, o.Status.Conditions)
}

// jobProgressOnly: a Job's counts moved on and nothing else did. A master Job's pod that ended
// or went has woken its job at once already (podWakeups), and the master's success is read off
// that pod (masterVerdict), so the master Job counting it a moment later is progress too: at
// 200 jobs its two writes after its pod's end (the pod counted, then its verdict) each woke a
// pass, on a job whose status said it had ended (docs/performance.md). A worker Job counting a
// pod gone or succeeded still wakes at once: a restart waits on worker Jobs with no active pod
// (statefulSetsAtAttempt).
func jobProgressOnly(o, n *batchv1.Job) bool {
	if n.Status.Failed != o.Status.Failed || !equality.Semantic.DeepEqual(n.Status.Conditions, o.Status.Conditions) ||
		!n.Status.CompletionTime.Equal(o.Status.CompletionTime) {
		return false
	}
	if !isWorkerJob(n) { // the master Job
		return true
	}
	return n.Status.Active >= o.Status.Active && n.Status.Succeeded == o.Status.Succeeded
}
