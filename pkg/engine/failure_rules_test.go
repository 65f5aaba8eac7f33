package engine

import (
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// Each way a pod fails has the reason the rules match: a disruption first (the DisruptionTarget
// condition's reason), then the kubelet's reason for the pod, then how its containers ended.
func TestPodFailureReason(t *testing.T) {
	disrupted := func(reason string) corev1.PodStatus {
		return corev1.PodStatus{Phase: corev1.PodFailed, Conditions: []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: reason}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137}}}}}
	}
	exited := func(code int32, reason string) corev1.PodStatus {
		return corev1.PodStatus{Phase: corev1.PodFailed,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason}}}}}
	}
	for want, status := range map[troupev1.FailureReason]corev1.PodStatus{
		troupev1.FailurePreempted:        disrupted(corev1.PodReasonPreemptionByScheduler),
		troupev1.FailureEvicted:          disrupted("EvictionByEvictionAPI"),
		troupev1.FailureNodeLost:         disrupted("DeletionByTaintManager"),
		troupev1.FailureDeadlineExceeded: {Phase: corev1.PodFailed, Reason: "DeadlineExceeded"},
		troupev1.FailureOOMKilled:        exited(137, "OOMKilled"),
		troupev1.FailureError:            exited(3, "Error"),
	} {
		p := &corev1.Pod{Status: status}
		if got := podFailure("worker", p).Reason; got != want {
			t.Errorf("%+v: reason %s, want %s", status, got, want)
		}
	}
	deleted := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: ptr.To(metav1.Now())}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if got := podFailure("worker", deleted).Reason; got != troupev1.FailureDeleted {
		t.Errorf("a running pod being deleted: %s, want Deleted", got)
	}
	if f := podFailure("worker", &corev1.Pod{Status: exited(3, "Error")}); f.ExitCodes["c"] != 3 {
		t.Errorf("exit codes %v, want c: 3", f.ExitCodes)
	}
}

// The first rule that matches decides, each criterion it gives must hold, and without one a
// disruption restarts uncounted and anything else restarts counted.
func TestDecideFailure(t *testing.T) {
	fp := &troupev1.FailurePolicy{MaxRestarts: 3, Rules: []troupev1.FailureRule{
		{Name: "bug", Action: troupev1.FailJobAction, OnReplicas: []string{"launcher"},
			OnExitCodes: &troupev1.ExitCodeMatch{Values: []int32{1}, Ranges: []troupev1.ExitCodeRange{{From: 3, To: 9}}}},
		{Name: "sidecar", Action: troupev1.RestartJobAndIgnoreMaxRestartsAction,
			OnExitCodes: &troupev1.ExitCodeMatch{ContainerName: ptr.To("log"), Values: []int32{2}}},
		{Name: "oom", Action: troupev1.RestartJobAction, OnReasons: []troupev1.FailureReason{troupev1.FailureOOMKilled}},
		{Name: "lost-worker", Action: troupev1.IgnoreAction, OnReplicas: []string{"worker"}, OnReasons: []troupev1.FailureReason{troupev1.FailureNodeLost}},
	}}
	for _, tt := range []struct {
		f    Failure
		want FailureDecision
	}{
		{Failure{Replica: "launcher", Reason: troupev1.FailureError, ExitCodes: map[string]int32{"mpi": 5}}, FailureDecision{"bug", troupev1.FailJobAction}},
		{Failure{Replica: "launcher", Reason: troupev1.FailureError, ExitCodes: map[string]int32{"mpi": 2}}, FailureDecision{"", troupev1.RestartJobAction}},
		{Failure{Replica: "worker", Reason: troupev1.FailureError, ExitCodes: map[string]int32{"mpi": 5}}, FailureDecision{"", troupev1.RestartJobAction}},
		{Failure{Replica: "worker", Reason: troupev1.FailureError, ExitCodes: map[string]int32{"log": 2}}, FailureDecision{"sidecar", troupev1.RestartJobAndIgnoreMaxRestartsAction}},
		{Failure{Replica: "worker", Reason: troupev1.FailureOOMKilled, ExitCodes: map[string]int32{"mpi": 137}}, FailureDecision{"oom", troupev1.RestartJobAction}},
		{Failure{Replica: "worker", Reason: troupev1.FailureNodeLost}, FailureDecision{"lost-worker", troupev1.IgnoreAction}},
		{Failure{Replica: "launcher", Reason: troupev1.FailureNodeLost}, FailureDecision{"", troupev1.RestartJobAndIgnoreMaxRestartsAction}},
		{Failure{Replica: "worker", Reason: troupev1.FailurePreempted}, FailureDecision{"", troupev1.RestartJobAndIgnoreMaxRestartsAction}},
		{Failure{Replica: "worker", Reason: troupev1.FailureDeleted}, FailureDecision{"", troupev1.RestartJobAction}},
	} {
		if got := decideFailure(fp, tt.f, "mpi"); got != tt.want {
			t.Errorf("%+v: %+v, want %+v", tt.f, got, tt.want)
		}
	}
}

