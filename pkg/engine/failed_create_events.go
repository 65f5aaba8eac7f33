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
// as one LIST found them (nil before the first). One job of the namespace makes the LIST; the
// others do not wait for it (a LIST of events reads every event of the namespace from etcd, and
// on a loaded API server takes long enough to hold up the passes of every job that waited): they
// take the snapshot before it, or, when there is none yet, look again shortly.
type failedCreateSnapshot struct {
	mu      sync.Mutex
	at      time.Time
	newest  map[types.UID]string
	listing bool // a LIST of the namespace's events is in flight
}

// failedCreateListPending is how soon a job looks again when another job's LIST of its
// namespace's events was in flight and no earlier snapshot could answer.
const failedCreateListPending = time.Second

func newFailedCreateEvents() *failedCreateEvents {
	return &failedCreateEvents{namespaces: map[string]*failedCreateSnapshot{}}
}

// newestByObject returns, per involved object of ns, the message of its newest FailedCreate
// event, from a LIST made no longer than failedCreateSnapshotAge before now, or from the last
// one while another job's LIST is in flight. ok is false when there is no answer yet: the first
// LIST of the namespace is in flight.
func (f *failedCreateEvents) newestByObject(ctx context.Context, reader client.Reader, ns string, now time.Time) (newest map[types.UID]string, ok bool, err error) {
	f.mu.Lock()
	snap, found := f.namespaces[ns]
	if !found {
		snap = &failedCreateSnapshot{}
		f.namespaces[ns] = snap
	}
	f.mu.Unlock()

	snap.mu.Lock()
	if snap.listing || (snap.newest != nil && now.Sub(snap.at) < failedCreateSnapshotAge) {
		newest := snap.newest
		snap.mu.Unlock()
		return newest, newest != nil, nil
	}
	snap.listing = true
	snap.mu.Unlock()

	var events corev1.EventList
	err = reader.List(ctx, &events, client.InNamespace(ns), client.MatchingFields{"reason": reasonFailedCreate})
	snap.mu.Lock()
	defer snap.mu.Unlock()
	snap.listing = false
	if err != nil {
		return nil, false, fmt.Errorf("list FailedCreate events of namespace %s: %w", ns, err)
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
	return snap.newest, true, nil
}

// forgetIdle drops the snapshots older than failedCreateSnapshotAge, so that the messages of a
// namespace whose jobs stopped looking are not held.
func (f *failedCreateEvents) forgetIdle(now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for ns, snap := range f.namespaces {
		if snap.mu.TryLock() {
			if !snap.listing && now.Sub(snap.at) >= failedCreateSnapshotAge {
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
