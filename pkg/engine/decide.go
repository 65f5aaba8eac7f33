package engine

import (
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
	// removePods are pods on lost nodes deleted at once (grace period 0): their kubelet will
	// never confirm a graceful delete (lost_nodes.go). None while a restart records the
	// failure, so that the failure is counted as NodeLost before its pod goes.
	removePods []*corev1.Pod
	// deleteWorkerJobs are worker Jobs to delete: of indexes a scaled-down set no longer asks
	// for (Observed.SurplusWorkerJobs), a failed one a failure policy rule ignores, and those
	// whose template changed while no pod of the job lives (holdChild); each is made again as a
	// missing child.
	deleteWorkerJobs []*batchv1.Job
	// children are the job's desired children, built once (children) with the holds applied
	// (holdChild), in the order they are created; heldTemplates name those whose new pod
	// template waits ("StatefulSet <name>", "Job <name>").
	children      []client.Object
	heldTemplates []string
}

// decide makes, once, every decision of a pass: the pause (planPause), the restart
// (planRestart), the master's pods (planMasterPods), the verdict, the ready workers and whether
// missing children may be created. It is a pure function of the spec the adapter described,
// the observation and the previous status; the plan it returns goes into copies of that spec
// (withPlan).
func decide(described *Spec, obs *Observed, prev *troupev1.JobStatus) decision {
	pause := planPause(described, prev, liveMasterJob(obs))
	s := described.withPlan(Plan{Pause: pause.pause, WasPaused: wasPaused(prev)})
	d := decision{plan: s.Plan, obs: obs, deleteMasterJob: pause.deleteMaster, deleteMasterWhy: "pausing"}
	if pause.pause {
		d.obs = obs.withoutMaster(s.Master.JobName) // a paused job has no master Job: it is deleted, or going
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
		d.obs = d.obs.withoutMaster(s.Master.JobName)
	}
	pods := planMasterPods(s, d.obs)
	d.deletePods = withNew(d.deletePods, pods.delete) // a paused job's master pods
	d.plan.Restart, d.plan.RestartSeen = restart.state, restart.seen
	if !restart.state.Deciding {
		d.removePods = podsToRemove(obs)
	}
	d.plan.HoldMaster = pods.holdMaster
	d.plan.ReadyWorkers = readyWorkers(s, d.obs)
	d.plan.Verdict = verdict(prev, d.obs)
	d.plan.HoldCreates = holdCreates(d.plan.Ended(), d.obs)
	d.plan.CompletedWorkers = completedWorkers(s, d.obs)
	d.plan.Expired = d.plan.Ended() && ttlExpired(s, prev, obs.Now)
	if s.CleanUpDue(d.plan.Verdict) && s.CleanPodPolicy() == troupev1.CleanPodPolicyAll {
		d.deletePods = withNew(d.deletePods, liveMasterPods(d.obs)) // the ended master's
	}
	d.desire(described.withPlan(d.plan))
	return d
}

// desire builds the children the plan s wants (children) and holds back, on each one the
// observation holds, what may not change now (holdChild): the children act creates or puts
// back in shape, the templates held, the worker Jobs to make again.
func (d *decision) desire(s *Spec) {
	for _, want := range children(s, WorkersReleased(s, s.Plan.Verdict), d.obs.wholeWorkerJobNeeded) {
		cur, exists := d.obs.current[keyOf(want)]
		if !exists {
			// A worker Job added by a scale-up waits while its set's pods run another template.
			if wj, ok := want.(*batchv1.Job); ok && isWorkerJob(wj) && peersRunOlderTemplate(wj, d.obs) {
				if !s.Plan.HoldCreates {
					d.heldTemplates = append(d.heldTemplates, "Job "+wj.Name)
				}
				continue
			}
			d.children = append(d.children, want)
			continue
		}
		h := holdChild(s, d.obs, want, cur)
		if h.replace != nil {
			if !slices.Contains(d.deleteWorkerJobs, h.replace) { // also a failed Job a rule ignores
				d.deleteWorkerJobs = append(slices.Clone(d.deleteWorkerJobs), h.replace)
			}
			continue
		}
		if h.held != "" {
			d.heldTemplates = append(d.heldTemplates, h.held)
		}
		if !h.leave {
			d.children = append(d.children, want)
		}
	}
}

// Running jobs are never disturbed by the operator. Worker StatefulSets use the OnDelete
// update strategy, so a new template never rolls a pod by itself; and the engine writes a new
// template (from a spec change, or from a new operator release that injects something else)
// only while the job has no live pod, so a worker that restarts mid-run comes back as its
// peers are and not in a shape they were never started with. Until then the job says so in its
// TemplateDrift condition.

// childHold is what holdChild decided of an existing child.
type childHold struct {
	// leave: the child stays as it is (a finished job's master Job, a worker Job whose new
	// template waits).
	leave bool
	// held names the child when its new pod template waits ("StatefulSet <name>", "Job <name>").
	held string
	// replace is a worker Job to delete, made again with its new template.
	replace *batchv1.Job
}

