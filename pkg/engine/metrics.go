package engine

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/metrics"
)

// The job metrics (pkg/metrics) count the same written transitions as the events
// (report.go), so each is counted once however often the job is reconciled, and a new
// operator process or leader, which starts from the written status, does not count again.

// countTransitions counts the transitions from prev to next, a status that has just been
// written.
func (r *Reconciler) countTransitions(job Object, s *Spec, obs *Observed, prev, next *troupev1.JobStatus) {
	kind, ns := r.gvk.Kind, job.GetNamespace()
	if prev.Phase == "" && next.Phase != "" {
		metrics.JobCreated(kind, ns)
	}
	if !prev.Phase.Ended() && next.Phase.Ended() {
		metrics.JobFinished(kind, ns, string(next.Phase))
	}
	if !allRunning(prev) && allRunning(next) {
		if since, ok := startupBegan(job.GetCreationTimestamp(), prev); ok {
			metrics.JobStarted(kind, ns, r.clock.Since(since.Time))
		}
	}
	if prev.Phase != troupev1.JobRunning && next.Phase == troupev1.JobRunning {
		if d, ok := launcherWaited(obs.MasterPods, s.launcherWaitContainer()); ok {
			metrics.LauncherWaited(kind, ns, d)
		}
	}
	for range launcherWaitTimeouts(obs.MasterPods, masterFailed(next)-masterFailed(prev), s.launcherWaitContainer()) {
		metrics.LauncherWaitTimedOut(kind, ns)
	}
	was := meta.FindStatusCondition(prev.Conditions, troupev1.ConditionInitialized)
	now := meta.FindStatusCondition(next.Conditions, troupev1.ConditionInitialized)
	if now != nil && now.Reason == troupev1.ReasonChildConflict && (was == nil || was.Reason != now.Reason) {
		metrics.NameConflict(kind, ns)
	}
}

// countCreated counts a job whose first status is a refusal of its spec (reportInvalidSpec):
// it was taken on too.
func (r *Reconciler) countCreated(job Object, prev, next *troupev1.JobStatus) {
	if prev.Phase == "" && next.Phase != "" {
		metrics.JobCreated(r.gvk.Kind, job.GetNamespace())
	}
}

// allRunning: the master runs and every worker pod is ready (or the job has none).
func allRunning(st *troupev1.JobStatus) bool {
	return st.Phase == troupev1.JobRunning && isTrue(st, troupev1.ConditionWorkersReady)
}

// startupBegan returns when the start that just completed began, from the status the job had
// before all its pods ran: its creation, or the moment it was last resumed from a suspend (a
// queue such as Kueue admitting it) or a pause. ok is false when this is not the end of a
// start: the job ran since it began (a master retried within its backoffLimit, workers that
// were ready and came back).
//
// It reads the conditions' transition times, which the first status write sets all alike: a
// Suspended or Paused condition whose time differs from the other's has changed since, which
// is a suspend or pause that ended (both are False here: a suspended or paused job does not
// run).
func startupBegan(created metav1.Time, prev *troupev1.JobStatus) (metav1.Time, bool) {
	run := meta.FindStatusCondition(prev.Conditions, troupev1.ConditionRunning)
	susp := meta.FindStatusCondition(prev.Conditions, troupev1.ConditionSuspended)
	paused := meta.FindStatusCondition(prev.Conditions, troupev1.ConditionPaused)
	if run == nil || susp == nil || paused == nil {
		return created, true // the first status: nothing has happened yet
	}
	began := created
	resumedAt := susp.LastTransitionTime
	if paused.LastTransitionTime.After(resumedAt.Time) {
		resumedAt = paused.LastTransitionTime
	}
	resumed := !susp.LastTransitionTime.Equal(&paused.LastTransitionTime)
	if resumed && resumedAt.After(began.Time) {
		began = resumedAt
	}
	if run.Status == metav1.ConditionTrue {
		// The master runs; the workers are not all ready. They were never ready since the
		// master started (a master that starts without waiting), or they were and one went:
		// then the start has long ended.
		ready := meta.FindStatusCondition(prev.Conditions, troupev1.ConditionWorkersReady)
		return began, ready == nil || !ready.LastTransitionTime.After(run.LastTransitionTime.Time)
	}
	// The master does not run. It did since the job began if the Running condition changed
	// after the suspend, pause or first status that began it.
	return began, !run.LastTransitionTime.After(resumedAt.Time)
}

