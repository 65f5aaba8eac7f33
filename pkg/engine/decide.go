package engine

import (
	"fmt"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// decision is what a pass decides once it has observed the job (decide): the plan, the
// observation the rest of the pass reads, and the writes that carry the plan out before any
// child is created or updated (carryOut).
type decision struct {
	plan Plan
	// obs is the observation as the plan reads it: without the master Job when a restart sets
	// it aside (an earlier attempt's, or one whose failure is the attempt's, not the job's).
	obs *Observed
	// suspendLauncher is the master Job of a job failed for good by a lost worker: suspended so
	// that its launcher does not run on against a broken group.
	suspendLauncher *batchv1.Job
	// deleteMasterJob is the master Job of an earlier attempt or of a job that pauses
	// (deleteMasterWhy says which); deletePods are the master pods of earlier attempts and a
	// paused job's, deleted rather than left to the garbage collector.
	deleteMasterJob *batchv1.Job
	deleteMasterWhy string
	deletePods      []*corev1.Pod
	// deleteWorkerJobs are worker Jobs to delete: of indexes a scaled-down set no longer asks
	// for (Observed.SurplusWorkerJobs), and a failed one a failure policy rule ignores, made
	// again as a missing child.
	deleteWorkerJobs []*batchv1.Job
}

// decide makes, once, every decision of a pass: the pause (planPause), the restart
// (planRestart), the master's pods (planMasterPods), the verdict, the ready workers and whether
// missing children may be created. It is a pure function of the spec the adapter described,
// the observation and the previous status; the plan it returns goes into copies of that spec
// (withPlan).
func decide(described *Spec, obs *Observed, prev *troupev1.JobStatus) decision {
	pause := planPause(described, prev, liveMasterJob(obs))
	s := described.withPlan(Plan{Pause: pause.pause, WasPaused: WasPaused(prev)})
	d := decision{plan: s.Plan, obs: obs, deleteMasterJob: pause.deleteMaster, deleteMasterWhy: "pausing"}
	if pause.pause {
		d.obs = obs.withoutMaster() // a paused job has no master Job: it is deleted, or going
	}
	restart := planRestart(s, d.obs, prev)
	d.suspendLauncher, d.deletePods = restart.launcherToStop, restart.staleMasterPods
	d.deleteWorkerJobs = obs.SurplusWorkerJobs
	if j := restart.replaceWorkerJob; j != nil {
		d.deleteWorkerJobs = append(slices.Clone(d.deleteWorkerJobs), j)
	}
	if j := restart.staleMasterJob; j != nil && j.DeletionTimestamp.IsZero() {
		d.deleteMasterJob, d.deleteMasterWhy = j, fmt.Sprintf("restart: the master Job of attempt %d", attemptOf(j.Spec.Template.Labels))
	}
	if restart.forgetsMaster() && d.obs.MasterJob != nil {
		d.obs = d.obs.withoutMaster()
	}
	pods := planMasterPods(s, d.obs)
	d.deletePods = withNew(d.deletePods, pods.delete) // a paused job's master pods
	d.plan.Restart, d.plan.RestartSeen = restart.state, restart.seen
	d.plan.HoldMaster = pods.holdMaster
	d.plan.ReadyWorkers = ReadyWorkers(s, d.obs)
	d.plan.Verdict = verdict(prev, d.obs)
	d.plan.HoldCreates = holdCreates(d.plan.Ended(), d.obs)
	d.plan.CompletedWorkers = completedWorkers(s, d.obs)
	d.plan.Expired = d.plan.Ended() && ttlExpired(s, prev, obs.Now)
	if s.CleanUpDue(d.plan.Verdict) && s.CleanPodPolicy() == troupev1.CleanPodPolicyAll {
		d.deletePods = withNew(d.deletePods, liveMasterPods(d.obs)) // the ended master's
	}
	return d
}

// withNew is pods with those of more it does not hold yet (one pod may be an earlier attempt's
// and a paused job's).
func withNew(pods, more []*corev1.Pod) []*corev1.Pod {
	for _, p := range more {
		if !slices.Contains(pods, p) {
			pods = append(pods, p)
		}
	}
	return pods
}

// verdict is how the job ended: Succeeded or Failed, from an earlier status or the master's
// verdict of this pass (Observed.Verdict), or "" while it has not ended (Plan.Verdict).
func verdict(prev *troupev1.JobStatus, obs *Observed) troupev1.JobPhase {
	if prev.Phase.Ended() {
		return prev.Phase
	}
	return obs.Verdict
}

// holdCreates is the plan's word on creating missing children: held back once the job has
// ended (a finished job is never started again), while a name conflict or a Secret problem
// exists (a job with half its children would hold resources without being able to run), and
// while a generated Secret cannot be trusted (a launcher would start with foreign keys).
func holdCreates(ended bool, obs *Observed) bool {
	return ended || len(obs.Conflicts) > 0 || len(obs.SecretProblems) > 0 || obs.Secrets.blocksCreation()
}

// WorkersReleased reports whether the worker sets should be scaled to zero: the job is
// suspended, paused or stopping an attempt to restart, or it has ended (outcome) and its
// clean-pod policy, not None, is due.
func WorkersReleased(s *Spec, outcome troupev1.JobPhase) bool {
	if outcome != "" {
		return s.CleanPodPolicy() != troupev1.CleanPodPolicyNone && s.CleanUpDue(outcome)
	}
	return s.Suspended() || s.Paused() || s.Plan.Restart.Stopping
}

// ttlExpired says a finished job (prev records when it completed) is past its
// ttlSecondsAfterFinished at now.
func ttlExpired(s *Spec, prev *troupev1.JobStatus, now time.Time) bool {
	expiry, ok := ttlExpiry(s, prev)
	return ok && !now.Before(expiry)
}

// ttlExpiry is when a finished job (st records when it completed) is deleted for its
// ttlSecondsAfterFinished; ok is false for a job without a TTL or not finished.
func ttlExpiry(s *Spec, st *troupev1.JobStatus) (expiry time.Time, ok bool) {
	ttl := s.RunPolicy.TTLSecondsAfterFinished
	if ttl == nil || st.CompletionTime == nil {
		return time.Time{}, false
	}
	return st.CompletionTime.Add(time.Duration(*ttl) * time.Second), true
}
