package engine

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// goneWorkers remembers why each worker pod that the watch saw deleted was lost, by job UID and
// pod UID: the last state the API server sent with the deletion (a drain's eviction leaves the
// DisruptionTarget condition on it). A pass that comes after the pod is gone (its StatefulSet
// may have replaced it already) then tells an evicted worker, which restarts the job without
// counting toward maxRestarts, from one deleted by hand, which counts. Memory only: after an
// operator restart a gone pod is Deleted, as before (docs/failure-handling.md).
type goneWorkers struct {
	mu   sync.Mutex
	jobs map[types.UID]map[types.UID]goneWorker
}

type goneWorker struct {
	reason troupev1.FailureReason
	at     time.Time
}

// goneWorkerTTL is how long a gone worker's reason is kept: far longer than a pass takes to
// see it gone, short enough that the map stays small.
const goneWorkerTTL = 15 * time.Minute

func newGoneWorkers() *goneWorkers {
	return &goneWorkers{jobs: map[types.UID]map[types.UID]goneWorker{}}
}

// record keeps why worker pod p went, if it is a worker of a troupe job.
func (g *goneWorkers) record(p *corev1.Pod, now time.Time) {
	job := types.UID(p.Labels[troupev1.LabelJobUID])
	if job == "" || p.Labels[troupev1.LabelRole] != troupev1.RoleWorker {
		return
	}
	reason := podFailure("", p).Reason // as a pass would read the pod
	g.mu.Lock()
	defer g.mu.Unlock()
	for j, pods := range g.jobs {
		for uid, w := range pods {
			if now.Sub(w.at) > goneWorkerTTL {
				delete(pods, uid)
			}
		}
		if len(pods) == 0 {
			delete(g.jobs, j)
		}
	}
	if g.jobs[job] == nil {
		g.jobs[job] = map[types.UID]goneWorker{}
	}
	g.jobs[job][p.UID] = goneWorker{reason: reason, at: now}
}

// of is why the job's worker pods that went were lost, by pod UID.
func (g *goneWorkers) of(job types.UID) map[types.UID]troupev1.FailureReason {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[types.UID]troupev1.FailureReason, len(g.jobs[job]))
	for uid, w := range g.jobs[job] {
		out[uid] = w.reason
	}
	return out
}

// recordingDeletes is a pod event handler that records each deleted pod in gone before next
// handles the event.
type recordingDeletes struct {
	handler.EventHandler
	gone *goneWorkers
	now  func() time.Time
}

func (h recordingDeletes) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if p, ok := e.Object.(*corev1.Pod); ok {
		h.gone.record(p, h.now())
	}
	h.EventHandler.Delete(ctx, e, q)
}
