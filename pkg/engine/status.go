package engine

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// computeStatus returns the job's status as a pure function of its spec, what was observed of
// its children, the previous status (for times that must not move) and the current time.
func computeStatus(s *Spec, obs *Observed, prev *troupev1.JobStatus, generation int64, now metav1.Time) troupev1.JobStatus {
	st := troupev1.JobStatus{
		Conditions:         slices.Clone(prev.Conditions),
		ObservedGeneration: generation,
		StartTime:          prev.StartTime,
		CompletionTime:     prev.CompletionTime,
	}
	verdict := verdict(prev, obs)
	finished := verdict != ""
	released := WorkersReleased(s, verdict)

	st.ReplicaStatuses = replicaStatuses(s, obs, released)
	st.Pods = podPhaseCounts(obs.Pods)
	st.Workers = workersColumn(s, st.ReplicaStatuses)
	st.WorkerReplicas, st.WorkerSelector = workerScale(s, obs, released)
	st.Phase = runModePhase(s, prev, phase(s, obs, prev))
	st.Phase, st.Restarts = restartPhase(s, prev, st.Phase)
	st.UncountedRestarts, st.RestartsByReason = prev.UncountedRestarts, slices.Clone(prev.RestartsByReason)
	if s.Plan.Restart.Deciding {
		countRestart(&st, s.Plan.RestartSeen.Failure.Reason, s.Plan.RestartSeen.Decision.Counted())
	}

	set := func(c metav1.Condition) {
		c.ObservedGeneration, c.LastTransitionTime = generation, now
		meta.SetStatusCondition(&st.Conditions, c)
	}
	ended := prev.Phase.Ended() // in the status written before this pass
	if !ended {
		// Once the job has finished, its children are not recreated; Initialized keeps its
		// last word.
		set(initializedCondition(obs))
		set(launcherWaitingCondition(s, obs)) // likewise: how the last wait ended stays
	}
	// Why pods do not run (causes.go): a gang not admitted names their scheduler's refusal.
	var gang *metav1.Condition
	if s.Gang != nil {
		c := s.Gang.Condition(obs.Gang, obs.Pods)
		gang = &c
	}
	workers := withGang(workerCauses(s, obs), gang)
	var master []setCause
	if c, ok := masterCause(s, obs); ok {
		master = withGang([]setCause{c}, gang)
	}
	set(workersReadyCondition(s, obs, st.ReplicaStatuses, workers, verdict, released))
	set(runningCondition(s, st.Phase, master))
	st.Progress = foldProgress(prev.Progress, obs.Progress)
	if c, ok := stalledCondition(s.RunPolicy.ProgressDeadlineSeconds, &st, now.Time); ok {
		set(c)
	}
	if !ended || meta.FindStatusCondition(prev.Conditions, troupev1.ConditionReplicaFailure) == nil {
		// Likewise: once the job has ended, its released workers' exits (a shell killed by
		// the scale-down ends Failed) are not failures of it.
		set(withPodCreateFailures(obs, replicaFailureCondition(st.ReplicaStatuses, slices.Concat(master, workers))))
	}
	set(suspendedCondition(s, finished))
	if gang != nil {
		set(*gang)
	}
	if c, ok := secretLostCondition(obs, prev); ok {
		set(c) // before terminalCondition, which would say only "the master failed"
	}
	if s.Plan.Restart.Deciding {
		// A new failure: the condition's time is its record (the restart's backoff counts
		// from it), also when the condition was True already (an attempt that failed before it
		// was seen running).
		meta.RemoveStatusCondition(&st.Conditions, troupev1.ConditionRestarting)
	}
	restartConditions(s, obs, prev, st.Phase, workers, set)
	if c, ok := terminalCondition(s, obs.MasterJob, obs.MasterPods, st.Phase, workers); ok && !meta.IsStatusConditionTrue(st.Conditions, c.Type) {
		set(c)
	}
	seedStatus(s, obs, &st, finished, released, set)
	if c, ok := templateDriftCondition(obs, prev); ok {
		set(c)
	}
	st.GeneratedSecrets = obs.Secrets.records(prev)
	if c, ok := secretTamperedCondition(obs, prev); ok {
		set(c)
	}

	// A zero creation time would be written as no start time and computed again on every pass.
	if st.StartTime == nil && !s.Suspended() {
		st.StartTime = startTime(s, obs)
	}
	if st.CompletionTime == nil && st.Phase.Ended() {
		if s.HasMaster() {
			st.CompletionTime = completionTime(obs.MasterJob, obs.MasterPods, now)
		} else {
			st.CompletionTime = workersCompletionTime(s, obs, now)
		}
	}
	fitConditionMessages(st.Conditions) // whatever a message quotes, every write fits the CRD
	st.Reason = fitBytes(statusReason(&st, prev, workers, master), troupev1.MaxStatusReason)
	return st
}