// A rule on the master's exit codes alone becomes a FailJob rule of the master Job's pod failure
// policy, so the exit ends the Job without its retries; rules that also ask for a reason, that
// Ignore, or that name only workers do not.
func TestMasterExitCodeRules(t *testing.T) {
	s := &Spec{MainContainer: "mpi", RunMode: RunMode{MasterType: troupev1.ReplicaLauncher},
		Master: Master{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "launcher"}}}}}}
	s.RunPolicy.FailurePolicy = &troupev1.FailurePolicy{Rules: []troupev1.FailureRule{
		{Name: "bug", Action: troupev1.FailJobAction, OnExitCodes: &troupev1.ExitCodeMatch{Values: []int32{7, 1}, Ranges: []troupev1.ExitCodeRange{{From: 3, To: 4}}}},
		{Name: "worker-bug", Action: troupev1.FailJobAction, OnReplicas: []string{"worker"}, OnExitCodes: &troupev1.ExitCodeMatch{Values: []int32{2}}},
		{Name: "oom", Action: troupev1.RestartJobAction, OnReasons: []troupev1.FailureReason{troupev1.FailureOOMKilled}, OnExitCodes: &troupev1.ExitCodeMatch{Values: []int32{137}}},
	}}
	rules := BuildMasterJob(s).Spec.PodFailurePolicy.Rules
	if len(rules) != 1 || *rules[0].OnExitCodes.ContainerName != "launcher" || len(rules[0].OnExitCodes.Values) != 4 ||
		rules[0].OnExitCodes.Values[0] != 1 || rules[0].OnExitCodes.Values[3] != 7 {
		t.Errorf("pod failure policy rules %+v, want one FailJob on the launcher's 1, 3, 4, 7", rules)
	}
}

// ignoringAdapter is completingAdapter for an elastic set whose failure policy ignores a failed
// worker.
type ignoringAdapter struct{ completingAdapter }

func (a ignoringAdapter) Describe(job Object, s *Spec) error {
	if err := a.completingAdapter.Describe(job, s); err != nil {
		return err
	}
	s.ElasticWorkers = true
	s.RunPolicy.FailurePolicy = &troupev1.FailurePolicy{Rules: []troupev1.FailureRule{
		{Name: "lost-worker", Action: troupev1.IgnoreAction, OnReplicas: []string{"ws"}},
	}}
	return nil
}

// An elastic job whose rule ignores a lost worker keeps running when a worker Job fails: the
// Job is deleted (by its UID) and made again, with no restart and no failure.
func TestIgnoredWorkerJobIsMadeAgain(t *testing.T) {
	h := newRestartHarness(t, nil)
	h.r.adapter = ignoringAdapter{}
	h.reconcile()
	h.workerJobPodsRun(2)
	h.reconcile()
	failed := h.workerJob(1)
	finishedJob(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded, "Job has reached the specified backoff limit")(failed)
	if err := h.c.Status().Update(h.ctx, failed); err != nil {
		t.Fatal(err)
	}
	st := h.reconcile()
	if st.Phase == troupev1.JobFailed || st.Restarts != 0 || meta.FindStatusCondition(st.Conditions, troupev1.ConditionFailed) != nil {
		t.Fatalf("phase %s, restarts %d, conditions %+v: an ignored worker ended or restarted the job", st.Phase, st.Restarts, st.Conditions)
	}
	h.reconcile()
	if again := h.workerJob(1); terminalJobCondition(again) != nil || !again.DeletionTimestamp.IsZero() {
		t.Errorf("worker Job %s after the ignored failure: conditions %+v, deletion %v; want it made again, new", again.Name,
			again.Status.Conditions, again.DeletionTimestamp)
	}
}

