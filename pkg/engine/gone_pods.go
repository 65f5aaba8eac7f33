package engine

import (
	"context"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// recordingDeletes is a pod event handler that records each deleted pod in gone before next
// handles the event. The watch's filter (podChanged) hands it only the pods of its kind's jobs:
// every kind's controller sees the deletion of every troupe pod, and the other kinds' are not
// its to remember.
type recordingDeletes struct {
	handler.EventHandler
	gone *goneWorkers
	now  func() time.Time
}

func (h recordingDeletes) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if p, ok := asPod(e.Object); ok {
		h.gone.record(p, h.now())
	}
	h.EventHandler.Delete(ctx, e, q)
}
