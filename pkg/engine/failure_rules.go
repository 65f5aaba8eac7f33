package engine

import (
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// The failure policy's rules (runPolicy.failurePolicy.rules; docs/failure-handling.md) act on
// why an attempt failed. Each way an attempt fails (the master Job failed, a worker Job failed,
// a worker pod was lost or crash-looped) reports a Failure: which replica, the pod's reason and
// its containers' exit codes. The first rule that matches decides; with none, a disruption
// restarts the job without counting toward maxRestarts and anything else restarts it counting.

// decideFailure is the failure policy's decision on f: the first matching rule's, else the
// default. mainContainer is the container onExitCodes reads when a rule names none.
func decideFailure(fp *troupev1.FailurePolicy, f Failure, mainContainer string) FailureDecision {
	if fp != nil {
		for i := range fp.Rules {
			if r := &fp.Rules[i]; ruleMatches(r, f, mainContainer) {
				return FailureDecision{Rule: r.Name, Action: r.Action}
			}
		}
	}
	if f.Reason.Disruption() {
		return FailureDecision{Action: troupev1.RestartJobAndIgnoreMaxRestartsAction}
	}
	return FailureDecision{Action: troupev1.RestartJobAction}
}

// ruleMatches says every criterion r gives holds for f.
func ruleMatches(r *troupev1.FailureRule, f Failure, mainContainer string) bool {
	if len(r.OnReplicas) > 0 && !slices.Contains(r.OnReplicas, f.Replica) {
		return false
	}
	if len(r.OnReasons) > 0 && !slices.Contains(r.OnReasons, f.Reason) {
		return false
	}
	if m := r.OnExitCodes; m != nil {
		code, ok := f.ExitCodes[ptr.Deref(m.ContainerName, mainContainer)]
		if !ok || !exitCodeIn(m, code) {
			return false
		}
	}
	return true
}

// exitCodeIn says code is one of m's values or in one of its ranges.
func exitCodeIn(m *troupev1.ExitCodeMatch, code int32) bool {
	if slices.Contains(m.Values, code) {
		return true
	}
	return slices.ContainsFunc(m.Ranges, func(r troupev1.ExitCodeRange) bool { return r.From <= code && code <= r.To })
}

// podFailure is the Failure of pod p of the replica: its reason and its containers' exits.
func podFailure(replica string, p *corev1.Pod) Failure {
	f := Failure{Replica: replica, ExitCodes: map[string]int32{}}
	oom := false
	for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
		if exit := lastExit(cs); exit != nil && exit.ExitCode != 0 {
			f.ExitCodes[cs.Name] = exit.ExitCode
			oom = oom || exit.Reason == "OOMKilled"
		}
	}
	f.Reason = podFailureReason(p, oom)
	return f
}

// podFailureReason is why p failed: a disruption first (a preempted pod's containers are
// killed, which is not their own failure), then the kubelet's reason for the pod, then how its
// containers ended.
func podFailureReason(p *corev1.Pod, oom bool) troupev1.FailureReason {
	if c := disruption(p); c != nil {
		return disruptionReason(c.Reason)
	}
	switch p.Status.Reason {
	case "Evicted", "Shutdown", "Terminated":
		return troupev1.FailureEvicted // node pressure, a graceful node shutdown
	case "NodeLost":
		return troupev1.FailureNodeLost
	case "DeadlineExceeded":
		return troupev1.FailureDeadlineExceeded
	}
	switch {
	case oom:
		return troupev1.FailureOOMKilled
	case p.Status.Phase == corev1.PodFailed:
		return troupev1.FailureError
	case !p.DeletionTimestamp.IsZero():
		return troupev1.FailureDeleted
	}
	return troupev1.FailureError
}

