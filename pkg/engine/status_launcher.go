package engine

import (
	"fmt"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

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
	pod, wait := currentMasterPod(obs.Pods), s.launcherWaitContainer()
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

// quoted is ": msg" with msg cut to maxExitMessage bytes from its start (troupe-agent wait
// puts its summary first), or nothing when msg is empty.
func quoted(msg string) string {
	msg = strings.TrimSpace(msg)
	if msg == "" {
		return ""
	}
	if len(msg) > maxExitMessage {
		msg = msg[:maxExitMessage] + "..."
	}
	return ": " + msg
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

// currentMasterPod is the newest master pod that is not being deleted: the launcher's current
// attempt (a Job that retries keeps the failed pods of earlier ones).
func currentMasterPod(pods []corev1.Pod) *corev1.Pod {
	var newest *corev1.Pod
	for i := range pods {
		p := &pods[i]
		if p.Labels[troupev1.LabelRole] != troupev1.RoleMaster || !p.DeletionTimestamp.IsZero() {
			continue
		}
		if newest == nil || newest.CreationTimestamp.Before(&p.CreationTimestamp) ||
			(newest.CreationTimestamp.Equal(&p.CreationTimestamp) && newest.Name < p.Name) {
			newest = p
		}
	}
	return newest
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
