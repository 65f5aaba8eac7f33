package engine

import (
	"maps"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// countsWriteDelay is how long a status change that moves only counts may wait before it is
// written. A job's pods change state one at a time (created, scheduled, running, ready, ended)
// and each change queues a pass; writing each count as it moves cost several status writes
// per job, each one a request under the operator's rate limit and a watch event for every
// client of the job. A change of phase or of a condition's status or reason is written at
// once, carrying whatever counts moved meanwhile; counts alone reach the API server within
// this delay of the first change seen (docs/performance.md).
const countsWriteDelay = 5 * time.Second

// countsOnly reports whether next differs from prev only in what counts the job's pods and
// replicas (replicaStatuses, pods, workers, workerReplicas, tasks, aggregate) and in the
// messages of conditions whose status and reason stay (the WorkersReady message counts ready
// workers). Anything else, including a field added to the status later, is not counts only.
func countsOnly(prev, next *troupev1.JobStatus) bool {
	return equality.Semantic.DeepEqual(withoutCounts(prev, next.Conditions), withoutCounts(next, prev.Conditions))
}

// withoutCounts is a copy of st without its count fields, and without the message of each
// condition that has the same type, status and reason in other.
func withoutCounts(st *troupev1.JobStatus, other []metav1.Condition) *troupev1.JobStatus {
	out := st.DeepCopy()
	out.ReplicaStatuses, out.Pods, out.Workers, out.WorkerReplicas = nil, troupev1.PodPhaseCounts{}, "", 0
	out.Tasks, out.Aggregate = nil, nil
	for i := range out.Conditions {
		c := &out.Conditions[i]
		if slices.ContainsFunc(other, func(o metav1.Condition) bool {
			return o.Type == c.Type && o.Status == c.Status && o.Reason == c.Reason
		}) {
			c.Message = ""
		}
	}
	return out
}

// deferredWrites remembers, per job, until when a counts-only status change may wait. It is
// the operator's memory only: after a restart the first such change is simply written. An
// entry lives from the first counts-only change to the pass that writes it (or finds nothing
// left to write, or the job gone), so the map holds at most the jobs with a change in flight.
type deferredWrites struct {
	// delay is how long a counts-only change may wait: countsWriteDelay, or 0 (written at
	// once) where a test reads every count as it moves.
	delay time.Duration
	mu    sync.Mutex
	due   map[types.NamespacedName]deferred
}

type deferred struct {
	uid types.UID // a job deleted and created again under its name starts afresh
	due time.Time
}

func newDeferredWrites(delay time.Duration) *deferredWrites {
	return &deferredWrites{delay: delay, due: map[types.NamespacedName]deferred{}}
}

// wait reports how much longer the job's counts-only change may wait: the first change seen
// waits the delay, later ones until the same moment. Zero means write now.
func (d *deferredWrites) wait(key types.NamespacedName, uid types.UID, now time.Time) time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.due[key]
	if !ok || e.uid != uid {
		e = deferred{uid: uid, due: now.Add(d.delay)}
		d.due[key] = e
	}
	if left := e.due.Sub(now); left > 0 {
		return left
	}
	return 0
}

// forget drops the job's deferred change: its status was written, holds nothing new, or the
// job is gone.
func (d *deferredWrites) forget(key types.NamespacedName) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.due, key)
}

// statusChanges names what differs between two statuses, for the log of a status write: each
// top-level field that changed, and for conditions the type of each one whose status or
// reason changed (a message alone is not named). It tells which transitions cost a write.
func statusChanges(prev, next *troupev1.JobStatus) []string {
	var out []string
	for _, c := range next.Conditions {
		was := meta.FindStatusCondition(prev.Conditions, c.Type)
		if was == nil || was.Status != c.Status || was.Reason != c.Reason {
			out = append(out, "condition "+c.Type+"="+string(c.Status)+"/"+c.Reason)
		}
	}
	a, errA := runtime.DefaultUnstructuredConverter.ToUnstructured(prev)
	b, errB := runtime.DefaultUnstructuredConverter.ToUnstructured(next)
	if errA != nil || errB != nil {
		return out
	}
	for _, k := range slices.Sorted(maps.Keys(b)) {
		if k != "conditions" && !equality.Semantic.DeepEqual(a[k], b[k]) {
			out = append(out, k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(a)) {
		if _, ok := b[k]; !ok {
			out = append(out, k+" (cleared)")
		}
	}
	return out
}
