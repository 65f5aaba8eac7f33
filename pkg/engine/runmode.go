package engine

import (
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// The run modes (debug, pause, the overrides after a pause; kinds.md, "Run modes"): what a
// pause or resume decides (planPause, planMasterPods). Their phase is status.go's
// (runModePhase), their condition conditions.go's (pausedCondition).

// WasPaused reports whether a job's status says it has been paused: its Paused condition is
// True, or says it resumed.
func wasPaused(st *troupev1.JobStatus) bool {
	c := meta.FindStatusCondition(st.Conditions, troupev1.ConditionPaused)
	return c != nil && (c.Status == metav1.ConditionTrue || c.Reason == troupev1.ReasonResumed)
}

// planPause decides pause from the spec, the previous status and the job's master Job as
// observed (nil when it does not exist, is not the job's or is being deleted). A finished job is never
// paused: the master Job that recorded its end stays, even if pause is asked in the same moment
// it ended.
func planPause(s *Spec, prev *troupev1.JobStatus, master *batchv1.Job) pausePlan {
	switch {
	case !s.RunMode.Pause:
		return pausePlan{}
	case prev.Phase.Ended():
		return pausePlan{}
	case master == nil:
		return pausePlan{pause: true}
	case terminalJobCondition(master) != nil:
		return pausePlan{}
	}
	return pausePlan{pause: true, deleteMaster: master}
}

// planMasterPods decides it from the run mode and the observation.
func planMasterPods(s *Spec, obs *Observed) masterPodsPlan {
	switch {
	case s.Paused():
		return masterPodsPlan{delete: liveMasterPods(obs)}
	case obs.MasterJob != nil:
		return masterPodsPlan{}
	}
	// Terminating master pods count too; a launcher created once its workers are Ready
	// (Master.AfterWorkersReady) waits for them.
	return masterPodsPlan{holdMaster: len(obs.MasterPods) > 0 || (s.Master.AfterWorkersReady && !allWorkersReady(s, obs))}
}

// allWorkersReady says every pod of every worker set is Ready.
func allWorkersReady(s *Spec, obs *Observed) bool {
	ready := readyWorkers(s, obs)
	for i := range s.WorkerSets {
		if int32(len(ready[s.WorkerSets[i].Name])) < s.WorkerSets[i].Replicas {
			return false
		}
	}
	return true
}
