package engine

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// podCause is why one pod does not run (or ran and restarted).
type podCause struct {
	// Reason is a kubelet waiting reason (ImagePullBackOff for ErrImagePull too,
	// CreateContainerConfigError, ...), CrashLoopBackOff or Unschedulable.
	Reason string
	// Detail says it of the pod's container: the kubelet's message, or the exit with its
	// termination message.
	Detail string
}

// normalWaiting are waiting reasons of a pod on its way to running.
var normalWaiting = []string{"", "ContainerCreating", "PodInitializing"}

// causeOf is why pod p does not run, or ok false when nothing is in its way. A container the
// kubelet cannot start (its image, its configuration) comes first, then one that exited and is
// restarted, then a pod the scheduler cannot place.
func causeOf(p *corev1.Pod) (c podCause, ok bool) {
	if podEnded(p) {
		return podCause{}, false
	}
	containers := slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses)
	for _, cs := range containers {
		w := cs.State.Waiting
		if w == nil || slices.Contains(normalWaiting, w.Reason) || w.Reason == troupev1.ReasonCrashLoopBackOff {
			continue
		}
		reason := asConditionReason(w.Reason)
		if reason == "ErrImagePull" {
			reason = troupev1.ReasonImagePullBackOff // the two alternate while the kubelet retries
		}
		return podCause{Reason: reason, Detail: fmt.Sprintf("container %s: %s", cs.Name, fitBytes(w.Message, maxCauseText))}, true
	}
	for _, cs := range containers {
		if exit := lastExit(cs); exit != nil && (cs.RestartCount > 0 || exit.ExitCode != 0) {
			return podCause{Reason: troupev1.ReasonCrashLoopBackOff, Detail: exitDetail(cs, exit)}, true
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return podCause{Reason: troupev1.ReasonUnschedulable, Detail: fitBytes(c.Message, maxCauseText)}, true
		}
	}
	return podCause{}, false
}

// asConditionReason is a kubelet's waiting reason as a condition's reason may be written
// (letters, digits and underscores, starting with a letter): the kubelet's own are, a
// runtime's may not be.
func asConditionReason(r string) string {
	kept := strings.Map(func(c rune) rune {
		if c < utf8.RuneSelf && (c == '_' || unicode.IsLetter(c) || unicode.IsDigit(c)) {
			return c
		}
		return -1
	}, r)
	kept = strings.TrimLeftFunc(kept, func(c rune) bool { return !unicode.IsLetter(c) })
	if kept == "" {
		return "ContainerWaiting"
	}
	return fitBytes(kept, troupev1.MaxStatusReason)
}

// exitDetail says how a container ended and how often it was restarted, with the end of its
// termination message (its log's, with FallbackToLogsOnError).
func exitDetail(cs corev1.ContainerStatus, exit *corev1.ContainerStateTerminated) string {
	d := fmt.Sprintf("container %s exited %d", cs.Name, exit.ExitCode)
	if exit.Reason != "" {
		d += " (" + exit.Reason + ")"
	}
	if cs.RestartCount > 0 {
		d += fmt.Sprintf(", restarted %d times", cs.RestartCount)
	}
	if msg := strings.TrimSpace(exit.Message); msg != "" {
		d += ": " + lastBytes(msg)
	}
	return d
}

// setCause is why pods of one replica set (a worker set, or the master) do not run: the cause
// most of its pods share (the first by precedence on a tie), the pods it holds and what the
// first of them says.
type setCause struct {
	Set    string
	Reason string
	Pods   []string
	Detail string
}

// String is the cause as a condition message reads it, for example
// `worker: ImagePullBackOff on 2 pods (train-worker-0, train-worker-1): container worker: ...`.
func (c setCause) String() string {
	pods := "pod"
	if len(c.Pods) > 1 {
		pods = fmt.Sprintf("%d pods", len(c.Pods))
	}
	return fmt.Sprintf("%s: %s on %s (%s): %s", c.Set, c.Reason, pods, abbreviate(c.Pods, maxPodsInCause), c.Detail)
}

// maxPodsInCause bounds the pods a cause names.
const maxPodsInCause = 3

