package engine

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// The job's story in events. Each lifecycle event marks one transition between the status the
// job had (prev, as read at the start of the reconcile) and the status the reconcile computed
// (next), and is emitted only after next was written. A status write is conditional on the
// resourceVersion that prev was read with, so a transition is written, and told, exactly
// once: a pass that races a newer version writes nothing and emits nothing (the next pass
// starts from the newer status), and a pass that starts from a stale cached copy after a
// successful write fails its own write for the same reason. Events never come from "the
// state is X" on every pass, which would repeat them on every reconcile.
//
// Events that mark an action rather than a state (Created, TTLExpired, ScaledOutsideJob,
// SecretTampered) are emitted where the action is taken, once it succeeded.

// createdNoteLimit bounds the Created event's message: the events API refuses a note over
// 1 kB, and a job's children are named after it (up to 63 characters each, and the kinds).
const createdNoteLimit = 900

// recordCreated tells, in one event, which children a pass created (none: no event). A new
// job's children are all created in its first pass: one event instead of one per child, each
// of which was a request under the operator's client rate limit that slowed the creation of
// every other job's children (docs/performance.md). The message names them in creation order.
func (r *Reconciler) recordCreated(job Object, created []ChildRef) {
	if len(created) == 0 {
		return
	}
	r.recorder.Eventf(job, nil, corev1.EventTypeNormal, troupev1.EventCreated, "Create", "%s", createdNote(created))
}

// createdNote is "created Service a, ConfigMap b, ...", cut short ("and N more") where the
// next name would take it past createdNoteLimit.
func createdNote(created []ChildRef) string {
	note := "created " + created[0].String()
	for i := 1; i < len(created); i++ {
		next := note + ", " + created[i].String()
		room := createdNoteLimit
		if rest := len(created) - i - 1; rest > 0 {
			room -= len(fmt.Sprintf(" and %d more", rest))
		}
		if len(next) > room {
			return fmt.Sprintf("%s and %d more", note, len(created)-i)
		}
		note = next
	}
	return note
}

// lifecycleEvent is one event for a transition of the job.
type lifecycleEvent struct {
	Type    string
	Reason  string
	Action  string
	Message string
	// WorkerSet names the worker set a Scaled event is about; its StatefulSet is the event's
	// related object, so that two sets scaled at once are two events, not one series.
	WorkerSet string
}

// recordTransitions emits the events and counts the metrics of the transitions from prev to
// next, a status that has just been written.
func (r *Reconciler) recordTransitions(job Object, s *Spec, obs *Observed, prev, next *troupev1.JobStatus) {
	for _, e := range lifecycleEvents(s, prev, next) {
		var related runtime.Object
		if sts := obs.StatefulSets[e.WorkerSet]; e.WorkerSet != "" && sts != nil {
			related = sts
		}
		r.recorder.Eventf(job, related, e.Type, e.Reason, e.Action, "%s", e.Message)
	}
	r.countTransitions(job, s, obs, prev, next)
}