// onFailureMasterAdapter describes the restart harness's job with a master that restarts
// OnFailure (kubeflow's launcher) and a rule on its exit code 42.
type onFailureMasterAdapter struct{ workersAdapter }

func (a onFailureMasterAdapter) Describe(job Object, s *Spec) error {
	err := a.workersAdapter.Describe(job, s)
	s.Master.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	s.RunPolicy.FailurePolicy = &troupev1.FailurePolicy{Rules: []troupev1.FailureRule{{
		Name: "bug", Action: troupev1.FailJobAction, OnExitCodes: &troupev1.ExitCodeMatch{Values: []int32{42}},
	}}}
	return err
}

// A master that restarts OnFailure runs with Never when a rule acts on its exit codes, and the
// job tells it in a Warning event when its master Job is created.
func TestMasterRestartPolicyOverriddenIsTold(t *testing.T) {
	h := newRestartHarness(t, nil)
	h.r.adapter = onFailureMasterAdapter{}
	h.reconcile()
	if got := h.master().Spec.Template.Spec.RestartPolicy; got != corev1.RestartPolicyNever {
		t.Errorf("the master Job's pods restart %s, want Never", got)
	}
	if e := h.event(troupev1.EventRestartPolicyOverridden); !strings.Contains(e, "Warning") || !strings.Contains(e, "train-master") {
		t.Errorf("event %q, want a Warning RestartPolicyOverridden naming the master Job", e)
	}
}

// With container restart rules, an OnFailure master whose exit codes a rule names keeps
// restarting in place for the other codes: the named container ends on 0 and the named codes,
// another container restarts on any failure, a container with its own policy keeps it; without
// them, or for a master written Never, nothing is set.
func TestMasterRestartsInPlaceByRule(t *testing.T) {
	spec := func(restart corev1.RestartPolicy, rules bool) *Spec {
		s := &Spec{MainContainer: "mpi", RunMode: RunMode{MasterType: troupev1.ReplicaLauncher}, ContainerRestartRules: rules}
		s.Master.Template.Spec = corev1.PodSpec{RestartPolicy: restart, Containers: []corev1.Container{
			{Name: "mpi"}, {Name: "log"}, {Name: "own", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyNever)},
		}}
		s.RunPolicy.FailurePolicy = &troupev1.FailurePolicy{Rules: []troupev1.FailureRule{
			{Name: "bug", Action: troupev1.FailJobAction, OnExitCodes: &troupev1.ExitCodeMatch{Values: []int32{42}, Ranges: []troupev1.ExitCodeRange{{From: 3, To: 4}}}},
		}}
		return s
	}
	tmpl := BuildMasterJob(spec(corev1.RestartPolicyOnFailure, true)).Spec.Template.Spec
	if tmpl.RestartPolicy != corev1.RestartPolicyNever {
		t.Fatalf("pod restartPolicy %s, want Never (the Job's pod failure policy needs it)", tmpl.RestartPolicy)
	}
	mpi, log, own := tmpl.Containers[0], tmpl.Containers[1], tmpl.Containers[2]
	if ptr.Deref(mpi.RestartPolicy, "") != corev1.ContainerRestartPolicyNever || len(mpi.RestartPolicyRules) != 1 ||
		mpi.RestartPolicyRules[0].Action != corev1.ContainerRestartRuleActionRestart ||
		mpi.RestartPolicyRules[0].ExitCodes.Operator != corev1.ContainerRestartRuleOnExitCodesOpNotIn ||
		!slices.Equal(mpi.RestartPolicyRules[0].ExitCodes.Values, []int32{0, 3, 4, 42}) {
		t.Errorf("container mpi: restartPolicy %v, rules %+v; want Never, Restart on codes NotIn 0, 3, 4, 42", ptr.Deref(mpi.RestartPolicy, ""), mpi.RestartPolicyRules)
	}
	if ptr.Deref(log.RestartPolicy, "") != corev1.ContainerRestartPolicyOnFailure || len(log.RestartPolicyRules) != 0 {
		t.Errorf("container log: restartPolicy %v, rules %+v; want OnFailure, no rule", ptr.Deref(log.RestartPolicy, ""), log.RestartPolicyRules)
	}
	if ptr.Deref(own.RestartPolicy, "") != corev1.ContainerRestartPolicyNever || len(own.RestartPolicyRules) != 0 {
		t.Errorf("container own: restartPolicy %v, rules %+v; want its own Never kept", ptr.Deref(own.RestartPolicy, ""), own.RestartPolicyRules)
	}
	for name, s := range map[string]*Spec{"no container restart rules": spec(corev1.RestartPolicyOnFailure, false), "a master written Never": spec(corev1.RestartPolicyNever, true)} {
		c := BuildMasterJob(s).Spec.Template.Spec.Containers[0]
		if c.RestartPolicy != nil || len(c.RestartPolicyRules) > 0 {
			t.Errorf("%s: container mpi restartPolicy %v, rules %+v; want none", name, ptr.Deref(c.RestartPolicy, ""), c.RestartPolicyRules)
		}
	}
}

