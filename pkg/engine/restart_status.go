package engine

import (
	"cmp"
	"fmt"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// What a restart decides and reports, as pure functions of the spec, the observation and the
// previous status (restart.go acts on them).

// restartReason is the reason of the previous Restarting condition, "" when the job never
// restarted.
func restartReason(prev *troupev1.JobStatus) string {
	if c := meta.FindStatusCondition(prev.Conditions, troupev1.ConditionRestarting); c != nil {
		return c.Reason
	}
	return ""
}

// attemptFailure says why the current attempt failed, if it did: its master Job failed (but
// for its deadline, which bounds the run rather than reports a fault), or a worker was lost.
func attemptFailure(s *Spec, obs *Observed, prev *troupev1.JobStatus) (cause string, workerLost bool) {
	if j := obs.MasterJob; j != nil {
		if c := terminalJobCondition(j); c != nil {
			if c.Type == batchv1.JobFailed && c.Reason != batchv1.JobReasonDeadlineExceeded {
				return masterJobFailure(s, j, c, obs.Pods), false
			}
			return "", false
		}
	}
	if why := lostWorker(s, obs, prev); why != "" {
		return why, true
	}
	return "", false
}

// lostWorker says which worker pod of the current attempt was lost while the launcher ran:
// failed, disrupted (evicted, preempted, its node gone), being deleted, or gone or replaced
// since the status recorded it (status.tasks keeps each worker pod's UID). A worker lost before
// the launcher ran is not a loss: its StatefulSet replaces it and the launcher waits for it.
// Workers released (suspended, paused) or beyond the job's replicas (a scale-down) are not
// lost either.
func lostWorker(s *Spec, obs *Observed, prev *troupev1.JobStatus) string {
	if prev.Phase != troupev1.JobRunning || s.Suspended() || s.Paused() {
		return ""
	}
	wanted := map[string]bool{}
	for i := range s.WorkerSets {
		for _, h := range s.WorkerSets[i].WorkerHostnames() {
			wanted[h] = true
		}
	}
	byUID, byName := map[types.UID]*corev1.Pod{}, map[string]*corev1.Pod{}
	for i := range obs.Pods {
		p := &obs.Pods[i]
		if p.Labels[troupev1.LabelRole] == troupev1.RoleWorker && attemptOf(p.Labels) == prev.Restarts {
			byUID[p.UID], byName[p.Name] = p, p
		}
	}
	var lost []string
	recorded := map[types.UID]bool{}
	for _, t := range prev.Tasks {
		if t.Type != troupev1.ReplicaWorker {
			continue
		}
		for _, ref := range t.Status {
			recorded[ref.UID] = true
			if !wanted[ref.Name] {
				continue
			}
			p := byUID[ref.UID]
			switch {
			case p != nil:
				if why := podLost(p); why != "" {
					lost = append(lost, why)
				}
			case byName[ref.Name] != nil:
				lost = append(lost, fmt.Sprintf("worker pod %s was deleted and created again", ref.Name))
			default:
				lost = append(lost, fmt.Sprintf("worker pod %s was deleted", ref.Name))
			}
		}
	}
	for _, p := range byUID {
		if !recorded[p.UID] && wanted[p.Name] {
			if why := podLost(p); why != "" {
				lost = append(lost, why)
			}
		}
	}
	if len(lost) == 0 {
		return ""
	}
	slices.SortFunc(lost, cmp.Compare)
	if len(lost) > 1 {
		return fmt.Sprintf("%s (and %d more)", lost[0], len(lost)-1)
	}
	return lost[0]
}

// podLost says how a pod that exists was lost, or "" while it lives.
func podLost(p *corev1.Pod) string {
	if p.Status.Phase == corev1.PodFailed {
		if p.Status.Reason != "" {
			return fmt.Sprintf("worker pod %s failed (%s)", p.Name, p.Status.Reason)
		}
		return fmt.Sprintf("worker pod %s failed", p.Name)
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			if c.Message != "" {
				return fmt.Sprintf("worker pod %s was disrupted (%s: %s)", p.Name, c.Reason, c.Message)
			}
			return fmt.Sprintf("worker pod %s was disrupted (%s)", p.Name, c.Reason)
		}
	}
	if !p.DeletionTimestamp.IsZero() {
		return fmt.Sprintf("worker pod %s is being deleted", p.Name)
	}
	return ""
}

// restartPhase refines the phase p: a job is Restarting from the failure of an attempt until
// the next attempt's launcher runs, and Failed once a worker was lost with no restart left.
// It also returns status.restarts.
func restartPhase(s *Spec, prev *troupev1.JobStatus, p troupev1.JobPhase) (troupev1.JobPhase, int32) {
	switch {
	case p == troupev1.JobSucceeded || p == troupev1.JobFailed:
		return p, prev.Restarts
	case s.Plan.Restart.Deciding:
		return troupev1.JobRestarting, prev.Restarts + 1
	case s.Plan.RestartSeen.Cause != "" && s.Plan.RestartSeen.WorkerLost:
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

// restartConditions sets the Restarting condition and, for a failure with no restart left, a
// Failed condition that says which attempt failed and why (before terminalCondition, which
// would only quote the master Job). phase is the job's phase as computed.
func restartConditions(s *Spec, obs *Observed, prev *troupev1.JobStatus, phase troupev1.JobPhase, set func(metav1.Condition)) {
	const t = troupev1.ConditionRestarting
	last := meta.FindStatusCondition(prev.Conditions, t)
	switch {
	case s.Plan.Restart.Deciding:
		set(newCondition(t, true, troupev1.ReasonStoppingAttempt,
			fmt.Sprintf("attempt %d of %d: %s", prev.Restarts+1, s.maxRestarts(), s.Plan.RestartSeen.Cause)))
	case last == nil:
	case last.Reason == troupev1.ReasonStoppingAttempt && s.Plan.RestartSeen.Clean && phase != troupev1.JobFailed:
		set(newCondition(t, true, troupev1.ReasonStartingAttempt, last.Message))
	case last.Reason == troupev1.ReasonStartingAttempt && phase == troupev1.JobRunning:
		set(newCondition(t, false, troupev1.ReasonAttemptRunning, last.Message))
	case last.Status == metav1.ConditionTrue && (phase == troupev1.JobSucceeded || phase == troupev1.JobFailed):
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
	left := fmt.Sprintf(" in attempt %d; no restart left (runPolicy.failurePolicy.maxRestarts: %d)", s.Plan.Restart.Attempt, s.maxRestarts())
	if s.Plan.RestartSeen.WorkerLost {
		set(newCondition(troupev1.ConditionFailed, true, troupev1.ReasonWorkerFailed, s.Plan.RestartSeen.Cause+left))
		return
	}
	if c, ok := terminalCondition(obs.MasterJob, obs.Pods, phase); ok {
		c.Message += left
		set(c)
	}
}
