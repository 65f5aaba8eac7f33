package engine

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// recordingQueue records how long after now each request was queued for (0: at once).
type recordingQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	added map[reconcile.Request]time.Duration
}

func (q *recordingQueue) Add(r reconcile.Request)                       { q.added[r] = 0 }
func (q *recordingQueue) AddAfter(r reconcile.Request, d time.Duration) { q.added[r] = d }

// A job's pods' progress is read in one pass a moment later; what ends, loses or restarts a pod
// is read at once, so a job's final status and its restarts never wait for the batch.
func TestPodEventsBatchOnlyProgress(t *testing.T) {
	const nameLabel = "mpijob.troupe.dev/name"
	job := reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "ml", Name: "train"}}
	pod := func(phase corev1.PodPhase, change func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "train-worker-0", Namespace: "ml", Labels: map[string]string{nameLabel: "train"}},
			Status:     corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{Name: "main"}}},
		}
		if change != nil {
			change(p)
		}
		return p
	}
	updates := map[string]struct {
		older, newer *corev1.Pod
		want         time.Duration
	}{
		"started": {pod(corev1.PodPending, nil), pod(corev1.PodRunning, nil), podBatchPeriod},
		"ready": {pod(corev1.PodRunning, nil), pod(corev1.PodRunning, func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		}), podBatchPeriod},
		"bound to a node": {pod(corev1.PodPending, nil), pod(corev1.PodPending, func(p *corev1.Pod) { p.Spec.NodeName = "n1" }), podBatchPeriod},
		"succeeded":       {pod(corev1.PodRunning, nil), pod(corev1.PodSucceeded, nil), 0},
		"failed":          {pod(corev1.PodRunning, nil), pod(corev1.PodFailed, nil), 0},
		"disrupted": {pod(corev1.PodRunning, nil), pod(corev1.PodRunning, func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "PreemptionByScheduler"}}
		}), 0},
		"being deleted": {pod(corev1.PodRunning, nil), pod(corev1.PodRunning, func(p *corev1.Pod) { now := metav1.Now(); p.DeletionTimestamp = &now }), 0},
		"a container restarted": {pod(corev1.PodRunning, nil), pod(corev1.PodRunning, func(p *corev1.Pod) {
			p.Status.ContainerStatuses[0].RestartCount = 1
		}), 0},
	}
	h := podEvents(nameLabel)
	for name, tc := range updates {
		q := &recordingQueue{added: map[reconcile.Request]time.Duration{}}
		h.Update(context.Background(), event.UpdateEvent{ObjectOld: tc.older, ObjectNew: tc.newer}, q)
		if got, ok := q.added[job]; !ok || got != tc.want {
			t.Errorf("%s: job queued %t after %v, want after %v", name, ok, got, tc.want)
		}
	}

	q := &recordingQueue{added: map[reconcile.Request]time.Duration{}}
	h.Create(context.Background(), event.CreateEvent{Object: pod(corev1.PodPending, nil)}, q)
	if got, ok := q.added[job]; !ok || got != podBatchPeriod {
		t.Errorf("created: job queued %t after %v, want after %v", ok, got, podBatchPeriod)
	}
	q = &recordingQueue{added: map[reconcile.Request]time.Duration{}}
	h.Delete(context.Background(), event.DeleteEvent{Object: pod(corev1.PodRunning, nil)}, q)
	if got, ok := q.added[job]; !ok || got != 0 {
		t.Errorf("deleted: job queued %t after %v, want at once", ok, got)
	}
	q = &recordingQueue{added: map[reconcile.Request]time.Duration{}}
	h.Update(context.Background(), event.UpdateEvent{ObjectOld: pod(corev1.PodRunning, nil),
		ObjectNew: pod(corev1.PodSucceeded, func(p *corev1.Pod) { p.Labels = nil })}, q)
	if len(q.added) != 0 {
		t.Errorf("a pod without the kind's name label queued %v", q.added)
	}
}