// statusReason is status.reason: the reason of the Failed condition of a failed job; else the
// cause that holds its workers (WorkersReady names the first of workers) or its master (Running
// names master's); else, while the job has not started, the cause it had (a container in a crash
// loop is Ready for moments between its restarts, which holds the job as much); else none.
func statusReason(st, prev *troupev1.JobStatus, workers, master []setCause) string {
	switch st.Phase {
	case troupev1.JobSucceeded:
		return ""
	case troupev1.JobFailed:
		if c := meta.FindStatusCondition(st.Conditions, troupev1.ConditionFailed); c != nil {
			return c.Reason
		}
		return ""
	}
	// A refused create holds the job until an admin lets it through.
	if c := meta.FindStatusCondition(st.Conditions, troupev1.ConditionInitialized); c != nil &&
		c.Status == metav1.ConditionFalse && c.Reason == troupev1.ReasonCreateRefused {
		return c.Reason
	}
	held := []struct {
		condition string
		causes    []setCause
	}{{troupev1.ConditionWorkersReady, workers}, {troupev1.ConditionRunning, master}}
	for _, h := range held {
		if c := meta.FindStatusCondition(st.Conditions, h.condition); c != nil && c.Status == metav1.ConditionFalse &&
			len(h.causes) > 0 && c.Reason == h.causes[0].Reason {
			return c.Reason
		}
	}
	// A refusal held it only until the create went through (above while it holds).
	if st.Phase == troupev1.JobPending && prev.Phase == troupev1.JobPending && prev.Reason != troupev1.ReasonCreateRefused {
		return prev.Reason
	}
	return ""
}

// invalidSpecStatus is the status of a job whose spec cannot be run: prev, Pending if it had no
// phase yet, with Initialized False saying why (reason InvalidSpec, or the SpecError's own).
func invalidSpecStatus(prev *troupev1.JobStatus, cause error, generation int64, now metav1.Time) (troupev1.JobStatus, string) {
	st := *prev.DeepCopy()
	if st.Phase == "" {
		st.Phase = troupev1.JobPending
	}
	st.ObservedGeneration = generation
	reason := troupev1.ReasonInvalidSpec
	var se *SpecError
	if errors.As(cause, &se) {
		reason = se.Reason
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: troupev1.ConditionInitialized, Status: metav1.ConditionFalse, Reason: reason, Message: cause.Error(),
		ObservedGeneration: generation, LastTransitionTime: now,
	})
	fitConditionMessages(st.Conditions)
	return st, reason
}

// phase summarises the job. Terminal phases are sticky.
func phase(s *Spec, obs *Observed, prev *troupev1.JobStatus) troupev1.JobPhase {
	if prev.Phase.Ended() {
		return prev.Phase
	}
	if obs.Verdict != "" {
		return obs.Verdict
	}
	if len(obs.Secrets.Lost) > 0 {
		return troupev1.JobFailed
	}
	switch {
	case s.Suspended():
		return troupev1.JobSuspended
	case s.HasMaster() && masterRunning(obs), !s.HasMaster() && workersRunning(obs):
		return troupev1.JobRunning
	default:
		return troupev1.JobPending
	}
}

