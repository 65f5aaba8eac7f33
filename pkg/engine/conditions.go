package engine

import (
	"fmt"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// templateDriftCondition is True while a template change is held back. The condition is added
// only to a job that drifted, and then stays, False, once the change is written.
func templateDriftCondition(obs *Observed, prev *troupev1.JobStatus) (metav1.Condition, bool) {
	const t = troupev1.ConditionTemplateDrift
	if len(obs.HeldTemplates) > 0 {
		return newCondition(t, true, troupev1.ReasonTemplateChangeHeld,
			"the pod template of "+strings.Join(obs.HeldTemplates, ", ")+
				" differs from the one troupe would write now (a spec change or a new operator release); "+
				"running pods are left as they are and the new template is written once no pod of the job runs"), true
	}
	if meta.FindStatusCondition(prev.Conditions, t) == nil {
		return metav1.Condition{}, false
	}
	return newCondition(t, false, troupev1.ReasonTemplatesCurrent, "every worker StatefulSet and Job has the pod template troupe wants"), true
}

// initializedCondition: the job's objects exist and belong to it. A conflict names the objects
// in the way; they are never adopted, changed or deleted.
func initializedCondition(obs *Observed) metav1.Condition {
	const t = troupev1.ConditionInitialized
	switch {
	case len(obs.Conflicts) > 0:
		return newCondition(t, false, troupev1.ReasonChildConflict,
			"objects with the names of this job's children exist and are not owned by it; delete or rename them: "+joinRefs(obs.Conflicts))
	case len(obs.SecretProblems) > 0:
		return newCondition(t, false, troupev1.ReasonSecretMissing, strings.Join(obs.SecretProblems, "; "))
	case obs.Refused != nil:
		return newCondition(t, false, troupev1.ReasonCreateRefused, obs.Refused.message())
	case len(obs.Missing) > 0:
		return newCondition(t, false, troupev1.ReasonCreatingChildren, "creating "+joinRefs(obs.Missing))
	}
	return newCondition(t, true, troupev1.ReasonChildrenCreated, "every child object exists")
}

// workersReadyCondition says whether the workers are ready, or why not; verdict is the job's
// outcome ("" while it runs): once it has ended nothing waits for a worker.
func workersReadyCondition(s *Spec, obs *Observed, rs []troupev1.ReplicaStatus, causes []setCause, verdict troupev1.JobPhase, released bool) metav1.Condition {
	const t = troupev1.ConditionWorkersReady
	finished := verdict != ""
	switch {
	case len(s.WorkerSets) == 0:
		return newCondition(t, true, troupev1.ReasonNoWorkers, "the job has no worker sets")
	case released && finished:
		if !s.HasMaster() {
			return newCondition(t, false, troupev1.ReasonWorkersReleased, "the job ended; worker sets were released")
		}
		return newCondition(t, false, troupev1.ReasonWorkersReleased, "the master ended; worker sets were scaled to zero")
	case released && s.Paused():
		return newCondition(t, false, troupev1.ReasonPaused, "the job is paused; worker sets are scaled to zero")
	case released && s.Plan.Restart.Stopping:
		return newCondition(t, false, troupev1.ReasonStoppingAttempt, "the job is restarting; worker sets are scaled to zero until every pod of the failed attempt is gone")
	case released:
		return newCondition(t, false, troupev1.ReasonSuspended, "the job is suspended; worker sets are scaled to zero")
	}
	var waiting []string
	for i, ws := range s.WorkerSets {
		if r := rs[int(s.MasterPods())+i]; r.Ready < ws.Replicas { // the master's comes first
			waiting = append(waiting, fmt.Sprintf("%s: %d/%d ready", ws.Name, r.Ready, ws.Replicas))
		}
	}
	if len(s.AwaitingAdmission) > 0 && !finished {
		return newCondition(t, false, troupev1.ReasonAwaitingAdmission, "Kueue admitted fewer workers than the job asks ("+
			strings.Join(s.AwaitingAdmission, ", ")+"): no pod beyond the admission is created; the job is queued again at its new size")
	}
	if len(waiting) > 0 && finished {
		// Its worker pods are kept (runPolicy.cleanPodPolicy, or a clean-up not due for this
		// outcome), some ended: none is waited for any more.
		reason := troupev1.ReasonSucceeded
		if verdict == troupev1.JobFailed {
			reason = troupev1.ReasonFailed
		}
		return newCondition(t, false, reason, fmt.Sprintf("the job %s; its worker pods are kept (cleanPodPolicy %s): %s",
			strings.ToLower(string(verdict)), s.CleanPodPolicy(), strings.Join(waiting, ", ")))
	}
	if len(waiting) > 0 {
		reason, msg := troupev1.ReasonWorkersNotReady, "waiting for workers: "+strings.Join(waiting, ", ")
		if len(causes) > 0 {
			// The first set's cause names the condition; the message says each set's.
			reason, msg = causes[0].Reason, msg+"; "+joinCauses(causes)
		}
		if missing := missingHosts(s, obs); len(missing) > 0 {
			msg += "; hosts not ready: " + abbreviate(missing, maxNamesInMessage)
		}
		return newCondition(t, false, reason, msg)
	}
	return newCondition(t, true, troupev1.ReasonWorkersReady, "every worker pod is ready")
}

// withGang turns the cause of unschedulable pods into GangNotAdmitted when the job's gang is
// not admitted (gang is its GangScheduled condition, nil without a gang): the scheduler holds
// them back as a group, and what the PodGroup says comes first.
func withGang(causes []setCause, gang *metav1.Condition) []setCause {
	if gang == nil || gang.Status == metav1.ConditionTrue {
		return causes
	}
	out := slices.Clone(causes)
	for i := range out {
		if out[i].Reason == troupev1.ReasonUnschedulable {
			out[i].Reason = troupev1.ReasonGangNotAdmitted
			out[i].Detail = gang.Message + "; " + out[i].Detail
		}
	}
	return out
}

// missingHosts lists the host names of worker pods that are not ready (or do not exist yet),
// in hostfile order: the hosts a launcher is still waiting for.
func missingHosts(s *Spec, obs *Observed) []string {
	ready := map[string]bool{}
	for _, hosts := range readyWorkers(s, obs) {
		for _, h := range hosts {
			ready[h] = true
		}
	}
	var missing []string
	for i := range s.WorkerSets {
		for _, h := range s.WorkerSets[i].WorkerHostnames() {
			if !ready[h] {
				missing = append(missing, s.HostName(h))
			}
		}
	}
	return missing
}

func runningCondition(s *Spec, p troupev1.JobPhase, master []setCause) metav1.Condition {
	const t = troupev1.ConditionRunning
	if !s.HasMaster() {
		return workersRunningCondition(p)
	}
	switch p {
	case troupev1.JobRunning:
		return newCondition(t, true, troupev1.ReasonMasterRunning, "the master is running")
	case troupev1.JobSucceeded:
		return newCondition(t, false, troupev1.ReasonMasterSucceeded, "the master completed")
	case troupev1.JobFailed:
		return newCondition(t, false, troupev1.ReasonMasterFailed, "the master failed")
	case troupev1.JobSuspended:
		return newCondition(t, false, troupev1.ReasonSuspended, "the job is suspended")
	case troupev1.JobPaused:
		return newCondition(t, false, troupev1.ReasonPaused, "the job is paused")
	}
	if len(master) > 0 {
		return newCondition(t, false, master[0].Reason, "the master is not running: "+master[0].String())
	}
	return newCondition(t, false, troupev1.ReasonMasterNotRunning, "the master is not running yet")
}

// workersRunningCondition is the Running condition of a job without a master: its workers run
// it, and their causes are WorkersReady's.
func workersRunningCondition(p troupev1.JobPhase) metav1.Condition {
	const t = troupev1.ConditionRunning
	switch p {
	case troupev1.JobRunning:
		return newCondition(t, true, troupev1.ReasonWorkersRunning, "the workers are running")
	case troupev1.JobSucceeded:
		return newCondition(t, false, troupev1.ReasonWorkersSucceeded, "every worker completed")
	case troupev1.JobFailed:
		return newCondition(t, false, troupev1.ReasonWorkerFailed, "a worker failed")
	case troupev1.JobSuspended:
		return newCondition(t, false, troupev1.ReasonSuspended, "the job is suspended")
	case troupev1.JobPaused:
		return newCondition(t, false, troupev1.ReasonPaused, "the job is paused")
	}
	return newCondition(t, false, troupev1.ReasonWorkersNotRunning, "the workers are not running yet")
}

// replicaFailureCondition is True when pods of the job failed, or when the kubelet restarted
// containers of its pods (a worker set's pods are restarted in place and never fail): rs are the
// replica statuses, causes the worker sets' and the master's (for what the restarted pods said).
func replicaFailureCondition(rs []troupev1.ReplicaStatus, causes []setCause) metav1.Condition {
	const t = troupev1.ConditionReplicaFailure
	var failed, restarted []string
	for _, r := range rs {
		if r.Failed > 0 {
			failed = append(failed, fmt.Sprintf("%s: %d failed pods", r.Name, r.Failed))
		}
		if r.Restarts > 0 {
			restarted = append(restarted, fmt.Sprintf("%s: %d restarts", r.Name, r.Restarts))
		}
	}
	if len(failed) > 0 {
		return newCondition(t, true, troupev1.ReasonPodsFailed, strings.Join(failed, ", "))
	}
	if len(restarted) > 0 {
		msg := strings.Join(restarted, ", ")
		for _, c := range causes {
			if c.Reason == troupev1.ReasonCrashLoopBackOff {
				msg += "; " + c.String()
			}
		}
		return newCondition(t, true, troupev1.ReasonPodsRestarting, msg)
	}
	return newCondition(t, false, troupev1.ReasonNoPodFailures, "no pod of the job failed or restarted")
}

func suspendedCondition(s *Spec, finished bool) metav1.Condition {
	if s.Suspended() && !finished {
		return newCondition(troupev1.ConditionSuspended, true, troupev1.ReasonSuspended, "runPolicy.suspend is set")
	}
	return newCondition(troupev1.ConditionSuspended, false, troupev1.ReasonNotSuspended, "the job is not suspended")
}

// terminalCondition is the Succeeded or Failed condition, set once the job has finished. The
// reason and message of a failure are the master Job's (BackoffLimitExceeded,
// DeadlineExceeded, ...), so the user sees why without looking at the Job.
func terminalCondition(s *Spec, master *batchv1.Job, masterPods []*corev1.Pod, p troupev1.JobPhase, workers []setCause) (metav1.Condition, bool) {
	jc := terminalJobCondition(master)
	switch {
	case p == troupev1.JobSucceeded && !s.HasMaster():
		return newCondition(troupev1.ConditionSucceeded, true, troupev1.ReasonWorkersSucceeded, "every worker completed successfully"), true
	case p == troupev1.JobFailed && !s.HasMaster():
		return newCondition(troupev1.ConditionFailed, true, troupev1.ReasonWorkerFailed, "a worker failed; workers: "+joinCauses(workers)), true
	}
	switch p {
	case troupev1.JobSucceeded:
		return newCondition(troupev1.ConditionSucceeded, true, troupev1.ReasonMasterSucceeded, "the master completed successfully"), true
	case troupev1.JobFailed:
		reason, msg := troupev1.ReasonMasterFailed, "the master failed"
		if jc != nil && jc.Reason != "" {
			reason = jc.Reason
			msg = fmt.Sprintf("the master failed: %s", jc.Message)
		}
		if why := launcherSaid(masterPods); why != "" {
			msg += "; " + why
		}
		if len(workers) > 0 {
			// Why the hosts a launcher waited for were missing, or what its workers went through.
			msg += "; workers: " + joinCauses(workers)
		}
		return newCondition(troupev1.ConditionFailed, true, reason, msg), true
	}
	return metav1.Condition{}, false
}

// completedCondition is T9k's Completed: True once the job ended, whatever the result; the
// reason says which.
func completedCondition(p troupev1.JobPhase, conds []metav1.Condition) metav1.Condition {
	const t = troupev1.ConditionCompleted
	switch p {
	case troupev1.JobSucceeded:
		return newCondition(t, true, troupev1.ReasonSucceeded, "the master completed successfully")
	case troupev1.JobFailed:
		msg := "the master failed"
		if c := meta.FindStatusCondition(conds, troupev1.ConditionFailed); c != nil && c.Message != "" {
			msg = c.Message
		}
		return newCondition(t, true, troupev1.ReasonFailed, msg)
	}
	return newCondition(t, false, troupev1.ReasonNotCompleted, "the job has not ended")
}

// The LauncherWaiting condition says what the launcher's wait init container (the backend's,
// LauncherWaiter; troupe-wait for MPI) is doing,
// as the kubelet reports it on the current master pod. WorkersReady counts ready worker pods;
// this one tells a user why a job whose phase is Pending has a launcher pod that does not run
// its command yet, and which hosts it waits for.
//
// Its message changes only when the set of hosts not ready changes, which changes the
// WorkersReady message in the same pass: it adds no status write of its own beyond its
// transitions. It names no waiting reason of the kubelet's (ContainerCreating,
// ImagePullBackOff...), which would flap between passes.

// launcherWaitingCondition is the job's LauncherWaiting condition from the observed master
// Job and pods.
func launcherWaitingCondition(s *Spec, obs *Observed) metav1.Condition {
	const t = troupev1.ConditionLauncherWaiting
	notStarted := newCondition(t, false, troupev1.ReasonWaitNotStarted, "the launcher has not started waiting for its workers")
	pod, wait := currentMasterPod(obs.MasterPods), s.launcherWaitContainer()
	waits, known := launcherWaits(obs.MasterJob, pod, wait)
	switch {
	case !known:
		return notStarted // no master Job yet (or none while paused): nothing to tell
	case !waits:
		return newCondition(t, false, troupev1.ReasonNoLauncherWait, "the launcher starts without waiting for its workers")
	}
	cs := launcherWaitStatus(pod, wait)
	switch {
	case cs == nil:
		return notStarted
	case cs.State.Terminated != nil:
		return launcherWaitEnded(cs.State.Terminated, wait)
	case cs.State.Running == nil && cs.RestartCount == 0:
		return notStarted
	}
	// Running, or between two runs of a wait the kubelet restarts in place (a launcher with
	// restartPolicy OnFailure): the launcher still waits.
	msg := "the launcher waits for its workers to answer; "
	if missing := missingHosts(s, obs); len(missing) > 0 {
		msg += "hosts not ready: " + abbreviate(missing, maxNamesInMessage)
	} else {
		msg += "every worker pod is ready"
	}
	return newCondition(t, true, troupev1.ReasonWaitingForWorkers, msg)
}

// launcherWaitEnded says how the wait ended. The timeout's message is troupe-agent wait's
// termination message, which names the hosts still missing at the deadline.
func launcherWaitEnded(term *corev1.ContainerStateTerminated, container string) metav1.Condition {
	const t = troupev1.ConditionLauncherWaiting
	switch term.ExitCode {
	case 0:
		msg := "the launcher finished waiting for its workers"
		if !term.StartedAt.IsZero() && !term.FinishedAt.IsZero() {
			msg += " after " + term.FinishedAt.Sub(term.StartedAt.Time).Round(time.Second).String()
		}
		return newCondition(t, false, troupev1.ReasonWorkersReached, msg)
	case troupev1.ExitCodeLauncherWaitTimeout:
		return newCondition(t, false, troupev1.ReasonWaitTimedOut, fmt.Sprintf(
			"the launcher's wait for its workers timed out (%s exited with code %d)%s",
			container, term.ExitCode, quoted(term.Message)))
	default:
		return newCondition(t, false, troupev1.ReasonWaitFailed, fmt.Sprintf(
			"the launcher's wait for its workers failed (%s exited with code %d)%s",
			container, term.ExitCode, quoted(term.Message)))
	}
}

// launcherWaits reports whether the launcher waits for its workers: the master Job's pod
// template has the wait init container, or, while the Job is not seen, its pod reports one.
// known is false when neither tells.
func launcherWaits(job *batchv1.Job, pod *corev1.Pod, container string) (waits, known bool) {
	if job != nil {
		return container != "" && slices.ContainsFunc(job.Spec.Template.Spec.InitContainers, func(c corev1.Container) bool {
			return c.Name == container
		}), true
	}
	if launcherWaitStatus(pod, container) != nil {
		return true, true
	}
	return false, false
}

// launcherWaitStatus is the status of a master pod's wait init container, nil when the kubelet
// has reported none (or the backend has no wait).
func launcherWaitStatus(p *corev1.Pod, container string) *corev1.ContainerStatus {
	if p == nil || container == "" {
		return nil
	}
	for i := range p.Status.InitContainerStatuses {
		if cs := &p.Status.InitContainerStatuses[i]; cs.Name == container {
			return cs
		}
	}
	return nil
}

// restartConditions sets the Restarting condition and, for a failure with no restart left, a
// Failed condition that says which attempt failed and why (before terminalCondition, which
// would only quote the master Job). phase is the job's phase as computed.
func restartConditions(s *Spec, obs *Observed, prev *troupev1.JobStatus, phase troupev1.JobPhase, workers []setCause, set func(metav1.Condition)) {
	const t = troupev1.ConditionRestarting
	last := meta.FindStatusCondition(prev.Conditions, t)
	switch {
	case s.Plan.Restart.Deciding:
		set(newCondition(t, true, troupev1.ReasonStoppingAttempt, restartMessage(s, prev)))
	case last == nil:
	case last.Reason == troupev1.ReasonStoppingAttempt && s.Plan.RestartSeen.Clean && s.Plan.Restart.BackoffLeft == 0 && phase != troupev1.JobFailed:
		set(newCondition(t, true, troupev1.ReasonStartingAttempt, last.Message))
	case last.Reason == troupev1.ReasonStartingAttempt && phase == troupev1.JobRunning:
		set(newCondition(t, false, troupev1.ReasonAttemptRunning, last.Message))
	case last.Status == metav1.ConditionTrue && phase.Ended():
		// The job ended before its attempt was seen running (a launcher quicker than a status
		// write, or one that failed in its wait): it is not restarting any more.
		reason := troupev1.ReasonSucceeded
		if phase == troupev1.JobFailed {
			reason = troupev1.ReasonFailed
		}
		set(newCondition(t, false, reason, last.Message))
	}
	if s.Plan.RestartSeen.Cause == "" || s.Plan.Restart.Deciding || phase != troupev1.JobFailed {
		return
	}
	seen := s.Plan.RestartSeen
	if d := seen.Decision; d.Action == troupev1.FailJobAction {
		set(newCondition(troupev1.ConditionFailed, true, troupev1.ReasonFailJobRule,
			fmt.Sprintf("%s: %s in attempt %d", d, seen.Cause, s.Plan.Restart.Attempt)))
		return
	}
	left := fmt.Sprintf(" in attempt %d; no restart left (runPolicy.failurePolicy.maxRestarts: %d)", s.Plan.Restart.Attempt, s.maxRestarts())
	if seen.Decision.Rule != "" {
		left += "; " + seen.Decision.String()
	}
	reason := troupev1.ReasonWorkerFailed
	if s.Plan.RestartSeen.CrashLoop {
		reason = troupev1.ReasonWorkerCrashLooping
		if s.RunPolicy.FailurePolicy == nil {
			left = fmt.Sprintf(" (runPolicy.workerRestartLimit: %d)", ptr.Deref(s.RunPolicy.WorkerRestartLimit, 0))
		}
	}
	if s.Plan.RestartSeen.WorkerLost {
		set(newCondition(troupev1.ConditionFailed, true, reason, s.Plan.RestartSeen.Cause+left))
		return
	}
	if s.Plan.RestartSeen.MasterCrashLoop {
		// The reason the master Job would have failed with, had its pods been OnFailure.
		set(newCondition(troupev1.ConditionFailed, true, batchv1.JobReasonBackoffLimitExceeded, s.Plan.RestartSeen.Cause+left))
		return
	}
	if c, ok := terminalCondition(s, obs.MasterJob, obs.MasterPods, phase, workers); ok {
		c.Message += left
		set(c)
	}
}

// pausedCondition is True while pause is asked, saying whether pods are still going; after a
// pause it stays False with reason Resumed, which is how the engine remembers that the job's
// replicas run their resume overrides.
func pausedCondition(s *Spec, obs *Observed, prev []metav1.Condition) metav1.Condition {
	const t = troupev1.ConditionPaused
	if s.Paused() {
		if n := len(obs.Pods); n > 0 {
			return newCondition(t, true, troupev1.ReasonPaused, fmt.Sprintf("runMode.pause.enabled is set; deleting the job's %d pods", n))
		}
		return newCondition(t, true, troupev1.ReasonPaused, "runMode.pause.enabled is set; every pod of the job is deleted")
	}
	if c := meta.FindStatusCondition(prev, t); c != nil && (c.Status == metav1.ConditionTrue || c.Reason == troupev1.ReasonResumed) {
		return newCondition(t, false, troupev1.ReasonResumed, "the job was resumed from a pause; its replicas run runMode.pause.resumeSpecs")
	}
	return newCondition(t, false, troupev1.ReasonNotPaused, "the job has not been paused")
}

// secretTamperedCondition is True while a generated Secret holds foreign data. It is added
// only to a job whose Secret was changed, and stays, False, once the data is put back.
func secretTamperedCondition(obs *Observed, prev *troupev1.JobStatus) (metav1.Condition, bool) {
	const t = troupev1.ConditionSecretTampered
	if !obs.Secrets.checked {
		return metav1.Condition{}, false
	}
	if len(obs.Secrets.Tampered) > 0 {
		return newCondition(t, true, troupev1.ReasonGeneratedSecretModified,
			"the data of Secret "+strings.Join(obs.Secrets.Tampered, ", ")+
				" is not what troupe generated for this job (status.generatedSecrets); troupe starts no launcher with these keys. "+
				"Put the data back; or, if the job has not started, delete the Secret and troupe generates it again; "+
				"else delete the job and create it again for new keys"), true
	}
	if meta.FindStatusCondition(prev.Conditions, t) == nil {
		return metav1.Condition{}, false
	}
	return newCondition(t, false, troupev1.ReasonGeneratedSecretIntact, "the generated Secrets hold what troupe wrote"), true
}

// secretLostCondition is the Failed condition of a job whose generated Secret was deleted
// after it started.
func secretLostCondition(obs *Observed, prev *troupev1.JobStatus) (metav1.Condition, bool) {
	if len(obs.Secrets.Lost) == 0 || prev.Phase.Ended() {
		return metav1.Condition{}, false
	}
	return newCondition(troupev1.ConditionFailed, true, troupev1.ReasonGeneratedSecretDeleted,
		"Secret "+strings.Join(obs.Secrets.Lost, ", ")+" that troupe generated for this job was deleted after the job started; "+
			"new keys would not match the ones its pods hold, so the job fails. Delete the job and create it again to rerun it"), true
}

// restartMessage is the Restarting condition's message for the restart being recorded: which
// restart, whether it counts toward maxRestarts, the rule that decided it and the cause, for
// example `attempt 2 of 3: worker pod train-worker-1 failed (Error)` or `restart 3, not counted
// toward maxRestarts (default rule "disruptions"): worker pod train-worker-0 was disrupted (...)`.
func restartMessage(s *Spec, prev *troupev1.JobStatus) string {
	seen := s.Plan.RestartSeen
	d := seen.Decision
	if !d.Counted() {
		who := fmt.Sprintf("default rule %q", troupev1.DisruptionsRule)
		if d.Rule != "" {
			who = fmt.Sprintf("rule %q", d.Rule)
		}
		return fmt.Sprintf("restart %d, not counted toward maxRestarts (%s): %s", prev.Restarts+1, who, seen.Cause) + backoffNote(prev.Restarts+1)
	}
	msg := fmt.Sprintf("attempt %d of %d: ", countedRestarts(prev)+1, s.maxRestarts())
	if d.Rule != "" {
		msg += d.String() + ": "
	}
	return msg + seen.Cause + backoffNote(prev.Restarts+1)
}

// backoffNote tells, in the Restarting condition, how long restart n waits before its attempt
// starts.
func backoffNote(n int32) string {
	if d := restartBackoff(n); d > 0 {
		return fmt.Sprintf("; the next attempt starts %s after this (restart %d backs off)", d, n)
	}
	return ""
}