// causeOfSet is the cause of the pods of one set (set names it in messages), ok false when
// none of them has one.
func causeOfSet(set string, pods []*corev1.Pod) (setCause, bool) {
	type found struct {
		pods   []string
		detail string
		first  int // precedence: the order in which causes were met
	}
	byReason := map[string]*found{}
	var reasons []string
	for _, p := range pods {
		c, ok := causeOf(p)
		if !ok {
			continue
		}
		f := byReason[c.Reason]
		if f == nil {
			f = &found{detail: p.Name + ": " + c.Detail, first: len(reasons)}
			byReason[c.Reason] = f
			reasons = append(reasons, c.Reason)
		}
		f.pods = append(f.pods, p.Name)
	}
	if len(reasons) == 0 {
		return setCause{}, false
	}
	// The reason most pods share; on a tie the one met first (pods come sorted by name), so it
	// goes the same way on every pass.
	best := slices.MaxFunc(reasons, func(a, b string) int {
		if n := len(byReason[a].pods) - len(byReason[b].pods); n != 0 {
			return n
		}
		return byReason[b].first - byReason[a].first
	})
	f := byReason[best]
	return setCause{Set: set, Reason: best, Pods: f.pods, Detail: f.detail}, true
}

// workerCauses are the causes of the worker sets, in the spec's order, over the pods of the
// current attempt.
func workerCauses(s *Spec, obs *Observed) []setCause {
	var out []setCause
	for i := range s.WorkerSets {
		ws := &s.WorkerSets[i]
		pods := slices.Clone(obs.AttemptWorkerPods[ws.Name])
		slices.SortFunc(pods, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
		if c, ok := nodeLostCause(ws.Name, pods, obs); ok {
			out = append(out, c)
		} else if c, ok := causeOfSet(ws.Name, pods); ok {
			out = append(out, c)
		}
	}
	return out
}

// masterCause is the cause of the master's current pod.
func masterCause(s *Spec, obs *Observed) (setCause, bool) {
	p := currentMasterPod(obs.MasterPods)
	if p == nil {
		return setCause{}, false
	}
	if c, ok := nodeLostCause(string(s.masterType()), []*corev1.Pod{p}, obs); ok {
		return c, true
	}
	return causeOfSet(string(s.masterType()), []*corev1.Pod{p})
}

// joinCauses is the causes as one message.
func joinCauses(causes []setCause) string {
	parts := make([]string, 0, len(causes))
	for _, c := range causes {
		parts = append(parts, c.String())
	}
	return strings.Join(parts, "; ")
}

// crashLoopingWorker names a worker pod of the current attempt whose containers the kubelet
// restarted runPolicy.workerRestartLimit times, and how it last exited; "" when none did, the
// job has no limit, or its workers are released.
func crashLoopingWorker(s *Spec, obs *Observed) (string, Failure) {
	limit := s.RunPolicy.WorkerRestartLimit
	if limit == nil || s.Suspended() || s.Paused() {
		return "", Failure{}
	}
	var looping []finding
	for i := range s.WorkerSets {
		for _, p := range obs.AttemptWorkerPods[s.WorkerSets[i].Name] {
			if !p.DeletionTimestamp.IsZero() {
				continue
			}
			for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
				if cs.RestartCount < *limit {
					continue
				}
				why := fmt.Sprintf("worker pod %s crash-looped: container %s was restarted %d times", p.Name, cs.Name, cs.RestartCount)
				if exit := lastExit(cs); exit != nil {
					why = fmt.Sprintf("worker pod %s crash-looped: %s", p.Name, exitDetail(cs, exit))
				}
				f := podFailure(s.WorkerSets[i].Name, p)
				f.Reason = troupev1.FailureCrashLoop
				looping = append(looping, finding{why, f})
				break
			}
		}
	}
	return firstFinding(looping)
}