// lifecycleEvents returns the events of the transitions from prev to next, in the order a
// reader of the job's story expects them.
func lifecycleEvents(s *Spec, prev, next *troupev1.JobStatus) []lifecycleEvent {
	var out []lifecycleEvent
	add := func(typ, reason, action, format string, args ...any) {
		out = append(out, lifecycleEvent{Type: typ, Reason: reason, Action: action, Message: fmt.Sprintf(format, args...)})
	}
	normal := corev1.EventTypeNormal

	switch {
	case becameTrue(prev, next, troupev1.ConditionSuspended):
		add(normal, troupev1.EventSuspended, "Suspend", "%s: the master Job %s is suspended and the worker sets are scaled to zero",
			conditionMessage(next, troupev1.ConditionSuspended), s.Master.JobName)
	case isTrue(prev, troupev1.ConditionSuspended) && !isTrue(next, troupev1.ConditionSuspended) && !Finished(next, nil):
		add(normal, troupev1.EventResumed, "Resume", "runPolicy.suspend was cleared: the job's pods start again")
	}
	switch {
	case prev.Phase != troupev1.JobPaused && next.Phase == troupev1.JobPaused:
		add(normal, troupev1.EventPaused, "Pause",
			"runMode.pause.enabled is set: the master Job %s is deleted and the worker sets are scaled to zero", s.Master.JobName)
	case prev.Phase == troupev1.JobPaused && next.Phase != troupev1.JobPaused:
		add(normal, troupev1.EventResuming, "Resume", "runMode.pause.enabled was cleared: bringing the replicas back")
	}
	for _, sc := range scaledSets(prev, next) {
		add(normal, troupev1.EventScaled, "Scale", troupev1.EventScaledMessage, sc.set, sc.from, sc.to)
		out[len(out)-1].WorkerSet = sc.set
	}
	if becameTrue(prev, next, troupev1.ConditionGangScheduled) {
		add(normal, troupev1.EventGangScheduled, "Schedule", "%s", conditionMessage(next, troupev1.ConditionGangScheduled))
	}
	out = append(out, launcherWaitEvents(prev, next)...)
	if becameTrue(prev, next, troupev1.ConditionWorkersReady) &&
		meta.FindStatusCondition(next.Conditions, troupev1.ConditionWorkersReady).Reason == troupev1.ReasonWorkersReady {
		add(normal, troupev1.EventWorkersReady, "Start", "all %d worker pods are ready", s.TotalWorkers())
	}
	if prev.Phase != troupev1.JobRunning && next.Phase == troupev1.JobRunning {
		add(normal, troupev1.EventRunning, "Start", "the master Job %s is running", s.Master.JobName)
	}
	if next.Phase != prev.Phase {
		switch next.Phase {
		case troupev1.JobSucceeded:
			add(normal, troupev1.EventSucceeded, "Finish", "the master completed successfully")
		case troupev1.JobFailed:
			msg := "the master failed"
			if c := meta.FindStatusCondition(next.Conditions, troupev1.ConditionFailed); c != nil {
				msg = c.Message
			}
			add(corev1.EventTypeWarning, troupev1.EventFailed, "Finish", "%s", msg)
		}
	}
	// A name conflict or a missing Secret is told again when what is in the way changes.
	now := meta.FindStatusCondition(next.Conditions, troupev1.ConditionInitialized)
	was := meta.FindStatusCondition(prev.Conditions, troupev1.ConditionInitialized)
	if now != nil && (now.Reason == troupev1.ReasonChildConflict || now.Reason == troupev1.ReasonSecretMissing) &&
		(was == nil || was.Message != now.Message) {
		add(corev1.EventTypeWarning, now.Reason, "Create", "%s", now.Message)
	}
	return out
}

// scaled is one worker set whose desired replicas changed.
type scaled struct {
	set      string
	from, to int32
}

// scaledSets lists the worker sets whose desired replicas changed while the job was neither
// suspended, paused nor ended in either status: those states scale every set to zero, and
// their own events tell it.
func scaledSets(prev, next *troupev1.JobStatus) []scaled {
	if !workersWanted(prev) || !workersWanted(next) {
		return nil
	}
	var out []scaled
	for _, n := range next.ReplicaStatuses {
		if n.Name == troupev1.MasterReplicaName {
			continue
		}
		for _, p := range prev.ReplicaStatuses {
			if p.Name == n.Name && p.Replicas != n.Replicas {
				out = append(out, scaled{set: n.Name, from: p.Replicas, to: n.Replicas})
			}
		}
	}
	return out
}

// workersWanted: in this status the worker sets run with the replicas the spec asks for.
func workersWanted(st *troupev1.JobStatus) bool {
	switch st.Phase {
	case "", troupev1.JobSuspended, troupev1.JobPaused, troupev1.JobSucceeded, troupev1.JobFailed:
		return false
	}
	return true
}

func isTrue(st *troupev1.JobStatus, t string) bool {
	return meta.IsStatusConditionTrue(st.Conditions, t)
}

func becameTrue(prev, next *troupev1.JobStatus, t string) bool {
	return !isTrue(prev, t) && isTrue(next, t)
}

func conditionMessage(st *troupev1.JobStatus, t string) string {
	if c := meta.FindStatusCondition(st.Conditions, t); c != nil {
		return c.Message
	}
	return ""
}
