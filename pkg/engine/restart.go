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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// Whole-job restarts (runPolicy.failurePolicy; docs/failure-handling.md). An MPI run cannot
// lose a rank and go on, so when a worker pod is lost while the launcher runs, or the launcher
// Job fails, the job is restarted as a whole, up to maxRestarts times. Every step is derived
// from the API, never from the operator's memory, so an operator restarted at any point
// carries on where the last one stopped:
//
//   - status.restarts is the current attempt. Every pod of a job with a failure policy carries
//     it in its label troupe.dev/restart-attempt (the master Job in its pod template), so the
//     pods of an earlier attempt are told from the current one's by label alone.
//   - A failure of the current attempt is first recorded, and nothing else done: one status
//     write sets restarts to the next attempt and the Restarting condition to StoppingAttempt.
//     The write carries the job's resourceVersion, so a reconcile from a stale copy cannot
//     count the same failure twice.
//   - While the condition says StoppingAttempt, the worker StatefulSets are held at zero with
//     the new attempt's template, the old master Job and its pods are deleted, and no master is
//     created. Once no pod of an earlier attempt is left and every StatefulSet's controller
//     reports zero pods for its latest spec, a status write says StartingAttempt; only the
//     next reconcile creates pods, so a rank of one attempt never meets a rank of the next.
//   - StartingAttempt creates the workers and a new master Job as for a new job (the
//     Service, hostfile and credentials stayed); once its launcher runs, the condition turns
//     False with reason AttemptRunning.

// Restarts back off: restart n starts its attempt no sooner than restartBackoff(n) after the
// failure was recorded (the Restarting condition's transition to StoppingAttempt), however soon
// the earlier attempt is gone. The first restart waits for nothing (a lost node or a preempted
// worker is replaced at once); after that the wait doubles from 10 s to 6 min, as the Job
// controller's between a pod's retries, so a job whose every attempt fails at once costs its
// O(workers) deletes and creates a few times an hour, not every few seconds.
const (
	restartBackoffBase = 10 * time.Second
	restartBackoffMax  = 6 * time.Minute
)

// restartBackoff is how long restart n (status.restarts once it is recorded) waits.
func restartBackoff(n int32) time.Duration {
	if n <= 1 {
		return 0
	}
	d := restartBackoffBase
	for i := int32(2); i < n && d < restartBackoffMax; i++ {
		d *= 2
	}
	return min(d, restartBackoffMax)
}

// backoffLeft is how long the attempt being stopped (prev says StoppingAttempt) still waits at
// now.
func backoffLeft(prev *troupev1.JobStatus, now time.Time) time.Duration {
	c := meta.FindStatusCondition(prev.Conditions, troupev1.ConditionRestarting)
	if c == nil {
		return 0
	}
	return max(restartBackoff(prev.Restarts)-now.Sub(c.LastTransitionTime.Time), 0)
}

// workerReplaceDelay is how long a failed worker Job a rule ignores stays before it is made
// again: its own pods were retried with the Job controller's backoff, which a new Job starts
// over, so a worker that fails at once (backoffLimit 0) is made again a few times a minute at
// most, not as fast as its pods start.
const workerReplaceDelay = 10 * time.Second

// replaceLeft is how long the failed worker Job j still stays at now.
func replaceLeft(j *batchv1.Job, now time.Time) time.Duration {
	c := terminalJobCondition(j)
	if c == nil || c.LastTransitionTime.IsZero() {
		return 0
	}
	return max(workerReplaceDelay-now.Sub(c.LastTransitionTime.Time), 0)
}

// maxRestarts is runPolicy.failurePolicy.maxRestarts (0 without a failure policy).
func (s *Spec) maxRestarts() int32 {
	if fp := s.RunPolicy.FailurePolicy; fp != nil {
		return fp.MaxRestarts
	}
	return 0
}

