package engine

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// reasonFailedCreate is the event reason of the Job and StatefulSet controllers for a pod the
// API server refused.
const reasonFailedCreate = "FailedCreate"

// failedCreateSnapshotAge is how long one LIST of a namespace's FailedCreate events answers
// every job of the namespace that looks its refusals up.
const failedCreateSnapshotAge = 5 * time.Second

// failedCreateEvents shares the LISTs of FailedCreate events among a namespace's jobs. The API
// server keeps no watch cache of events, so each LIST reads every event of the namespace from
// etcd; on a busy cluster, where many new jobs lack their pods for a few seconds at once, a LIST
// per job made the API server's work grow with the jobs times the namespace's events (at 200 jobs
// in one namespace, 68 LISTs took 17% of kube-apiserver's CPU: docs/performance.md). One LIST a
// namespace per failedCreateSnapshotAge answers all of them.
type failedCreateEvents struct {
	mu         sync.Mutex
	namespaces map[string]*failedCreateSnapshot
}

// failedCreateSnapshot is, per involved object, the message of its newest FailedCreate event,
// as one LIST found them (nil before the first); a lookup in flight holds its lock, and the
// namespace's other jobs wait for its answer instead of sending LISTs of their own.
type failedCreateSnapshot struct {
	mu     sync.Mutex
	at     time.Time
	newest map[types.UID]string
}

func newFailedCreateEvents() *failedCreateEvents {
	return &failedCreateEvents{namespaces: map[string]*failedCreateSnapshot{}}
}

// newestByObject returns, per involved object of ns, the message of its newest FailedCreate
// event, from a LIST made no longer than failedCreateSnapshotAge before now.
func (f *failedCreateEvents) newestByObject(ctx context.Context, reader client.Reader, ns string, now time.Time) (map[types.UID]string, error) {
	f.mu.Lock()
	snap, ok := f.namespaces[ns]
	if !ok {
		snap = &failedCreateSnapshot{}
		f.namespaces[ns] = snap
	}
	f.mu.Unlock()

	snap.mu.Lock()
	defer snap.mu.Unlock()
	if snap.newest != nil && now.Sub(snap.at) < failedCreateSnapshotAge {
		return snap.newest, nil
	}
	var events corev1.EventList
	if err := reader.List(ctx, &events, client.InNamespace(ns), client.MatchingFields{"reason": reasonFailedCreate}); err != nil {
		return nil, fmt.Errorf("list FailedCreate events of namespace %s: %w", ns, err)
	}
	byObject := map[types.UID][]corev1.Event{}
	for _, e := range events.Items {
		byObject[e.InvolvedObject.UID] = append(byObject[e.InvolvedObject.UID], e)
	}
	snap.newest = make(map[types.UID]string, len(byObject))
	for uid, es := range byObject {
		snap.newest[uid] = strings.TrimSpace(newestEvent(es).Message)
	}
	snap.at = now
	return snap.newest, nil
}

// forgetIdle drops the snapshots older than failedCreateSnapshotAge, so that the messages of a
// namespace whose jobs stopped looking are not held.
func (f *failedCreateEvents) forgetIdle(now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for ns, snap := range f.namespaces {
		if snap.mu.TryLock() {
			if now.Sub(snap.at) >= failedCreateSnapshotAge {
				delete(f.namespaces, ns)
			}
			snap.mu.Unlock()
		}
	}
}

// newestEvent is the event seen last (events are deduplicated: lastTimestamp moves, or the
// series' time for events.k8s.io writers).
func newestEvent(events []corev1.Event) *corev1.Event {
	var newest *corev1.Event
	var newestAt time.Time
	for i := range events {
		e := &events[i]
		at := e.LastTimestamp.Time
		if e.Series != nil && e.Series.LastObservedTime.After(at) {
			at = e.Series.LastObservedTime.Time
		}
		if e.EventTime.After(at) {
			at = e.EventTime.Time
		}
		if newest == nil || at.After(newestAt) {
			newest, newestAt = e, at
		}
	}
	return newest
}
