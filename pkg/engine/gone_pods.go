package engine

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// recordingDeletes is a pod event handler that records each deleted pod of its kind's jobs (a
// pod carrying nameLabel) in gone before next handles the event. Every kind's controller sees
// the deletion of every troupe pod; the other kinds' pods are not its to remember.
type recordingDeletes struct {
	handler.EventHandler
	nameLabel string
	gone      *goneWorkers
	now       func() time.Time
}

func (h recordingDeletes) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if p, ok := e.Object.(*corev1.Pod); ok && hasLabel(p, h.nameLabel) {
		h.gone.record(p, h.now())
	}
	h.EventHandler.Delete(ctx, e, q)
}