// planRestart decides the restart state from the status and the observation: the attempt,
// whether what is left of earlier attempts must go first (Stopping), and whether a failure of
// the current attempt is to be recorded (Deciding). Jobs without a failure policy get the zero
// plan, but for a worker in a crash loop (crashLoopingWorker), which fails them.
func planRestart(s *Spec, obs *Observed, prev *troupev1.JobStatus) restartPlan {
	var p restartPlan
	if prev.Phase.Ended() {
		p.state.Attempt = prev.Restarts
		p.launcherToStop = launcherToStop(obs, prev)
		return p
	}
	if s.RunPolicy.FailurePolicy == nil {
		p.seen = failureWithoutRestarts(s, obs)
		return p
	}
	p.state.Attempt = prev.Restarts
	stale := false
	if j := obs.MasterJob; j != nil && attemptOf(j.Spec.Template.Labels) != p.state.Attempt {
		stale = true
		p.staleMasterJob = j
	}
	for _, pod := range obs.StalePods {
		stale = true
		if pod.Labels[troupev1.LabelRole] == troupev1.RoleMaster && pod.DeletionTimestamp.IsZero() {
			p.staleMasterPods = append(p.staleMasterPods, pod)
		}
	}
	p.seen.Clean = !stale && statefulSetsAtAttempt(s, obs, p.state.Attempt)
	p.state.Stopping = stale || restartReason(prev) == troupev1.ReasonStoppingAttempt
	if restartReason(prev) == troupev1.ReasonStoppingAttempt {
		p.state.BackoffLeft = backoffLeft(prev, obs.Now)
	}
	if p.state.Stopping || !s.restartsEnabled() {
		return p
	}
	clean := p.seen.Clean
	p.seen = attemptFailure(s, obs, prev)
	p.seen.Clean = clean
	if p.seen.Cause == "" {
		return p
	}
	p.seen.Decision = decideFailure(s.RunPolicy.FailurePolicy, p.seen.Failure, s.replicaMainContainer(p.seen.Failure.Replica))
	if s.ElasticWorkers && p.seen.Decision.Rule == "" {
		// Elastic workers come and go: what no rule names is handled as without a policy.
		p.seen = failureWithoutRestarts(s, obs)
		p.seen.Clean = clean
		return p
	}
	switch d := p.seen.Decision; {
	case d.Action == troupev1.IgnoreAction && p.seen.WorkerLost:
		// The worker is replaced and the job goes on: a failed worker Job is made again, a
		// StatefulSet replaces its pod by itself.
		p.replaceWorkerJob = failedWorkerJobOf(s, obs) // nil for a StatefulSet's
		if left := replaceLeft(p.replaceWorkerJob, obs.Now); left > 0 {
			p.replaceWorkerJob, p.state.BackoffLeft = nil, left
		}
		p.seen = RestartObservation{Clean: clean}
	case d.Action == troupev1.IgnoreAction && p.seen.MasterCrashLoop:
		// Its containers go on restarting in place, as the rule asks.
		p.seen = RestartObservation{Clean: clean}
	case d.Action == troupev1.RestartJobAndIgnoreMaxRestartsAction:
		p.state.Deciding = true
	case d.Action == troupev1.RestartJobAction:
		p.state.Deciding = countedRestarts(prev) < s.maxRestarts()
	}
	return p
}

// failureWithoutRestarts is what fails a job that does not restart: a worker set's failed Job,
// or a worker in a crash loop (runPolicy.workerRestartLimit). A lost worker pod does not: its
// StatefulSet replaces it.
func failureWithoutRestarts(s *Spec, obs *Observed) RestartObservation {
	if why, f := failedWorkerJob(s, obs); why != "" {
		return RestartObservation{Cause: why, WorkerLost: true, Failure: f}
	}
	if why, f := crashLoopingWorker(s, obs); why != "" {
		return RestartObservation{Cause: why, WorkerLost: true, CrashLoop: true, Failure: f}
	}
	return RestartObservation{}
}

// statefulSetsAtAttempt says every worker StatefulSet has the current attempt's template and
// its controller, having seen that spec, counts no pod: no pod of an earlier attempt can exist
// that the cache has not shown yet.
func statefulSetsAtAttempt(s *Spec, obs *Observed, attempt int32) bool {
	for i := range s.WorkerSets {
		for _, j := range obs.WorkerJobs[s.WorkerSets[i].Name] {
			if attemptOf(j.Spec.Template.Labels) != attempt || j.Status.Active > 0 {
				return false
			}
		}
		sts := obs.StatefulSets[s.WorkerSets[i].Name]
		if sts == nil {
			continue
		}
		if attemptOf(sts.Spec.Template.Labels) != attempt ||
			!childSynced(sts) || sts.Status.Replicas > 0 {
			return false
		}
	}
	return true
}

// launcherToStop is the master Job to suspend of a job that failed because a worker was lost
// with no restart left, or nil. The Job stays, with the pods that ended before, for inspection.
func launcherToStop(obs *Observed, prev *troupev1.JobStatus) *batchv1.Job {
	c := meta.FindStatusCondition(prev.Conditions, troupev1.ConditionFailed)
	j := obs.MasterJob
	stopped := []string{troupev1.ReasonWorkerFailed, troupev1.ReasonWorkerCrashLooping, batchv1.JobReasonBackoffLimitExceeded, troupev1.ReasonFailJobRule}
	if c == nil || !slices.Contains(stopped, c.Reason) || j == nil || terminalJobCondition(j) != nil ||
		ptr.Deref(j.Spec.Suspend, false) || !j.DeletionTimestamp.IsZero() {
		return nil
	}
	return j
}