// inPlaceMasterAdapter is onFailureMasterAdapter on a cluster with container restart rules,
// with maxRestarts restarts.
type inPlaceMasterAdapter struct {
	onFailureMasterAdapter
	maxRestarts int32
}

func (a inPlaceMasterAdapter) Describe(job Object, s *Spec) error {
	err := a.onFailureMasterAdapter.Describe(job, s)
	s.ContainerRestartRules = true
	s.RunPolicy.FailurePolicy.MaxRestarts = a.maxRestarts
	return err
}

// restartMasterInPlace plays the kubelet: the master pod's container main exited code and
// was restarted in place, restarts times in all.
func (h *restartHarness) restartMasterInPlace(restarts, code int32) {
	h.t.Helper()
	p := h.pod("train-master-abc0")
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", RestartCount: restarts,
		State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: "Error"}}}}
	if err := h.c.Status().Update(h.ctx, p); err != nil {
		h.t.Fatal(err)
	}
}

// Restarts in place are bounded as the Job controller bounds an OnFailure pod's: once they
// reach the master Job's backoffLimit, the master has failed (reason CrashLoop for the rules):
// with a restart left the job restarts as a whole; without, it fails with the reason an
// OnFailure master Job would have, BackoffLimitExceeded, and its master Job is stopped.
func TestMasterRestartsInPlaceUpToItsBackoffLimit(t *testing.T) {
	for _, maxRestarts := range []int32{1, 0} {
		h := newRestartHarness(t, nil)
		h.r.adapter = inPlaceMasterAdapter{maxRestarts: maxRestarts}
		h.reconcile()
		if e := h.event(troupev1.EventRestartPolicyOverridden); !strings.Contains(e, "restart in place") {
			t.Errorf("event %q, want it to say the containers restart in place", e)
		}
		h.podsRun()
		h.reconcile()
		// The workers' backoffLimit is 1 (workersAdapter): none is spent yet.
		h.restartMasterInPlace(0, 0)
		if st := h.reconcile(); st.Phase != troupev1.JobRunning {
			t.Fatalf("maxRestarts %d: phase %s before any restart, want Running", maxRestarts, st.Phase)
		}
		h.restartMasterInPlace(1, 1)
		st := h.reconcile()
		if maxRestarts == 1 {
			if st.Phase != troupev1.JobRestarting || st.Restarts != 1 {
				t.Fatalf("a restart left: phase %s, restarts %d; want Restarting, 1", st.Phase, st.Restarts)
			}
			msg := meta.FindStatusCondition(st.Conditions, troupev1.ConditionRestarting).Message
			if !strings.Contains(msg, "master pod train-master-abc0 was restarted in place") || !strings.Contains(msg, "container main exited 1") {
				t.Errorf("Restarting message %q, want the pod restarted in place and its exit", msg)
			}
			h.reconcile()
			if h.master() != nil {
				t.Error("the crash-looping attempt's master Job was not deleted for the next attempt")
			}
			continue
		}
		c := meta.FindStatusCondition(st.Conditions, troupev1.ConditionFailed)
		if st.Phase != troupev1.JobFailed || c == nil || c.Reason != batchv1.JobReasonBackoffLimitExceeded ||
			!strings.Contains(c.Message, "restarted in place") || !strings.Contains(c.Message, "no restart left") {
			t.Fatalf("no restart left: phase %s, Failed %+v; want Failed, BackoffLimitExceeded, saying why", st.Phase, c)
		}
		h.reconcile()
		if m := h.master(); m == nil || !ptr.Deref(m.Spec.Suspend, false) {
			t.Error("the failed job's master Job was not suspended: its pod would go on restarting")
		}
	}
}
