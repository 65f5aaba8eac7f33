package engine

import (
	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// Verdict is how the job ended: Succeeded or Failed, from an earlier status or the master's
// verdict of this pass (Observed.Verdict), or "" while it has not ended. obs may be nil: the
// previous status alone then says.
func Verdict(prev *troupev1.JobStatus, obs *Observed) troupev1.JobPhase {
	if prev.Phase == troupev1.JobSucceeded || prev.Phase == troupev1.JobFailed {
		return prev.Phase
	}
	if obs == nil {
		return ""
	}
	return obs.Verdict
}

// CleanPodPolicyOn returns when the clean-pod policy applies (default Finished).
func (s *Spec) CleanPodPolicyOn() troupev1.CleanPodPolicyOn {
	if on := s.RunPolicy.CleanPodPolicyOn; on != nil {
		return *on
	}
	return troupev1.CleanPodPolicyOnFinished
}

// CleanUpDue reports whether the clean-pod policy applies after the job ended with outcome:
// after any end by default, after success only with cleanPodPolicyOn Succeeded (a failed job
// then keeps its pods, for inspection). It is false while the job runs.
func (s *Spec) CleanUpDue(outcome troupev1.JobPhase) bool {
	switch outcome {
	case "":
		return false
	case troupev1.JobSucceeded:
		return true
	default:
		return s.CleanPodPolicyOn() != troupev1.CleanPodPolicyOnSucceeded
	}
}
