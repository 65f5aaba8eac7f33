package engine

import (
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// The run modes (debug, pause, the overrides after a pause; kinds.md, "Run modes"): their phase
// and condition, and what a pause or resume decides (planPause, planMasterPods) and deletes.

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

// WasPaused reports whether a job's status says it has been paused: its Paused condition is
// True, or says it resumed.
func WasPaused(st *troupev1.JobStatus) bool {
	c := meta.FindStatusCondition(st.Conditions, troupev1.ConditionPaused)
	return c != nil && (c.Status == metav1.ConditionTrue || c.Reason == troupev1.ReasonResumed)
}

// pausePlan is what a pass decides about pause before it observes the children: whether the
// pause asked is in force, and the master Job it deletes for it (nil: none to delete).
type pausePlan struct {
	pause        bool
	deleteMaster *batchv1.Job
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

// liveMasterJob is the observed master Job unless it is being deleted: what planPause reads.
func liveMasterJob(obs *Observed) *batchv1.Job {
	if j := obs.MasterJob; j != nil && j.DeletionTimestamp.IsZero() {
		return j
	}
	return nil
}

// masterPodsPlan is what a pass decides about the master's pods once it has observed them:
// those to delete now (a paused job's, rather than left to the garbage collector), and whether
// a master Job to be created waits: for the previous one's pods to be gone, so that two master
// pods never share the master's host name, or for the workers to be Ready.
type masterPodsPlan struct {
	delete     []*corev1.Pod
	holdMaster bool
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
	ready := ReadyWorkers(s, obs)
	for i := range s.WorkerSets {
		if int32(len(ready[s.WorkerSets[i].Name])) < s.WorkerSets[i].Replicas {
			return false
		}
	}
	return true
}
