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
	for _, hosts := range ReadyWorkers(s, obs) {
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

// masterInitFailure is the termination message of a master pod's init container that failed,
// for example a launcher whose wait for its workers timed out and names the hosts missing.
func masterInitFailure(masterPods []*corev1.Pod) string {
	for _, p := range masterPods {
		for _, cs := range p.Status.InitContainerStatuses {
			if t := cs.State.Terminated; t != nil && t.ExitCode != 0 && t.Message != "" {
				return fmt.Sprintf("init container %s: %s", cs.Name, strings.TrimSpace(t.Message))
			}
		}
	}
	return ""
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

// launcherSaid is what the master's pods said of its failure: an init container's termination
// message (a launcher's wait that timed out names the hosts missing), else the exit of the last
// one that failed.
func launcherSaid(masterPods []*corev1.Pod) string {
	if why := masterInitFailure(masterPods); why != "" {
		return why
	}
	return masterExitMessage(masterPods)
}

// masterExitMessage is why the last master pod that failed ended: its failed container's
// termination message (the launcher's own, or, with terminationMessagePolicy
// FallbackToLogsOnError, the end of its log: mpirun's "exited with non-zero status" summary)
// with its exit code, so that the Failed condition says what the launcher said.
func masterExitMessage(masterPods []*corev1.Pod) string {
	var last *corev1.Pod
	for _, p := range masterPods {
		if p.Status.Phase != corev1.PodFailed {
			continue
		}
		if last == nil || last.CreationTimestamp.Before(&p.CreationTimestamp) {
			last = p
		}
	}
	if last == nil {
		return ""
	}
	for _, cs := range last.Status.ContainerStatuses {
		t := cs.State.Terminated
		if t == nil || t.ExitCode == 0 {
			continue
		}
		msg := strings.TrimSpace(t.Message)
		if len(msg) > maxExitMessage {
			msg = "..." + msg[len(msg)-maxExitMessage:]
		}
		if msg == "" {
			return fmt.Sprintf("container %s of pod %s exited %d", cs.Name, last.Name, t.ExitCode)
		}
		return fmt.Sprintf("container %s of pod %s exited %d: %s", cs.Name, last.Name, t.ExitCode, msg)
	}
	return ""
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