// masterJobFailure says why a master Job failed, for a restart's cause: its reason, its
// message and what the launcher said.
func masterJobFailure(s *Spec, j *batchv1.Job, c *batchv1.JobCondition, masterPods []*corev1.Pod, workers []setCause) string {
	msg := fmt.Sprintf("%s Job %s failed (%s", s.masterType(), j.Name, c.Reason)
	if c.Message != "" {
		msg += ": " + c.Message
	}
	msg += ")"
	if why := launcherSaid(masterPods); why != "" {
		msg += "; " + why
	}
	if len(workers) > 0 {
		msg += "; workers: " + joinCauses(workers)
	}
	return msg
}

// What a restart decides and reports, as pure functions of the spec, the observation and the
// previous status (decide gathers them, carryOut acts on them).

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
func attemptFailure(s *Spec, obs *Observed, prev *troupev1.JobStatus) RestartObservation {
	if j := obs.MasterJob; j != nil {
		if c := terminalJobCondition(j); c != nil {
			if c.Type == batchv1.JobFailed && c.Reason != batchv1.JobReasonDeadlineExceeded {
				return RestartObservation{Cause: masterJobFailure(s, j, c, obs.MasterPods, workerCauses(s, obs)),
					Failure: failureOfPods(string(s.masterType()), obs.MasterPods)}
			}
			return RestartObservation{}
		}
	}
	if why, f := lostMaster(s, obs); why != "" {
		return RestartObservation{Cause: why, Failure: f}
	}
	if why, f := crashLoopingMaster(s, obs); why != "" {
		return RestartObservation{Cause: why, MasterCrashLoop: true, Failure: f}
	}
	if why, f := failedWorkerJob(s, obs); why != "" {
		return RestartObservation{Cause: why, WorkerLost: true, Failure: f}
	}
	if why, f := lostWorker(s, obs, prev); why != "" {
		return RestartObservation{Cause: why, WorkerLost: true, Failure: f}
	}
	if why, f := crashLoopingWorker(s, obs); why != "" {
		return RestartObservation{Cause: why, WorkerLost: true, CrashLoop: true, Failure: f}
	}
	if why, f := stalledFailure(s.RunPolicy.ProgressDeadlineSeconds, prev, obs.Now); why != "" {
		return RestartObservation{Cause: why, Failure: f}
	}
	return RestartObservation{}
}

// failureOfPods is the Failure of the last of pods that failed (by creation), or a Failure
// of reason Error when none did (its pods were deleted with their Job).
func failureOfPods(replica string, pods []*corev1.Pod) Failure {
	var last *corev1.Pod
	for _, p := range pods {
		if p.Status.Phase == corev1.PodFailed && (last == nil || last.CreationTimestamp.Before(&p.CreationTimestamp)) {
			last = p
		}
	}
	if last == nil {
		return Failure{Replica: replica, Reason: troupev1.FailureError}
	}
	return podFailure(replica, last)
}

// lostWorker says which worker pod of the current attempt was lost while the launcher ran:
// failed, disrupted (evicted, preempted, its node gone), being deleted, or gone or replaced
// since the status recorded it (status.tasks keeps each worker pod's UID). A worker lost before
// the launcher ran is not a loss: its StatefulSet replaces it and the launcher waits for it.
// Workers released (suspended, paused) or beyond the job's replicas (a scale-down) are not
// lost either.
func lostWorker(s *Spec, obs *Observed, prev *troupev1.JobStatus) (string, Failure) {
	if prev.Phase != troupev1.JobRunning || s.Suspended() || s.Paused() {
		return "", Failure{}
	}
	wanted := map[string]string{} // hostname: its worker set
	for i := range s.WorkerSets {
		for _, h := range s.WorkerSets[i].WorkerHostnames() {
			wanted[h] = s.WorkerSets[i].Name
		}
	}
	byUID, byName := map[types.UID]*corev1.Pod{}, map[string]*corev1.Pod{}
	for _, pods := range obs.AttemptWorkerPods {
		for _, p := range pods {
			byUID[p.UID], byName[podHostname(p)] = p, p
		}
	}
	var lost []finding
	recorded := map[types.UID]bool{}
	for _, t := range prev.Tasks {
		if t.Type != troupev1.ReplicaWorker {
			continue
		}
		for _, ref := range t.Status {
			recorded[ref.UID] = true
			p := byUID[ref.UID]
			// A pod is wanted by its hostname; a StatefulSet's pod, named so, also once gone.
			if wanted[ref.Name] == "" && (p == nil || wanted[podHostname(p)] == "") {
				continue
			}
			switch {
			case p != nil:
				if why, f := lostPod(obs, p); why != "" {
					lost = append(lost, finding{why, f})
				}
			case byName[ref.Name] != nil:
				lost = append(lost, finding{fmt.Sprintf("worker pod %s was deleted and created again", ref.Name),
					goneWorkerFailure(obs, ref.UID, setOfPod(byName[ref.Name]))})
			default:
				lost = append(lost, finding{fmt.Sprintf("worker pod %s was deleted", ref.Name), goneWorkerFailure(obs, ref.UID, wanted[ref.Name])})
			}
		}
	}
	for _, p := range byUID {
		if !recorded[p.UID] && wanted[podHostname(p)] != "" {
			if why, f := lostPod(obs, p); why != "" {
				lost = append(lost, finding{why, f})
			}
		}
	}
	return firstFinding(lost)
}

