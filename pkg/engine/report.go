package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/metrics"
)

// report ends a pass: the job's status, computed from the spec and plan, the observation as
// the pass left the children and the previous status, written once if it changed (with the
// events and metrics of what changed), and when to wake up next.
func (r *Reconciler) report(ctx context.Context, job Object, s *Spec, obs *Observed, prev *troupev1.JobStatus) (ctrl.Result, error) {
	wait, err := r.writeStatus(ctx, job, s, obs, prev)
	if err != nil {
		return ctrl.Result{}, err
	}
	res := sooner(r.requeue(s, obs, job.JobStatus()), wait)
	return sooner(res, stallWakeup(s.RunPolicy.ProgressDeadlineSeconds, job.JobStatus(), r.clock.Now())), nil
}

// writeStatus computes the status from the observation and writes it once, only if it changed.
// A change of counts or progress alone (progressOnly) waits (countsWriteDelay) for the next
// change of phase or condition to carry it; it returns how long it waits, after which the job
// is reconciled again.
func (r *Reconciler) writeStatus(ctx context.Context, job Object, s *Spec, obs *Observed, prev *troupev1.JobStatus) (time.Duration, error) {
	key := client.ObjectKeyFromObject(job)
	next := computeStatus(s, obs, prev, job.GetGeneration(), r.statusTime())
	if equality.Semantic.DeepEqual(prev, &next) {
		r.deferred.forget(key)
		return 0, nil
	}
	mayWait := progressOnly(prev, &next)
	if mayWait {
		if wait := r.deferred.wait(key, job.GetUID(), r.clock.Now()); wait > 0 {
			return wait, nil
		}
	}
	r.deferred.forget(key)
	if log := ctrl.LoggerFrom(ctx).V(2); log.Enabled() {
		log.Info("writing status", "phase", next.Phase, "progressOnly", mayWait, "changed", statusChanges(prev, &next))
	}
	if err := r.putStatus(ctx, job, &next); err != nil {
		return 0, err
	}
	r.told(job, s, obs, prev, &next)
	return 0, nil
}

// statusTime is now, as the status records times (to the second).
func (r *Reconciler) statusTime() metav1.Time {
	return metav1.NewTime(r.clock.Now().Truncate(time.Second))
}

// told emits the events and counts the metrics of a status write from prev to next.
func (r *Reconciler) told(job Object, s *Spec, obs *Observed, prev, next *troupev1.JobStatus) {
	r.recordTransitions(job, s, obs, prev, next)
	r.recordRestart(job, prev, next)
	r.recordSecretEvents(job, prev, next)
	r.recordProgress(job, prev, next)
}

// errJobChanged ends a pass whose write of the job's status conflicted: the job changed since
// the copy the pass read. It is the one rule for a conflict of the status: nothing more is
// done, and the watch event of the newer version, already queued, runs the next pass, which
// computes everything again from fresh data.
var errJobChanged = errors.New("the job changed since this pass read it")

// putStatus is the one write of a job's status: next (bounded by the function that computed
// it: computeStatus, invalidSpecStatus), with the resourceVersion of the copy the pass read.
// The job moves on with the write (its resourceVersion and status). A conflict is
// errJobChanged.
func (r *Reconciler) putStatus(ctx context.Context, job Object, next *troupev1.JobStatus) error {
	*job.JobStatus() = *next
	if err := r.client.Status().Update(ctx, job); err != nil {
		if apierrors.IsConflict(err) {
			return errJobChanged
		}
		return fmt.Errorf("update status: %w", err)
	}
	return nil
}

