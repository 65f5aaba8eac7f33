package engine

import (
	"time"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

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

// ReadyWorkers lists, per worker set, the hostnames of its pods that are Ready, in ordinal
// order (the value of Plan.ReadyWorkers).
func ReadyWorkers(s *Spec, obs *Observed) map[string][]string {
	out := map[string][]string{}
	for i := range s.WorkerSets {
		ws := &s.WorkerSets[i]
		ready := map[string]bool{}
		for _, p := range obs.WorkerPods[ws.Name] {
			if p.DeletionTimestamp.IsZero() && podReady(p) {
				ready[podHostname(p)] = true
			}
		}
		for _, h := range ws.WorkerHostnames() {
			if ready[h] {
				out[ws.Name] = append(out[ws.Name], h)
			}
		}
	}
	return out
}