// masterRunning: the master Job reports a ready pod, or one of its pods is in phase Running, or
// one has succeeded and the Job has not given its verdict yet. The Job controller marks the Job
// Complete a moment (a second or more, under load) after its pod succeeded; the job is still
// running its master then, not back to Pending, and saying Pending in between cost a status
// write and showed users a phase that goes Running, Pending, Succeeded.
func masterRunning(obs *Observed) bool {
	if obs.MasterJob == nil {
		return false
	}
	if r := obs.MasterJob.Status.Ready; r != nil && *r > 0 {
		return true
	}
	for _, p := range obs.MasterPods {
		if p.Status.Phase == corev1.PodRunning || (p.Status.Phase == corev1.PodSucceeded && p.DeletionTimestamp.IsZero()) {
			return true
		}
	}
	return false
}

// workersRunning: a job without a master runs while a worker pod is Running (or one succeeded
// and its Job has not said so: as masterRunning).
func workersRunning(obs *Observed) bool {
	for _, pods := range obs.WorkerPods {
		for _, p := range pods {
			if p.Status.Phase == corev1.PodRunning || (p.Status.Phase == corev1.PodSucceeded && p.DeletionTimestamp.IsZero()) {
				return true
			}
		}
	}
	return false
}

func replicaStatuses(s *Spec, obs *Observed, released bool) []troupev1.ReplicaStatus {
	master := troupev1.ReplicaStatus{Name: troupev1.MasterReplicaName}
	if !s.Suspended() && !s.Paused() {
		master.Replicas = 1
	}
	if j := obs.MasterJob; j != nil {
		master.Active = j.Status.Active
		master.Succeeded = j.Status.Succeeded
		master.Failed = j.Status.Failed
		master.Ready = ptr.Deref(j.Status.Ready, 0)
	}
	master.Ready = max(master.Ready, readyPods(obs.MasterPods))
	switch obs.Verdict {
	case troupev1.JobSucceeded:
		// Counted as the Job will count it once it says Complete, so that its verdict, coming
		// after the engine's (masterVerdict), moves no count and costs no status write.
		master.Replicas, master.Active, master.Ready = 0, 0, 0
		master.Succeeded = max(master.Succeeded, 1)
	case troupev1.JobFailed:
		master.Replicas = 0
	}
	master.Restarts = restarts(obs.MasterPods)
	var out []troupev1.ReplicaStatus
	if s.HasMaster() {
		out = append(out, master)
	}

	for i := range s.WorkerSets {
		ws := &s.WorkerSets[i]
		rs := troupev1.ReplicaStatus{Name: ws.Name, Replicas: ws.Replicas}
		if released {
			rs.Replicas = 0
		}
		if sts := obs.StatefulSets[ws.Name]; sts != nil {
			rs.Ready = sts.Status.ReadyReplicas
		}
		for _, j := range obs.WorkerJobs[ws.Name] {
			rs.Ready += ptr.Deref(j.Status.Ready, 0)
		}
		rs.Ready = max(rs.Ready, readyPods(obs.AttemptWorkerPods[ws.Name]))
		for _, p := range obs.WorkerPods[ws.Name] {
			switch p.Status.Phase {
			case corev1.PodPending, corev1.PodRunning:
				rs.Active++
			case corev1.PodSucceeded:
				rs.Succeeded++
			case corev1.PodFailed:
				rs.Failed++
			}
		}
		rs.Restarts = restarts(obs.WorkerPods[ws.Name])
		out = append(out, rs)
	}
	return out
}