// setOfPod is the worker set a worker pod belongs to, by its label.
func setOfPod(p *corev1.Pod) string { return p.Labels[troupev1.LabelWorkerSet] }

// goneWorkerFailure is the Failure of a worker pod that is gone: the reason its last state
// said when the watch saw it deleted (a drain's eviction), else Deleted.
func goneWorkerFailure(obs *Observed, uid types.UID, set string) Failure {
	reason, ok := obs.GoneWorkers[uid]
	if !ok {
		reason = troupev1.FailureDeleted
	}
	return Failure{Replica: set, Reason: reason}
}

// failedWorkerJob says which worker Job (of a set that runs to completion) failed in the current
// attempt, and why: its pod failed more often than its backoffLimit allows, with the cause its
// pods share. "" when none did, or the workers are released.
func failedWorkerJob(s *Spec, obs *Observed) (string, Failure) {
	j, ws := failedWorkerJobOf(s, obs), ""
	if j == nil {
		return "", Failure{}
	}
	ws = j.Labels[troupev1.LabelWorkerSet]
	c := terminalJobCondition(j)
	why := fmt.Sprintf("worker Job %s failed (%s", j.Name, c.Reason)
	if c.Message != "" {
		why += ": " + c.Message
	}
	why += ")"
	var pods []*corev1.Pod
	for _, p := range obs.AttemptWorkerPods[ws] {
		if metav1.IsControlledBy(p, j) {
			pods = append(pods, p)
		}
	}
	slices.SortFunc(pods, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	if cause, ok := causeOfSet(ws, pods); ok {
		why += "; " + cause.String()
	}
	return why, failureOfPods(ws, pods)
}

// failedWorkerJobOf is the first worker Job (by name, set by set) of the current attempt that
// failed, or nil; none while the workers are released.
func failedWorkerJobOf(s *Spec, obs *Observed) *batchv1.Job {
	if s.Suspended() || s.Paused() {
		return nil
	}
	for i := range s.WorkerSets {
		ws := &s.WorkerSets[i]
		jobs := slices.Clone(obs.WorkerJobs[ws.Name])
		slices.SortFunc(jobs, func(a, b *batchv1.Job) int { return strings.Compare(a.Name, b.Name) })
		for _, j := range jobs {
			if attemptOf(j.Spec.Template.Labels) != obs.Attempt {
				continue
			}
			if c := terminalJobCondition(j); c != nil && c.Type == batchv1.JobFailed {
				return j
			}
		}
	}
	return nil
}

// lostPod says how a worker pod that exists was lost, and its Failure; "" while it lives. A
// lost node comes first: nothing of its pods is updated any more.
func lostPod(obs *Observed, p *corev1.Pod) (string, Failure) {
	if l, ok := obs.onLostNode(p); ok {
		return fmt.Sprintf("worker pod %s: %s", p.Name, l), Failure{Replica: setOfPod(p), Reason: troupev1.FailureNodeLost}
	}
	if why := podLost(p); why != "" {
		return why, podFailure(setOfPod(p), p)
	}
	return "", Failure{}
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

// lostMaster says the master's pod of the current attempt is on a lost node: the master Job
// does not fail by itself (its pod neither ends nor goes), so the attempt has failed.
func lostMaster(s *Spec, obs *Observed) (string, Failure) {
	for _, p := range obs.MasterPods {
		if attemptOf(p.Labels) != obs.Attempt {
			continue
		}
		if l, ok := obs.onLostNode(p); ok {
			return fmt.Sprintf("%s pod %s: %s", s.masterType(), p.Name, l),
				Failure{Replica: string(s.masterType()), Reason: troupev1.FailureNodeLost}
		}
	}
	return "", Failure{}
}