// recordSecret writes the job's status with the record of secret, just generated, before the
// Secret is created (withSecretRecord). The status is the one the pass computes from what it
// observed and created so far (obs, from prev): the pass's first status write, made early, so
// that a new job's record costs no write of its own (docs/performance.md). The write proves the
// pass's copy of the job the latest (createMissing). It returns the status written, which the
// report then starts from.
func (r *Reconciler) recordSecret(ctx context.Context, job Object, s *Spec, obs *Observed, prev *troupev1.JobStatus,
	secret *corev1.Secret) (*troupev1.JobStatus, error) {
	next := withSecretRecord(computeStatus(s, obs, prev, job.GetGeneration(), r.statusTime()), secret)
	if err := r.putStatus(ctx, job, &next); err != nil {
		return nil, fmt.Errorf("record generated Secret %s before creating it: %w", secret.Name, err)
	}
	r.told(job, s, obs, prev, &next)
	return &next, nil
}

// reportInvalidSpec records why the spec cannot be run, on the status and as an event.
func (r *Reconciler) reportInvalidSpec(ctx context.Context, job Object, cause error) error {
	prev := job.JobStatus().DeepCopy()
	next, reason := invalidSpecStatus(prev, cause, job.GetGeneration(), r.statusTime())
	if equality.Semantic.DeepEqual(prev, &next) {
		return nil
	}
	if err := r.putStatus(ctx, job, &next); err != nil {
		return err
	}
	// Told once, when the status that records it is written (recordTransitions).
	r.recorder.Eventf(job, nil, corev1.EventTypeWarning, reason, "Validate", "%v", cause)
	r.countCreated(job, prev, &next)
	return nil
}

// requeue asks to be woken for the next time-driven step: a TTL expiry, a recheck of taken
// child names or missing Secrets, or a node of the job's pods, not Ready, becoming lost.
// Everything else is driven by watches.
func (r *Reconciler) requeue(s *Spec, obs *Observed, st *troupev1.JobStatus) ctrl.Result {
	return sooner(r.timedStep(s, obs, st), obs.NodeRecheck) // a node of its pods may be lost by then
}

// timedStep is the next time-driven step's wake-up but for nodes.
func (r *Reconciler) timedStep(s *Spec, obs *Observed, st *troupev1.JobStatus) ctrl.Result {
	if len(obs.Conflicts) > 0 || len(obs.SecretProblems) > 0 {
		return ctrl.Result{RequeueAfter: conflictRecheck}
	}
	if obs.PodCreateRecheck > 0 {
		return ctrl.Result{RequeueAfter: obs.PodCreateRecheck}
	}
	if left := s.Plan.Restart.BackoffLeft; left > 0 {
		return ctrl.Result{RequeueAfter: left}
	}
	if expiry, ok := ttlExpiry(s, st); ok {
		if d := expiry.Sub(r.clock.Now()); d > 0 {
			return ctrl.Result{RequeueAfter: d}
		}
		return ctrl.Result{RequeueAfter: time.Second}
	}
	return ctrl.Result{}
}

// sooner is res, woken after wait at the latest (a deferred status write) when wait is set.
func sooner(res ctrl.Result, wait time.Duration) ctrl.Result {
	if wait > 0 && (res.RequeueAfter == 0 || wait < res.RequeueAfter) {
		res.RequeueAfter = wait
	}
	return res
}

// launcherWaitEvents tells the start of a wait: the moment the launcher pod is on its node
// and waits for the workers, between GangScheduled and WorkersReady in the job's story.
func launcherWaitEvents(prev, next *troupev1.JobStatus) []lifecycleEvent {
	if !becameTrue(prev, next, troupev1.ConditionLauncherWaiting) {
		return nil
	}
	return []lifecycleEvent{{
		Type: corev1.EventTypeNormal, Reason: troupev1.EventWaitingForWorkers, Action: "Wait",
		Message: conditionMessage(next, troupev1.ConditionLauncherWaiting),
	}}
}