// launcherWaited is how long the launcher that now runs waited for its workers: its
// wait init container's run (container, the backend's), if it ended with every host reachable.
func launcherWaited(masterPods []*corev1.Pod, container string) (time.Duration, bool) {
	var newest *corev1.Pod
	for _, p := range masterPods {
		if p.Status.Phase == corev1.PodRunning &&
			(newest == nil || newest.CreationTimestamp.Before(&p.CreationTimestamp)) {
			newest = p
		}
	}
	if newest == nil {
		return 0, false
	}
	t := launcherWaitState(newest, container)
	if t == nil || t.ExitCode != 0 || t.StartedAt.IsZero() || t.FinishedAt.IsZero() {
		return 0, false
	}
	return t.FinishedAt.Sub(t.StartedAt.Time), true
}

// launcherWaitTimeouts returns the master pods, among the failed newly newest ones, whose
// wait for their workers timed out.
func launcherWaitTimeouts(masterPods []*corev1.Pod, newlyFailed int32, container string) []*corev1.Pod {
	if newlyFailed <= 0 {
		return nil
	}
	var failed []*corev1.Pod
	for _, p := range masterPods {
		if p.Status.Phase == corev1.PodFailed {
			failed = append(failed, p)
		}
	}
	slices.SortFunc(failed, func(a, b *corev1.Pod) int { return b.CreationTimestamp.Compare(a.CreationTimestamp.Time) })
	failed = failed[:min(len(failed), int(newlyFailed))]
	return slices.DeleteFunc(failed, func(p *corev1.Pod) bool {
		t := launcherWaitState(p, container)
		return t == nil || t.ExitCode != troupev1.ExitCodeLauncherWaitTimeout
	})
}

// launcherWaitState is the terminated state of a master pod's wait init container, nil when it
// has none or it has not ended.
func launcherWaitState(p *corev1.Pod, container string) *corev1.ContainerStateTerminated {
	for _, cs := range p.Status.InitContainerStatuses {
		if container != "" && cs.Name == container {
			return cs.State.Terminated
		}
	}
	return nil
}

// masterFailed is the master's failed pod count in st.
func masterFailed(st *troupev1.JobStatus) int32 {
	for _, rs := range st.ReplicaStatuses {
		if rs.Name == troupev1.MasterReplicaName {
			return rs.Failed
		}
	}
	return 0
}

// runningCounter counts the kind's running jobs by namespace from the manager's cache, once
// this replica leads: a replica that does not lead has no informer on the jobs, and listing
// would start one.
func (r *Reconciler) runningCounter(mgr ctrl.Manager) metrics.RunningCounter {
	listKind := schema.GroupVersionKind{Group: r.gvk.Group, Version: r.gvk.Version, Kind: r.gvk.Kind + "List"}
	elected := mgr.Elected()
	return func(ctx context.Context) (map[string]int, bool, error) {
		select {
		case <-elected:
		default:
			return nil, false, nil
		}
		obj, err := mgr.GetScheme().New(listKind)
		if err != nil {
			return nil, false, fmt.Errorf("list type of %s: %w", r.gvk.Kind, err)
		}
		list := obj.(client.ObjectList)
		if err := mgr.GetCache().List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
			return nil, false, fmt.Errorf("list %s: %w", listKind.Kind, err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return nil, false, err
		}
		byNS := map[string]int{}
		for _, o := range items {
			job, ok := o.(Object)
			if !ok {
				continue
			}
			n := byNS[job.GetNamespace()] // every namespace with a job appears, zero included
			if job.JobStatus().Phase == troupev1.JobRunning {
				n++
			}
			byNS[job.GetNamespace()] = n
		}
		return byNS, true, nil
	}
}