// readyPods counts the pods that run, are ready and are not being deleted. Ready counts are
// the larger of this and what the pods' StatefulSet or Job says: the pod watch tells a pod
// ready before the controller that owns it has counted it, and a count that rose only with the
// controller's own status write cost a status write of its own (the master's ready count moved
// seconds after the job's Running; docs/performance.md). A pod no longer ready still counts
// until its controller has said so, as before.
func readyPods(pods []*corev1.Pod) int32 {
	var n int32
	for _, p := range pods {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp.IsZero() && podReady(p) {
			n++
		}
	}
	return n
}

// restarts is the sum of the restart counts of the containers of pods.
func restarts(pods []*corev1.Pod) int32 {
	var n int32
	for _, p := range pods {
		for _, cs := range p.Status.ContainerStatuses {
			n += cs.RestartCount
		}
	}
	return n
}

func podPhaseCounts(pods []corev1.Pod) troupev1.PodPhaseCounts {
	var c troupev1.PodPhaseCounts
	for i := range pods {
		switch pods[i].Status.Phase {
		case corev1.PodPending:
			c.Pending++
		case corev1.PodRunning:
			c.Running++
		case corev1.PodSucceeded:
			c.Succeeded++
		case corev1.PodFailed:
			c.Failed++
		default:
			c.Unknown++
		}
	}
	return c
}

// workerScale is what the scale subresource reads: the worker pods that exist, and the
// selector of the job's worker pods.
//
// The count is the larger of the pods the watch shows alive and what their StatefulSets and
// Jobs have counted, as ready counts are (readyPods): a controller's count follows its pods by
// a status write of its own, and moving with it cost the job one more. Once the workers are
// released only the pods count: the controllers' counts fall behind them.
func workerScale(s *Spec, obs *Observed, released bool) (int32, string) {
	var n, alive int32
	for _, sts := range obs.StatefulSets {
		n += sts.Status.Replicas
	}
	for _, jobs := range obs.WorkerJobs {
		for _, j := range jobs {
			n += j.Status.Active
		}
	}
	for _, pods := range obs.AttemptWorkerPods {
		for _, p := range pods {
			if (p.Status.Phase == corev1.PodPending || p.Status.Phase == corev1.PodRunning) && p.DeletionTimestamp.IsZero() {
				alive++
			}
		}
	}
	if released {
		n = alive
	} else {
		n = max(n, alive)
	}
	sel := labels.SelectorFromSet(labels.Set{
		troupev1.LabelJobUID: string(s.Owner.UID),
		troupev1.LabelRole:   troupev1.RoleWorker,
	})
	return n, sel.String()
}

// workersColumn is "ready/desired" over every worker set, desired being what the spec asks;
// a worker of a set that runs to completion counts once its Job completed in the current
// attempt (Plan.CompletedWorkers): a PyTorchJob whose workers all finished shows 2/2, not 0/2.
func workersColumn(s *Spec, rs []troupev1.ReplicaStatus) string {
	ready := s.Plan.CompletedWorkers
	for _, r := range rs[s.MasterPods():] { // the master's comes first
		ready += r.Ready
	}
	return fmt.Sprintf("%d/%d", ready, s.TotalWorkers())
}

// startTime is when the job's master Job was created, or, without a master, its first worker
// Job; nil before (a zero creation time would be written as none and computed on every pass).
func startTime(s *Spec, obs *Observed) *metav1.Time {
	jobs := []*batchv1.Job{obs.MasterJob}
	if !s.HasMaster() {
		jobs = slices.Concat(slices.Collect(maps.Values(obs.WorkerJobs))...)
	}
	var first *metav1.Time
	for _, j := range jobs {
		if j != nil && !j.CreationTimestamp.IsZero() && (first == nil || j.CreationTimestamp.Before(first)) {
			first = j.CreationTimestamp.DeepCopy()
		}
	}
	return first
}

