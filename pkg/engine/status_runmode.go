package engine

import (
	"cmp"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// Status of the run modes and the status fields of the seeds (T9k's tasks, aggregate,
// Completed and Paused; chainer-operator's succeeded and Complete), each a pure function of
// the spec, the observed children and the previous status.

// runModePhase refines the phase p that phase() computed: a paused job is Paused, and a job
// that was paused is Resuming until its master runs again (or it is suspended). Terminal
// phases stay.
func runModePhase(s *Spec, prev *troupev1.JobStatus, p troupev1.JobPhase) troupev1.JobPhase {
	switch {
	case p == troupev1.JobSucceeded || p == troupev1.JobFailed:
		return p
	case s.Paused():
		return troupev1.JobPaused
	case (prev.Phase == troupev1.JobPaused || prev.Phase == troupev1.JobResuming) && p == troupev1.JobPending:
		return troupev1.JobResuming
	}
	return p
}

// seedStatus sets the Paused, Completed and Complete conditions, succeeded, tasks and
// aggregate of st, whose phase is already computed.
func seedStatus(s *Spec, obs *Observed, st *troupev1.JobStatus, finished, released bool, set func(metav1.Condition)) {
	set(pausedCondition(s, obs, st.Conditions))
	set(completedCondition(st.Phase, st.Conditions))
	st.Succeeded = 0
	if st.Phase == troupev1.JobSucceeded {
		st.Succeeded = 1
		if !meta.IsStatusConditionTrue(st.Conditions, troupev1.ConditionComplete) {
			set(newCondition(troupev1.ConditionComplete, true, troupev1.ReasonMasterSucceeded, "the master completed successfully"))
		}
	}
	st.Tasks = tasks(s, obs.Pods)
	agg := aggregate(s, obs, finished, released)
	st.Aggregate = &agg
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

// tasks lists the job's pods by replica type (the master's first, then the workers'), each
// type's pods by name, with the type's container restarts.
func tasks(s *Spec, pods []corev1.Pod) []troupev1.TaskStatus {
	master := troupev1.TaskStatus{Type: s.masterType()}
	worker := troupev1.TaskStatus{Type: troupev1.ReplicaWorker}
	for i := range pods {
		p := &pods[i]
		task := &worker
		switch p.Labels[troupev1.LabelRole] {
		case troupev1.RoleMaster:
			task = &master
		case troupev1.RoleWorker:
		default:
			continue
		}
		task.Status = append(task.Status, troupev1.PodReference{Name: p.Name, UID: p.UID, Phase: p.Status.Phase})
		for _, cs := range p.Status.ContainerStatuses {
			task.RestartCount += cs.RestartCount
		}
	}
	out := []troupev1.TaskStatus{master}
	if len(s.WorkerSets) > 0 {
		out = append(out, worker)
	}
	for i := range out {
		limit := troupev1.MaxPodsPerJob
		if out[i].Type != troupev1.ReplicaWorker {
			limit = troupev1.MaxMasterTaskPods
		}
		out[i].Status, out[i].Unlisted = boundTaskPods(out[i].Status, limit)
	}
	return out
}

// boundTaskPods keeps at most limit of a type's pods, those not ended first (a
// master Job's failed attempts, a worker's replaced pods), sorted by name, and counts the rest:
// status.tasks must not grow the job past etcd's object limit, whatever number of ended pods
// lingers.
func boundTaskPods(refs []troupev1.PodReference, limit int) ([]troupev1.PodReference, int32) {
	podEnded := func(r troupev1.PodReference) bool {
		return r.Phase == corev1.PodSucceeded || r.Phase == corev1.PodFailed
	}
	var unlisted int32
	if len(refs) > limit {
		slices.SortFunc(refs, func(a, b troupev1.PodReference) int {
			if ea, eb := podEnded(a), podEnded(b); ea != eb {
				if ea {
					return 1
				}
				return -1
			}
			return cmp.Compare(a.Name, b.Name)
		})
		unlisted = int32(len(refs) - limit)
		refs = refs[:limit]
	}
	slices.SortFunc(refs, func(a, b troupev1.PodReference) int { return cmp.Compare(a.Name, b.Name) })
	return refs, unlisted
}

// aggregate counts the job's replicas by state: every observed pod once (a pod being deleted
// as deleted, whatever its phase said), and as creating the replicas wanted now that have no
// live pod yet.
func aggregate(s *Spec, obs *Observed, finished, released bool) troupev1.Aggregate {
	var a troupev1.Aggregate
	var liveMaster, liveWorkers int32
	for i := range obs.Pods {
		p := &obs.Pods[i]
		ended := p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
		switch {
		case !p.DeletionTimestamp.IsZero() && !ended:
			a.Deleted++
			continue
		case p.Status.Phase == corev1.PodPending:
			a.Pending++
		case p.Status.Phase == corev1.PodRunning:
			a.Running++
		case p.Status.Phase == corev1.PodSucceeded:
			a.Succeeded++
		case p.Status.Phase == corev1.PodFailed:
			a.Failed++
		default:
			a.Unknown++
		}
		if !ended {
			if p.Labels[troupev1.LabelRole] == troupev1.RoleMaster {
				liveMaster++
			} else {
				liveWorkers++
			}
		}
	}
	if !finished && !s.Suspended() && !s.Paused() && liveMaster == 0 {
		a.Creating++
	}
	if !released {
		a.Creating += max(0, s.TotalWorkers()-liveWorkers)
	}
	return a
}