// progressOnly reports whether next differs from prev only in counts (countsOnly) and in what
// records a job's progress within the phase it is in, good news that the next phase brings
// anyway: its children all created (Initialized turning True from CreatingChildren), the
// launcher's wait for its workers beginning, ending with every worker reached, or not needed
// (LauncherWaiting), every worker ready while the job is Pending (WorkersReady; the launcher
// runs next), its start time first set, the resourceVersions of its generated Secrets first
// recorded. Such a change waits like counts (countsWriteDelay) for the next change to carry
// it: a job's status is written once per phase where its pods start within that delay, not
// once per step of their start (a launcher that waited for its workers took four status
// writes before Running on a real node, docs/performance.md). Bad news (a conflict, a cause, a
// wait that timed out, a worker lost) is written at once. While the job runs, WorkersReady
// turning True is written at once too: the moment every pod runs is the job's startup time
// (troupe_job_startup_seconds).
func progressOnly(prev, next *troupev1.JobStatus) bool {
	if prev.Phase != next.Phase {
		return false
	}
	was := prev.DeepCopy()
	progressed(was, next, troupev1.ConditionInitialized, troupev1.ReasonChildrenCreated, troupev1.ReasonCreatingChildren)
	progressed(was, next, troupev1.ConditionLauncherWaiting, troupev1.ReasonNoLauncherWait, troupev1.ReasonWaitNotStarted)
	progressed(was, next, troupev1.ConditionLauncherWaiting, troupev1.ReasonWaitingForWorkers, troupev1.ReasonWaitNotStarted)
	progressed(was, next, troupev1.ConditionLauncherWaiting, troupev1.ReasonWorkersReached,
		troupev1.ReasonWaitNotStarted, troupev1.ReasonWaitingForWorkers)
	if prev.Phase == troupev1.JobPending {
		progressed(was, next, troupev1.ConditionWorkersReady, troupev1.ReasonWorkersReady, troupev1.ReasonWorkersNotReady)
	}
	if was.StartTime == nil {
		was.StartTime = next.StartTime
	}
	for i := range was.GeneratedSecrets {
		rec := &was.GeneratedSecrets[i]
		if i < len(next.GeneratedSecrets) && rec.ResourceVersion == "" &&
			next.GeneratedSecrets[i].Name == rec.Name && next.GeneratedSecrets[i].SHA256 == rec.SHA256 {
			rec.ResourceVersion = next.GeneratedSecrets[i].ResourceVersion
		}
	}
	return countsOnly(was, next)
}

// progressed sets the condition t of st as next has it when it went to reason to from one of
// the reasons from.
func progressed(st, next *troupev1.JobStatus, t, to string, from ...string) {
	c, now := meta.FindStatusCondition(st.Conditions, t), meta.FindStatusCondition(next.Conditions, t)
	if c != nil && now != nil && slices.Contains(from, c.Reason) && now.Reason == to {
		*c = *now
	}
}

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
	out.Progress = nil // the training's reports: at most countsWriteDelay late, as counts
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
		if jobs := obs.WorkerJobs[e.WorkerSet]; e.WorkerSet != "" && len(jobs) > 0 {
			related = jobs[0]
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
	suspended, paused := "the worker sets are scaled to zero", "the worker sets are scaled to zero"
	if s.HasMaster() {
		suspended = "the master Job " + s.Master.JobName + " is suspended and " + suspended
		paused = "the master Job " + s.Master.JobName + " is deleted and " + paused
	}

	switch {
	case becameTrue(prev, next, troupev1.ConditionSuspended):
		add(normal, troupev1.EventSuspended, "Suspend", "%s: %s", conditionMessage(next, troupev1.ConditionSuspended), suspended)
	case isTrue(prev, troupev1.ConditionSuspended) && !isTrue(next, troupev1.ConditionSuspended) && !next.Phase.Ended():
		add(normal, troupev1.EventResumed, "Resume", "runPolicy.suspend was cleared: the job's pods start again")
	}
	switch {
	case prev.Phase != troupev1.JobPaused && next.Phase == troupev1.JobPaused:
		add(normal, troupev1.EventPaused, "Pause",
			"runMode.pause.enabled is set: %s", paused)
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
		if s.HasMaster() {
			add(normal, troupev1.EventRunning, "Start", "the master Job %s is running", s.Master.JobName)
		} else {
			add(normal, troupev1.EventRunning, "Start", "the workers are running")
		}
	}
	if next.Phase != prev.Phase {
		switch next.Phase {
		case troupev1.JobSucceeded:
			if s.HasMaster() {
				add(normal, troupev1.EventSucceeded, "Finish", "the master completed successfully")
			} else {
				add(normal, troupev1.EventSucceeded, "Finish", "every worker completed successfully")
			}
		case troupev1.JobFailed:
			msg := "the master failed"
			if c := meta.FindStatusCondition(next.Conditions, troupev1.ConditionFailed); c != nil {
				msg = c.Message
			}
			add(corev1.EventTypeWarning, troupev1.EventFailed, "Finish", "%s", msg)
		}
	}
	// What is in the way of the job's children (a name conflict, a missing Secret, a refused
	// create) is told when it is first seen and again when it changes (below).
	now := meta.FindStatusCondition(next.Conditions, troupev1.ConditionInitialized)
	was := meta.FindStatusCondition(prev.Conditions, troupev1.ConditionInitialized)
	inTheWay := now != nil && slices.Contains(childrenInTheWay, now.Reason)
	toldByInitialized := inTheWay && next.Reason == now.Reason
	// What holds the job (status.reason) is told once, when it is first written, unless the
	// Initialized event tells it; a failure is told by the Failed event.
	if next.Reason != "" && next.Reason != prev.Reason && !next.Phase.Ended() && !toldByInitialized {
		add(corev1.EventTypeWarning, next.Reason, "Start", "%s", causeMessage(next))
	}
	if inTheWay && (was == nil || was.Message != now.Message) {
		add(corev1.EventTypeWarning, now.Reason, "Create", "%s", now.Message)
	}
	return out
}