// holdChild decides what of want (built for the existing child cur) may change now, and puts
// what may not back into want: a finished job's master Job is left as it ended; a suspended
// master Job stays suspended while the generated Secrets cannot be trusted (holdSuspended); a
// worker StatefulSet keeps its template while pods of the job live (holdTemplate); a worker
// Job whose template changed (a Job's template cannot) is replaced once no pod of the job lives,
// or at once when its set is being released, and waits meanwhile.
func holdChild(s *Spec, obs *Observed, want, cur client.Object) childHold {
	switch w := want.(type) {
	case *batchv1.Job:
		c := cur.(*batchv1.Job)
		if s.isMasterJob(w) {
			if s.Plan.Ended() {
				return childHold{leave: true}
			}
			obs.Secrets.holdSuspended(c, w)
			return childHold{}
		}
		if !isWorkerJob(w) || !workerTemplateChanged(c, w) {
			return childHold{}
		}
		if c.DeletionTimestamp.IsZero() && (ptr.Deref(w.Spec.Suspend, false) || !jobHasLivePods(obs)) {
			return childHold{leave: true, replace: c}
		}
		return childHold{leave: true, held: "Job " + w.Name}
	case *appsv1.StatefulSet:
		if holdTemplate(cur.(*appsv1.StatefulSet), w, obs) {
			return childHold{held: "StatefulSet " + w.Name}
		}
	}
	return childHold{}
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

// holdTemplate keeps the current pod template (and its hash, so the change stays pending) in
// want when the engine would rewrite it while pods of the job live. It reports whether it held
// a change back. Workers being released (suspend, pause, the job's end) get the new template
// at once: none of their pods stays, and a quick resume must bring them back with it (a
// suspended job's placement, a paused job's resume overrides).
func holdTemplate(cur, want *appsv1.StatefulSet, obs *Observed) bool {
	curHash, ok := cur.Annotations[troupev1.AnnotationTemplateHash]
	if (ok && curHash == want.Annotations[troupev1.AnnotationTemplateHash]) ||
		ptr.Deref(want.Spec.Replicas, 1) == 0 || !jobHasLivePods(obs) {
		return false
	}
	want.Spec.Template = *cur.Spec.Template.DeepCopy()
	if ok {
		want.Annotations[troupev1.AnnotationTemplateHash] = curHash
	} else {
		delete(want.Annotations, troupev1.AnnotationTemplateHash)
	}
	return true
}

// workerTemplateChanged says a worker Job's pod template is not the one the job wants now: by
// the hash of what it is made of (buildWorkerJobs), or, for a Job made by v0.1.0 (which records
// no indexed hash), by its whole template's hash (want is then built whole:
// wholeWorkerJobNeeded).
func workerTemplateChanged(cur, want *batchv1.Job) bool {
	if h, ok := cur.Annotations[troupev1.AnnotationIndexedTemplateHash]; ok {
		return h != want.Annotations[troupev1.AnnotationIndexedTemplateHash]
	}
	return templateChanged(cur, want)
}

// wholeWorkerJobNeeded says the pass builds the worker Job name with its whole pod template:
// to create it, or to compare it with a Job whose template hash is its whole template's.
func (obs *Observed) wholeWorkerJobNeeded(name string) bool {
	cur, ok := obs.current[childRef{Kind: "Job", Name: name}]
	if !ok {
		return true
	}
	_, indexed := cur.GetAnnotations()[troupev1.AnnotationIndexedTemplateHash]
	return !indexed
}

// peersRunOlderTemplate says a worker Job to be created (a scale up) would run another template
// than the running pods of its set (a template that moved with the worker count, such as a
// torch world size): it waits with them (holdChild), so that no pod joins peers started
// for another job.
func peersRunOlderTemplate(want *batchv1.Job, obs *Observed) bool {
	if !jobHasLivePods(obs) {
		return false
	}
	for _, j := range obs.WorkerJobs[want.Labels[troupev1.LabelWorkerSet]] {
		if j.Annotations[troupev1.AnnotationSetTemplateHash] != want.Annotations[troupev1.AnnotationSetTemplateHash] {
			return true
		}
	}
	return false
}

// podsToRemove are the job's pods, of any attempt and role, on lost nodes whose pods may be
// deleted at once, and not already deleted so; while the taint manager has its turn on a node
// (TaintEvicting), only those it deleted already.
func podsToRemove(obs *Observed) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range obs.Pods {
		p := &obs.Pods[i]
		deletedAtOnce := p.DeletionTimestamp != nil && ptr.Deref(p.DeletionGracePeriodSeconds, -1) == 0
		if l, ok := obs.onLostNode(p); ok && l.Removable && !deletedAtOnce && (!l.TaintEvicting || p.DeletionTimestamp != nil) {
			out = append(out, p)
		}
	}
	return out
}
