package engine

import (
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// Observed is what the engine saw of a job's children on one reconcile.
type Observed struct {
	// MasterJob is the job's batch Job, nil when it does not exist (or is not the job's).
	MasterJob *batchv1.Job
	// Verdict is the master's verdict (masterVerdict): Succeeded or Failed once it is in, ""
	// while the master runs. It is computed once, when the observation is complete; a restart
	// that sets the master Job aside for the pass (restart.go) clears it with MasterJob.
	Verdict troupev1.JobPhase
	// StatefulSets holds the job's worker StatefulSets by worker set name.
	StatefulSets map[string]*appsv1.StatefulSet
	// Pods are the job's pods (selected by the job UID label).
	Pods []corev1.Pod
	// Conflicts are children whose name is taken by an object the job does not own.
	Conflicts []ChildRef
	// Missing are children that do not exist (yet).
	Missing []ChildRef
	// Gang is the job's PodGroup, nil when it has none or it does not exist yet.
	Gang client.Object
	// SecretProblems name the required Secrets of the user's that are missing or lack keys.
	SecretProblems []string
	// PodCreateFailures are the API server's refusals of the job's pods (podcreate.go), and
	// PodCreateRecheck, when a child has fewer pods than it asks for, is when to look again.
	PodCreateFailures []string
	PodCreateRecheck  time.Duration
	// HeldTemplates name the worker StatefulSets whose new pod template waits for the job's
	// pods to be gone (drift.go).
	HeldTemplates []string
	// Secrets is what was verified of the generated Secrets (secret_integrity.go).
	Secrets SecretIntegrity

	// current holds every owned child found, by kind and name.
	current map[ChildRef]client.Object
	// gang are the keys of the gang provider's children among the desired ones.
	gang map[ChildRef]bool
}

// ChildRef names one child object of a job by kind and name.
type ChildRef struct {
	Kind string
	Name string
}

func (c ChildRef) String() string { return c.Kind + " " + c.Name }

func joinRefs(refs []ChildRef) string {
	names := make([]string, 0, len(refs))
	for _, c := range refs {
		names = append(names, c.String())
	}
	return strings.Join(names, ", ")
}

// Finished reports whether the job has ended (Verdict): the master's verdict is in (the master
// Job reached Complete or Failed, or its success is certain), or an earlier status said so. A
// finished job is never started again, even if its master Job is deleted afterwards. obs may be
// nil: the previous status alone then says.
func Finished(prev *troupev1.JobStatus, obs *Observed) bool {
	return Verdict(prev, obs) != ""
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

// ComputeStatus returns the job's status as a pure function of its spec, what was observed of
// its children, the previous status (for times that must not move) and the current time.
func ComputeStatus(s *Spec, obs *Observed, prev *troupev1.JobStatus, generation int64, now metav1.Time) troupev1.JobStatus {
	st := troupev1.JobStatus{
		Conditions:         slices.Clone(prev.Conditions),
		ObservedGeneration: generation,
		StartTime:          prev.StartTime,
		CompletionTime:     prev.CompletionTime,
	}
	finished := Finished(prev, obs)
	released := WorkersReleased(s, Verdict(prev, obs))

	st.ReplicaStatuses = replicaStatuses(s, obs, released)
	st.Pods = podPhaseCounts(obs.Pods)
	st.Workers = workersColumn(s, st.ReplicaStatuses)
	st.WorkerReplicas, st.WorkerSelector = workerScale(s, obs)
	st.Phase = runModePhase(s, prev, phase(s, obs, prev))
	st.Phase, st.Restarts = restartPhase(s, prev, st.Phase)

	set := func(c metav1.Condition) {
		c.ObservedGeneration, c.LastTransitionTime = generation, now
		meta.SetStatusCondition(&st.Conditions, c)
	}
	if prev.Phase != troupev1.JobSucceeded && prev.Phase != troupev1.JobFailed {
		// Once the job has finished, its children are not recreated; Initialized keeps its
		// last word.
		set(initializedCondition(obs))
		set(launcherWaitingCondition(s, obs)) // likewise: how the last wait ended stays
	}
	set(workersReadyCondition(s, obs, st.ReplicaStatuses, finished, released))
	set(runningCondition(st.Phase))
	set(withPodCreateFailures(obs, replicaFailureCondition(st.ReplicaStatuses)))
	set(suspendedCondition(s, finished))
	if s.Gang != nil {
		set(s.Gang.Condition(obs.Gang, obs.Pods))
	}
	if c, ok := secretLostCondition(obs, prev); ok {
		set(c) // before terminalCondition, which would say only "the master failed"
	}
	restartConditions(s, obs, prev, st.Phase, set)
	if c, ok := terminalCondition(obs.MasterJob, obs.Pods, st.Phase); ok && !meta.IsStatusConditionTrue(st.Conditions, c.Type) {
		set(c)
	}
	seedStatus(s, obs, &st, finished, released, set)
	if c, ok := templateDriftCondition(obs, prev); ok {
		set(c)
	}
	st.GeneratedSecrets = obs.Secrets.records(prev)
	if c, ok := secretTamperedCondition(obs, prev); ok {
		set(c)
	}

	// A zero creation time would be written as no start time and computed again on every pass.
	if st.StartTime == nil && obs.MasterJob != nil && !obs.MasterJob.CreationTimestamp.IsZero() && !s.Suspended() {
		st.StartTime = obs.MasterJob.CreationTimestamp.DeepCopy()
	}
	if st.CompletionTime == nil && (st.Phase == troupev1.JobSucceeded || st.Phase == troupev1.JobFailed) {
		st.CompletionTime = completionTime(obs.MasterJob, obs.Pods, now)
	}
	FitConditionMessages(st.Conditions) // whatever a message quotes, every write fits the CRD
	return st
}

// phase summarises the job. Terminal phases are sticky.
func phase(s *Spec, obs *Observed, prev *troupev1.JobStatus) troupev1.JobPhase {
	if prev.Phase == troupev1.JobSucceeded || prev.Phase == troupev1.JobFailed {
		return prev.Phase
	}
	if obs.Verdict != "" {
		return obs.Verdict
	}
	if len(obs.Secrets.Lost) > 0 {
		return troupev1.JobFailed
	}
	switch {
	case s.Suspended():
		return troupev1.JobSuspended
	case masterRunning(obs):
		return troupev1.JobRunning
	default:
		return troupev1.JobPending
	}
}

func terminalJobCondition(job *batchv1.Job) *batchv1.JobCondition {
	if job == nil {
		return nil
	}
	for i := range job.Status.Conditions {
		c := &job.Status.Conditions[i]
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

// masterRunning: the master Job reports a ready pod, or one of its pods is in phase Running, or
// one has succeeded and the Job has not given its verdict yet. The Job controller marks the Job
// Complete a moment (a second or more, under load) after its pod succeeded; the job is still
// running its master then, not back to Pending, and saying Pending in between cost a status
// write and showed users a phase that goes Running, Pending, Succeeded.
func masterRunning(obs *Observed) bool {
	if obs.MasterJob == nil {
		return false
	}
	if r := obs.MasterJob.Status.Ready; r != nil && *r > 0 {
		return true
	}
	for i := range obs.Pods {
		p := &obs.Pods[i]
		if p.Labels[troupev1.LabelRole] != troupev1.RoleMaster {
			continue
		}
		if p.Status.Phase == corev1.PodRunning || (p.Status.Phase == corev1.PodSucceeded && p.DeletionTimestamp.IsZero()) {
			return true
		}
	}
	return false
}

func replicaStatuses(s *Spec, obs *Observed, released bool) []troupev1.ReplicaStatus {
	master := troupev1.ReplicaStatus{Name: troupev1.MasterReplicaName}
	if !s.Suspended() && !s.Paused() {
		master.Replicas = 1
	}
	if j := obs.MasterJob; j != nil {
		master.Active = j.Status.Active
		master.Succeeded = j.Status.Succeeded
		master.Failed = j.Status.Failed
		if j.Status.Ready != nil {
			master.Ready = *j.Status.Ready
		}
	}
	switch obs.Verdict {
	case troupev1.JobSucceeded:
		// Counted as the Job will count it once it says Complete, so that its verdict, coming
		// after the engine's (master_verdict.go), moves no count and costs no status write.
		master.Replicas, master.Active, master.Ready = 0, 0, 0
		master.Succeeded = max(master.Succeeded, 1)
	case troupev1.JobFailed:
		master.Replicas = 0
	}
	master.Restarts = restarts(obs.Pods, func(p *corev1.Pod) bool {
		return p.Labels[troupev1.LabelRole] == troupev1.RoleMaster
	})
	out := []troupev1.ReplicaStatus{master}

	for i := range s.WorkerSets {
		ws := &s.WorkerSets[i]
		rs := troupev1.ReplicaStatus{Name: ws.Name, Replicas: ws.Replicas}
		if released {
			rs.Replicas = 0
		}
		if sts := obs.StatefulSets[ws.Name]; sts != nil {
			rs.Ready = sts.Status.ReadyReplicas
		}
		inSet := func(p *corev1.Pod) bool {
			return p.Labels[troupev1.LabelRole] == troupev1.RoleWorker && p.Labels[troupev1.LabelWorkerSet] == ws.Name
		}
		for j := range obs.Pods {
			p := &obs.Pods[j]
			if !inSet(p) {
				continue
			}
			switch p.Status.Phase {
			case corev1.PodPending, corev1.PodRunning:
				rs.Active++
			case corev1.PodSucceeded:
				rs.Succeeded++
			case corev1.PodFailed:
				rs.Failed++
			}
		}
		rs.Restarts = restarts(obs.Pods, inSet)
		out = append(out, rs)
	}
	return out
}

func restarts(pods []corev1.Pod, match func(*corev1.Pod) bool) int32 {
	var n int32
	for i := range pods {
		if !match(&pods[i]) {
			continue
		}
		for _, cs := range pods[i].Status.ContainerStatuses {
			n += cs.RestartCount
		}
	}
	return n
}

func podPhaseCounts(pods []corev1.Pod) troupev1.PodPhaseCounts {
	var c troupev1.PodPhaseCounts
	for i := range pods {
		switch pods[i].Status.Phase {
		case corev1.PodPending:
			c.Pending++
		case corev1.PodRunning:
			c.Running++
		case corev1.PodSucceeded:
			c.Succeeded++
		case corev1.PodFailed:
			c.Failed++
		default:
			c.Unknown++
		}
	}
	return c
}

// workersColumn is "ready/desired" over every worker set, desired being what the spec asks.
// workerScale is what the scale subresource reads: the worker pods that exist, and the
// selector of the job's worker pods.
func workerScale(s *Spec, obs *Observed) (int32, string) {
	var n int32
	for _, sts := range obs.StatefulSets {
		n += sts.Status.Replicas
	}
	sel := labels.SelectorFromSet(labels.Set{
		troupev1.LabelJobUID: string(s.Owner.UID),
		troupev1.LabelRole:   troupev1.RoleWorker,
	})
	return n, sel.String()
}

func workersColumn(s *Spec, rs []troupev1.ReplicaStatus) string {
	var ready int32
	for _, r := range rs[1:] {
		ready += r.Ready
	}
	return fmt.Sprintf("%d/%d", ready, s.TotalWorkers())
}

// initializedCondition: the job's objects exist and belong to it. A conflict names the objects
// in the way; they are never adopted, changed or deleted.
func initializedCondition(obs *Observed) metav1.Condition {
	const t = troupev1.ConditionInitialized
	switch {
	case len(obs.Conflicts) > 0:
		return newCondition(t, false, troupev1.ReasonChildConflict,
			"objects with the names of this job's children exist and are not owned by it; delete or rename them: "+joinRefs(obs.Conflicts))
	case len(obs.SecretProblems) > 0:
		return newCondition(t, false, troupev1.ReasonSecretMissing, strings.Join(obs.SecretProblems, "; "))
	case len(obs.Missing) > 0:
		return newCondition(t, false, troupev1.ReasonCreatingChildren, "creating "+joinRefs(obs.Missing))
	}
	return newCondition(t, true, troupev1.ReasonChildrenCreated, "every child object exists")
}

func workersReadyCondition(s *Spec, obs *Observed, rs []troupev1.ReplicaStatus, finished, released bool) metav1.Condition {
	const t = troupev1.ConditionWorkersReady
	switch {
	case len(s.WorkerSets) == 0:
		return newCondition(t, true, troupev1.ReasonNoWorkers, "the job has no worker sets")
	case released && finished:
		return newCondition(t, false, troupev1.ReasonWorkersReleased, "the master ended; worker sets were scaled to zero")
	case released && s.Paused():
		return newCondition(t, false, troupev1.ReasonPaused, "the job is paused; worker sets are scaled to zero")
	case released && s.Plan.Restart.Stopping:
		return newCondition(t, false, troupev1.ReasonStoppingAttempt, "the job is restarting; worker sets are scaled to zero until every pod of the failed attempt is gone")
	case released:
		return newCondition(t, false, troupev1.ReasonSuspended, "the job is suspended; worker sets are scaled to zero")
	}
	var waiting []string
	for i, ws := range s.WorkerSets {
		if r := rs[i+1]; r.Ready < ws.Replicas {
			waiting = append(waiting, fmt.Sprintf("%s: %d/%d ready", ws.Name, r.Ready, ws.Replicas))
		}
	}
	if len(waiting) > 0 {
		msg := "waiting for workers: " + strings.Join(waiting, ", ")
		if missing := missingHosts(s, obs); len(missing) > 0 {
			msg += "; hosts not ready: " + abbreviate(missing, maxNamesInMessage)
		}
		return newCondition(t, false, troupev1.ReasonWorkersNotReady, msg)
	}
	return newCondition(t, true, troupev1.ReasonWorkersReady, "every worker pod is ready")
}

// ReadyWorkers lists, per worker set, the hostnames of its pods that are Ready, in ordinal
// order (the value of Plan.ReadyWorkers).
func ReadyWorkers(s *Spec, obs *Observed) map[string][]string {
	ready := map[string]bool{}
	for i := range obs.Pods {
		p := &obs.Pods[i]
		if p.Labels[troupev1.LabelRole] == troupev1.RoleWorker && p.DeletionTimestamp.IsZero() && podReady(p) {
			ready[p.Name] = true
		}
	}
	out := map[string][]string{}
	for i := range s.WorkerSets {
		ws := &s.WorkerSets[i]
		for _, h := range ws.WorkerHostnames() {
			if ready[h] {
				out[ws.Name] = append(out[ws.Name], h)
			}
		}
	}
	return out
}

// maxNamesInMessage bounds the host names a condition message lists, so a large job's status
// stays readable and small.
const maxNamesInMessage = 10

// missingHosts lists the host names of worker pods that are not ready (or do not exist yet),
// in hostfile order: the hosts a launcher is still waiting for.
func missingHosts(s *Spec, obs *Observed) []string {
	ready := map[string]bool{}
	for _, hosts := range ReadyWorkers(s, obs) {
		for _, h := range hosts {
			ready[h] = true
		}
	}
	var missing []string
	for i := range s.WorkerSets {
		for _, h := range s.WorkerSets[i].WorkerHostnames() {
			if !ready[h] {
				missing = append(missing, s.HostName(h))
			}
		}
	}
	return missing
}

func abbreviate(names []string, limit int) string {
	if len(names) <= limit {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:limit], ", "), len(names)-limit)
}

func runningCondition(p troupev1.JobPhase) metav1.Condition {
	const t = troupev1.ConditionRunning
	switch p {
	case troupev1.JobRunning:
		return newCondition(t, true, troupev1.ReasonMasterRunning, "the master is running")
	case troupev1.JobSucceeded:
		return newCondition(t, false, troupev1.ReasonMasterSucceeded, "the master completed")
	case troupev1.JobFailed:
		return newCondition(t, false, troupev1.ReasonMasterFailed, "the master failed")
	case troupev1.JobSuspended:
		return newCondition(t, false, troupev1.ReasonSuspended, "the job is suspended")
	case troupev1.JobPaused:
		return newCondition(t, false, troupev1.ReasonPaused, "the job is paused")
	default:
		return newCondition(t, false, troupev1.ReasonMasterNotRunning, "the master is not running yet")
	}
}

func replicaFailureCondition(rs []troupev1.ReplicaStatus) metav1.Condition {
	var failed []string
	for _, r := range rs {
		if r.Failed > 0 {
			failed = append(failed, fmt.Sprintf("%s: %d failed pods", r.Name, r.Failed))
		}
	}
	if len(failed) > 0 {
		return newCondition(troupev1.ConditionReplicaFailure, true, troupev1.ReasonPodsFailed, strings.Join(failed, ", "))
	}
	return newCondition(troupev1.ConditionReplicaFailure, false, troupev1.ReasonNoPodFailures, "no pod of the job failed")
}

func suspendedCondition(s *Spec, finished bool) metav1.Condition {
	if s.Suspended() && !finished {
		return newCondition(troupev1.ConditionSuspended, true, troupev1.ReasonSuspended, "runPolicy.suspend is set")
	}
	return newCondition(troupev1.ConditionSuspended, false, troupev1.ReasonNotSuspended, "the job is not suspended")
}

// terminalCondition is the Succeeded or Failed condition, set once the job has finished. The
// reason and message of a failure are the master Job's (BackoffLimitExceeded,
// DeadlineExceeded, ...), so the user sees why without looking at the Job.
func terminalCondition(master *batchv1.Job, pods []corev1.Pod, p troupev1.JobPhase) (metav1.Condition, bool) {
	jc := terminalJobCondition(master)
	switch p {
	case troupev1.JobSucceeded:
		return newCondition(troupev1.ConditionSucceeded, true, troupev1.ReasonMasterSucceeded, "the master completed successfully"), true
	case troupev1.JobFailed:
		reason, msg := troupev1.ReasonMasterFailed, "the master failed"
		if jc != nil && jc.Reason != "" {
			reason = jc.Reason
			msg = fmt.Sprintf("the master failed: %s", jc.Message)
		}
		if why := masterInitFailure(pods); why != "" {
			msg += "; " + why
		} else if why := masterExitMessage(pods); why != "" {
			msg += "; " + why
		}
		return newCondition(troupev1.ConditionFailed, true, reason, msg), true
	}
	return metav1.Condition{}, false
}

// masterInitFailure is the termination message of a master pod's init container that failed,
// for example a launcher whose wait for its workers timed out and names the hosts missing.
func masterInitFailure(pods []corev1.Pod) string {
	for i := range pods {
		p := &pods[i]
		if p.Labels[troupev1.LabelRole] != troupev1.RoleMaster {
			continue
		}
		for _, cs := range p.Status.InitContainerStatuses {
			if t := cs.State.Terminated; t != nil && t.ExitCode != 0 && t.Message != "" {
				return fmt.Sprintf("init container %s: %s", cs.Name, strings.TrimSpace(t.Message))
			}
		}
	}
	return ""
}

// completionTime is when the master ended: the Job's completion time or terminal condition's,
// or, when the engine saw its success first (master_verdict.go), when its pod ended.
func completionTime(master *batchv1.Job, pods []corev1.Pod, now metav1.Time) *metav1.Time {
	if master != nil && master.Status.CompletionTime != nil {
		return master.Status.CompletionTime.DeepCopy()
	}
	if c := terminalJobCondition(master); c != nil && !c.LastTransitionTime.IsZero() {
		return c.LastTransitionTime.DeepCopy()
	}
	if at := masterFinishedAt(master, pods); at != nil {
		return at
	}
	return &now
}

func newCondition(t string, ok bool, reason, msg string) metav1.Condition {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	return metav1.Condition{Type: t, Status: status, Reason: reason, Message: msg}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