// workersCompletionTime is when the last worker Job of a job without a master ended, or now.
func workersCompletionTime(s *Spec, obs *Observed, now metav1.Time) *metav1.Time {
	var last *metav1.Time
	for i := range s.WorkerSets {
		for _, j := range obs.WorkerJobs[s.WorkerSets[i].Name] {
			at := j.Status.CompletionTime
			if c := terminalJobCondition(j); at == nil && c != nil && !c.LastTransitionTime.IsZero() {
				at = &c.LastTransitionTime
			}
			if at != nil && (last == nil || last.Before(at)) {
				last = at.DeepCopy()
			}
		}
	}
	if last == nil {
		return &now
	}
	return last
}

// completionTime is when the master ended: the Job's completion time or terminal condition's,
// or, when the engine saw its success first (masterVerdict), when its pod ended.
func completionTime(master *batchv1.Job, masterPods []*corev1.Pod, now metav1.Time) *metav1.Time {
	if master != nil && master.Status.CompletionTime != nil {
		return master.Status.CompletionTime.DeepCopy()
	}
	if c := terminalJobCondition(master); c != nil && !c.LastTransitionTime.IsZero() {
		return c.LastTransitionTime.DeepCopy()
	}
	if at := masterFinishedAt(master, masterPods); at != nil {
		return at
	}
	return &now
}

// seedStatus sets the Paused, Completed and Complete conditions, succeeded, tasks and
// aggregate of st, whose phase is already computed.
func seedStatus(s *Spec, obs *Observed, st *troupev1.JobStatus, finished, released bool, set func(metav1.Condition)) {
	set(pausedCondition(s, obs, st.Conditions))
	set(completedCondition(st.Phase, st.Conditions))
	st.Succeeded = 0
	if st.Phase == troupev1.JobSucceeded {
		st.Succeeded = 1
		if !meta.IsStatusConditionTrue(st.Conditions, troupev1.ConditionComplete) {
			if s.HasMaster() {
				set(newCondition(troupev1.ConditionComplete, true, troupev1.ReasonMasterSucceeded, "the master completed successfully"))
			} else {
				set(newCondition(troupev1.ConditionComplete, true, troupev1.ReasonWorkersSucceeded, "every worker completed successfully"))
			}
		}
	}
	st.Tasks = tasks(s, obs.Pods)
	agg := aggregate(s, obs, finished, released)
	st.Aggregate = &agg
}

// tasks lists the job's pods by replica type (the master's first, then the workers'), each
// type's pods by name, with the type's container restarts.
func tasks(s *Spec, pods []corev1.Pod) []troupev1.TaskStatus {
	master := troupev1.TaskStatus{Type: s.masterType()}
	worker := troupev1.TaskStatus{Type: troupev1.ReplicaWorker}
	for i := range pods {
		p := &pods[i]
		task := &worker
		switch p.Labels[troupev1.LabelRole] {
		case troupev1.RoleMaster:
			task = &master
		case troupev1.RoleWorker:
		default:
			continue
		}
		task.Status = append(task.Status, troupev1.PodReference{Name: p.Name, UID: p.UID, Phase: p.Status.Phase})
		for _, cs := range p.Status.ContainerStatuses {
			task.RestartCount += cs.RestartCount
		}
	}
	out := []troupev1.TaskStatus{master}
	if len(s.WorkerSets) > 0 {
		out = append(out, worker)
	}
	for i := range out {
		limit := troupev1.MaxPodsPerJob
		if out[i].Type != troupev1.ReplicaWorker {
			limit = troupev1.MaxMasterTaskPods
		}
		out[i].Status, out[i].Unlisted = boundTaskPods(out[i].Status, limit)
	}
	return out
}