// childrenInTheWay are the Initialized condition's reasons that something keeps the job's
// children from being made.
var childrenInTheWay = []string{troupev1.ReasonChildConflict, troupev1.ReasonSecretMissing, troupev1.ReasonCreateRefused}

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

func becameTrue(prev, next *troupev1.JobStatus, t string) bool {
	return !isTrue(prev, t) && isTrue(next, t)
}

// causeMessage is the message of the condition that names status.reason.
func causeMessage(st *troupev1.JobStatus) string {
	for _, t := range []string{troupev1.ConditionWorkersReady, troupev1.ConditionRunning} {
		if c := meta.FindStatusCondition(st.Conditions, t); c != nil && c.Reason == st.Reason {
			return c.Message
		}
	}
	return st.Reason
}

func conditionMessage(st *troupev1.JobStatus, t string) string {
	if c := meta.FindStatusCondition(st.Conditions, t); c != nil {
		return c.Message
	}
	return ""
}

// recordRestart emits the Restarting event once a restart is recorded in the status.
func (r *Reconciler) recordRestart(job Object, prev, next *troupev1.JobStatus) {
	if next.Restarts <= prev.Restarts {
		return
	}
	msg := fmt.Sprintf("attempt %d", next.Restarts)
	if c := meta.FindStatusCondition(next.Conditions, troupev1.ConditionRestarting); c != nil {
		msg = c.Message
	}
	r.recorder.Eventf(job, nil, corev1.EventTypeWarning, troupev1.EventRestarting, "Restart", "%s", msg)
	metrics.JobRestarted(r.gvk.Kind, job.GetNamespace())
}

// recordSecretEvents emits a Warning when a generated Secret is found changed.
func (r *Reconciler) recordSecretEvents(job Object, prev, next *troupev1.JobStatus) {
	now := meta.FindStatusCondition(next.Conditions, troupev1.ConditionSecretTampered)
	was := meta.FindStatusCondition(prev.Conditions, troupev1.ConditionSecretTampered)
	if now != nil && now.Status == metav1.ConditionTrue && (was == nil || was.Status != now.Status || was.Message != now.Message) {
		r.recorder.Eventf(job, nil, corev1.EventTypeWarning, troupev1.EventSecretTampered, "Verify", "%s", now.Message)
	}
}