// crashLoopingMaster says why the master failed when its containers restart in place
// (restartInPlace; read from the master Job, which an operator of other settings may have
// made): their restarts and the Job's failed pods reached the master Job's
// backoffLimit, where the Job controller, which counts restarts only of OnFailure pods, would
// have failed an OnFailure master. The Failure is of reason CrashLoop.
func crashLoopingMaster(s *Spec, obs *Observed) (string, Failure) {
	j := obs.MasterJob
	if !s.masterRestartOverridden() || j == nil || !restartsInPlace(&j.Spec.Template.Spec) || terminalJobCondition(j) != nil ||
		attemptOf(j.Spec.Template.Labels) != obs.Attempt {
		return "", Failure{}
	}
	retries := j.Status.Failed
	var last *corev1.Pod
	for _, p := range obs.MasterPods {
		if !p.DeletionTimestamp.IsZero() || (p.Status.Phase != corev1.PodRunning && p.Status.Phase != corev1.PodPending) {
			continue
		}
		for _, cs := range p.Status.ContainerStatuses {
			retries += cs.RestartCount
			if cs.RestartCount > 0 {
				last = p
			}
		}
	}
	limit := s.Master.BackoffLimit
	if last == nil || retries < max(limit, 1) {
		return "", Failure{}
	}
	why := fmt.Sprintf("%s pod %s was restarted in place until its retries (%d, with the Job's failed pods) reached the Job's backoffLimit %d", s.masterType(), last.Name, retries, limit)
	for _, cs := range last.Status.ContainerStatuses {
		if exit := lastExit(cs); exit != nil && cs.RestartCount > 0 {
			why += ": " + exitDetail(cs, exit)
			break
		}
	}
	f := podFailure(string(s.masterType()), last)
	f.Reason = troupev1.FailureCrashLoop
	return why, f
}

// finding is one failure seen, with the words that say it.
type finding struct {
	why     string
	failure Failure
}

// firstFinding is the first of the findings by their words, saying how many more there are,
// with its Failure: the same one on every pass.
func firstFinding(found []finding) (string, Failure) {
	if len(found) == 0 {
		return "", Failure{}
	}
	slices.SortFunc(found, func(a, b finding) int { return strings.Compare(a.why, b.why) })
	if len(found) > 1 {
		return fmt.Sprintf("%s (and %d more)", found[0].why, len(found)-1), found[0].failure
	}
	return found[0].why, found[0].failure
}

// launcherSaid is what the master's pods said of its failure: an init container's termination
// message (a launcher's wait that timed out names the hosts missing), else the exit of the last
// one that failed.
func launcherSaid(masterPods []*corev1.Pod) string {
	if why := masterInitFailure(masterPods); why != "" {
		return why
	}
	return masterExitMessage(masterPods)
}

// masterExitMessage is why the last master pod that failed ended: its failed container's
// termination message (the launcher's own, or, with terminationMessagePolicy
// FallbackToLogsOnError, the end of its log: mpirun's "exited with non-zero status" summary)
// with its exit code, so that the Failed condition says what the launcher said.
func masterExitMessage(masterPods []*corev1.Pod) string {
	var last *corev1.Pod
	for _, p := range masterPods {
		if p.Status.Phase != corev1.PodFailed {
			continue
		}
		if last == nil || last.CreationTimestamp.Before(&p.CreationTimestamp) {
			last = p
		}
	}
	if last == nil {
		return ""
	}
	for _, cs := range last.Status.ContainerStatuses {
		t := cs.State.Terminated
		if t == nil || t.ExitCode == 0 {
			continue
		}
		msg := strings.TrimSpace(t.Message)
		if len(msg) > maxExitMessage {
			msg = "..." + msg[len(msg)-maxExitMessage:]
		}
		if msg == "" {
			return fmt.Sprintf("container %s of pod %s exited %d", cs.Name, last.Name, t.ExitCode)
		}
		return fmt.Sprintf("container %s of pod %s exited %d: %s", cs.Name, last.Name, t.ExitCode, msg)
	}
	return ""
}

// masterInitFailure is the termination message of a master pod's init container that failed,
// for example a launcher whose wait for its workers timed out and names the hosts missing.
func masterInitFailure(masterPods []*corev1.Pod) string {
	for _, p := range masterPods {
		for _, cs := range p.Status.InitContainerStatuses {
			if t := cs.State.Terminated; t != nil && t.ExitCode != 0 && t.Message != "" {
				return fmt.Sprintf("init container %s: %s", cs.Name, strings.TrimSpace(t.Message))
			}
		}
	}
	return ""
}

// nodeLostCause is the cause of pods (of one set, sorted by name) on lost nodes, ok false when
// none is on one: it comes before anything a pod says of itself, which a lost node no longer
// updates.
func nodeLostCause(set string, pods []*corev1.Pod, obs *Observed) (setCause, bool) {
	c := setCause{Set: set, Reason: troupev1.ReasonNodeLost}
	for _, p := range pods {
		if l, ok := obs.onLostNode(p); ok {
			if len(c.Pods) == 0 {
				c.Detail = p.Name + ": " + l.String()
			}
			c.Pods = append(c.Pods, p.Name)
		}
	}
	return c, len(c.Pods) > 0
}