// boundTaskPods keeps at most limit of a type's pods, those not ended first (a
// master Job's failed attempts, a worker's replaced pods), sorted by name, and counts the rest:
// status.tasks must not grow the job past etcd's object limit, whatever number of ended pods
// lingers.
func boundTaskPods(refs []troupev1.PodReference, limit int) ([]troupev1.PodReference, int32) {
	podEnded := func(r troupev1.PodReference) bool {
		return r.Phase == corev1.PodSucceeded || r.Phase == corev1.PodFailed
	}
	var unlisted int32
	if len(refs) > limit {
		slices.SortFunc(refs, func(a, b troupev1.PodReference) int {
			if ea, eb := podEnded(a), podEnded(b); ea != eb {
				if ea {
					return 1
				}
				return -1
			}
			return cmp.Compare(a.Name, b.Name)
		})
		unlisted = int32(len(refs) - limit)
		refs = refs[:limit]
	}
	slices.SortFunc(refs, func(a, b troupev1.PodReference) int { return cmp.Compare(a.Name, b.Name) })
	return refs, unlisted
}

// aggregate counts the job's replicas by state: every observed pod once (a pod being deleted
// as deleted, whatever its phase said), and as creating the replicas wanted now that have no
// live pod yet.
func aggregate(s *Spec, obs *Observed, finished, released bool) troupev1.Aggregate {
	var a troupev1.Aggregate
	var liveMaster, liveWorkers int32
	for i := range obs.Pods {
		p := &obs.Pods[i]
		ended := podTerminal(p)
		switch {
		case !p.DeletionTimestamp.IsZero() && !ended:
			a.Deleted++
			continue
		case p.Status.Phase == corev1.PodPending:
			a.Pending++
		case p.Status.Phase == corev1.PodRunning:
			a.Running++
		case p.Status.Phase == corev1.PodSucceeded:
			a.Succeeded++
		case p.Status.Phase == corev1.PodFailed:
			a.Failed++
		default:
			a.Unknown++
		}
		if !ended {
			if p.Labels[troupev1.LabelRole] == troupev1.RoleMaster {
				liveMaster++
			} else {
				liveWorkers++
			}
		}
	}
	if !finished && !s.Suspended() && !s.Paused() && liveMaster == 0 {
		a.Creating++
	}
	if !released {
		a.Creating += max(0, s.TotalWorkers()-liveWorkers)
	}
	return a
}

// restartPhase refines the phase p: a job is Restarting from the failure of an attempt until
// the next attempt's launcher runs, and Failed once a worker was lost, or the master restarted in
// place past its backoffLimit, with no restart left.
// It also returns status.restarts.
func restartPhase(s *Spec, prev *troupev1.JobStatus, p troupev1.JobPhase) (troupev1.JobPhase, int32) {
	switch {
	case p.Ended():
		return p, prev.Restarts
	case s.Plan.Restart.Deciding:
		return troupev1.JobRestarting, prev.Restarts + 1
	case s.Plan.RestartSeen.Cause != "" && (s.Plan.RestartSeen.WorkerLost || s.Plan.RestartSeen.MasterCrashLoop ||
		s.Plan.RestartSeen.Decision.Action == troupev1.FailJobAction):
		return troupev1.JobFailed, prev.Restarts
	case p == troupev1.JobSuspended || p == troupev1.JobPaused:
		return p, prev.Restarts
	}
	switch restartReason(prev) {
	case troupev1.ReasonStoppingAttempt, troupev1.ReasonStartingAttempt:
		if p != troupev1.JobRunning || s.Plan.Restart.Stopping {
			return troupev1.JobRestarting, prev.Restarts
		}
	}
	return p, prev.Restarts
}

// runModePhase refines the phase p that phase() computed: a paused job is Paused, and a job
// that was paused is Resuming until its master runs again (or it is suspended). Terminal
// phases stay.
func runModePhase(s *Spec, prev *troupev1.JobStatus, p troupev1.JobPhase) troupev1.JobPhase {
	switch {
	case p.Ended():
		return p
	case s.Paused():
		return troupev1.JobPaused
	case (prev.Phase == troupev1.JobPaused || prev.Phase == troupev1.JobResuming) && p == troupev1.JobPending:
		return troupev1.JobResuming
	}
	return p
}