// disruption is the pod's DisruptionTarget condition if it is true, else nil.
func disruption(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if c := &p.Status.Conditions[i]; c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

// disruptionReason is the failure reason of a pod whose DisruptionTarget condition has reason r.
func disruptionReason(r string) troupev1.FailureReason {
	switch r {
	case corev1.PodReasonPreemptionByScheduler:
		return troupev1.FailurePreempted
	case "DeletionByTaintManager", "DeletionByPodGC": // the node's NoExecute taint, the node gone
		return troupev1.FailureNodeLost
	}
	return troupev1.FailureEvicted // EvictionByEvictionAPI (a drain), TerminationByKubelet
}

// countedRestarts is the part of maxRestarts the job spent.
func countedRestarts(st *troupev1.JobStatus) int32 { return st.Restarts - st.UncountedRestarts }

// countRestart adds one restart for reason to the status's counts.
func countRestart(st *troupev1.JobStatus, reason troupev1.FailureReason, counted bool) {
	if !counted {
		st.UncountedRestarts++
	}
	for i := range st.RestartsByReason {
		if st.RestartsByReason[i].Reason == reason {
			st.RestartsByReason[i].Count++
			return
		}
	}
	st.RestartsByReason = append(st.RestartsByReason, troupev1.RestartCount{Reason: reason, Count: 1})
}

// replicaMainContainer is the container onExitCodes reads for the replica when a rule names
// none: the one troupe gives the job's environment, else the template's first.
func (s *Spec) replicaMainContainer(replica string) string {
	tmpl := &s.Master.Template
	for i := range s.WorkerSets {
		if s.WorkerSets[i].Name == replica {
			tmpl = &s.WorkerSets[i].Template
		}
	}
	if c := mainContainer(tmpl, s.MainContainer, true); c != nil {
		return c.Name
	}
	return s.MainContainer
}

// masterExitCodeRules are the master Job's pod failure policy rules for the failure policy's
// rules on the master's exit codes alone: such an exit fails the Job at once, not after its
// backoffLimit's retries (which would run the same fault again), and the rule then decides.
// A rule that also asks for a reason is left to the engine: a pod failure policy cannot say it.
func (s *Spec) masterExitCodeRules() []batchv1.PodFailurePolicyRule {
	fp := s.RunPolicy.FailurePolicy
	if fp == nil || !s.restartsEnabled() {
		return nil
	}
	master := string(s.masterType())
	var out []batchv1.PodFailurePolicyRule
	for i := range fp.Rules {
		r := &fp.Rules[i]
		if r.OnExitCodes == nil || len(r.OnReasons) > 0 || r.Action == troupev1.IgnoreAction ||
			(len(r.OnReplicas) > 0 && !slices.Contains(r.OnReplicas, master)) {
			continue
		}
		var codes []int32
		for c := int32(1); c <= 255; c++ {
			if exitCodeIn(r.OnExitCodes, c) {
				codes = append(codes, c)
			}
		}
		out = append(out, batchv1.PodFailurePolicyRule{
			Action: batchv1.PodFailurePolicyActionFailJob,
			OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
				ContainerName: ptr.To(ptr.Deref(r.OnExitCodes.ContainerName, s.replicaMainContainer(master))),
				Operator:      batchv1.PodFailurePolicyOnExitCodesOpIn,
				Values:        codes,
			},
		})
	}
	return out
}

// lastExit is how a container last ended: its current termination, else the one before its
// restart; nil when it never ended.
func lastExit(cs corev1.ContainerStatus) *corev1.ContainerStateTerminated {
	if t := cs.State.Terminated; t != nil {
		return t
	}
	return cs.LastTerminationState.Terminated
}

// restartsEnabled says whether a lost rank restarts the job. Debug mode never restarts: its
// launcher sleeps while a user works in it.
func (s *Spec) restartsEnabled() bool {
	return s.RunPolicy.FailurePolicy != nil && s.RunMode.Debug == nil
}

// masterRestartsInPlace says the master's containers, run in pods of restartPolicy Never for
// its exit-code rules (masterRestartOverridden), restart in place for the codes no rule names,
// as its template's OnFailure asked: the cluster has container restart rules (KEP-5307).
func (s *Spec) masterRestartsInPlace() bool {
	return s.ContainerRestartRules && s.masterRestartOverridden()
}

// restartInPlace gives the regular containers of a master pod (restartPolicy Never) the
// restarts its template's OnFailure asked for: a container the pod failure policy's rules
// name exits for good on a code they name (the pod fails, the Job's rule acts), and restarts
// in place on any other non-zero code; the others restart on every failure. A container
// that sets its own restart policy keeps it. The kubelet does not count these restarts
// against the Job's backoffLimit; crashLoopingMaster does.
func restartInPlace(spec *corev1.PodSpec, rules []batchv1.PodFailurePolicyRule) {
	named := map[string][]int32{}
	for _, r := range rules {
		if r.OnExitCodes != nil && r.OnExitCodes.ContainerName != nil {
			c := *r.OnExitCodes.ContainerName
			named[c] = append(named[c], r.OnExitCodes.Values...)
		}
	}
	for i := range spec.Containers {
		c := &spec.Containers[i]
		if c.RestartPolicy != nil || len(c.RestartPolicyRules) > 0 {
			continue
		}
		codes, ok := named[c.Name]
		if !ok {
			c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyOnFailure)
			continue
		}
		ends := append([]int32{0}, codes...)
		slices.Sort(ends)
		ends = slices.Compact(ends)
		c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyNever)
		if len(ends) <= 255 { // else every non-zero code is named: nothing restarts in place
			c.RestartPolicyRules = []corev1.ContainerRestartRule{{
				Action:    corev1.ContainerRestartRuleActionRestart,
				ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpNotIn, Values: ends},
			}}
		}
	}
}

// restartsInPlace says a container of spec restarts in place (restartInPlace made it so).
func restartsInPlace(spec *corev1.PodSpec) bool {
	for _, c := range spec.Containers {
		if p := c.RestartPolicy; p != nil && (*p != corev1.ContainerRestartPolicyNever || len(c.RestartPolicyRules) > 0) {
			return true
		}
	}
	return false
}

// masterRestartOverridden says the master Job runs its pods with restartPolicy Never where its
// template says OnFailure: a rule acts on the master's exit codes (masterExitCodeRules), and a
// pod failure policy needs pods that are not restarted in place.
func (s *Spec) masterRestartOverridden() bool {
	return s.Master.Template.Spec.RestartPolicy == corev1.RestartPolicyOnFailure && len(s.masterExitCodeRules()) > 0
}
