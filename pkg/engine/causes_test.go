package engine

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// stuckPod is a pending worker pod of testSpec's set (named <job>-workerset-<set>-<ordinal>)
// whose main container is as mutate leaves it.
func stuckPod(name string, mutate func(*corev1.Pod)) corev1.Pod {
	p := namedPod(name, false)
	p.Status.Phase = corev1.PodPending
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main"}}
	if mutate != nil {
		mutate(&p)
	}
	return p
}

func waiting(reason, msg string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses[0].State.Waiting = &corev1.ContainerStateWaiting{Reason: reason, Message: msg}
	}
}

// crashing: the main container exited 3 with msg, restarts times, and waits to be started again.
func crashing(msg string, restarts int32) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodRunning
		cs := &p.Status.ContainerStatuses[0]
		cs.RestartCount = restarts
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 20s restarting failed container"}
		cs.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error", Message: msg}
	}
}

func unschedulable(msg string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = nil
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: msg}}
	}
}

func TestCauseOf(t *testing.T) {
	tests := map[string]struct {
		pod  corev1.Pod
		want podCause
		ok   bool
	}{
		"an image that cannot be pulled": {
			pod:  stuckPod("w-0", waiting("ErrImagePull", `failed to pull image "registry.invalid/nope:1": no such host`)),
			want: podCause{Reason: "ImagePullBackOff", Detail: `container main: failed to pull image "registry.invalid/nope:1": no such host`}, ok: true,
		},
		"the kubelet backing off the pull: the same cause": {
			pod:  stuckPod("w-0", waiting("ImagePullBackOff", `Back-off pulling image "registry.invalid/nope:1"`)),
			want: podCause{Reason: "ImagePullBackOff", Detail: `container main: Back-off pulling image "registry.invalid/nope:1"`}, ok: true,
		},
		"a missing ConfigMap key": {
			pod:  stuckPod("w-0", waiting("CreateContainerConfigError", `configmap "cfg" not found`)),
			want: podCause{Reason: "CreateContainerConfigError", Detail: `container main: configmap "cfg" not found`}, ok: true,
		},
		"a runtime's reason, made a condition reason": {
			pod:  stuckPod("w-0", waiting("2 bad-reason!", "x")),
			want: podCause{Reason: "badreason", Detail: "container main: x"}, ok: true,
		},
		"a container exiting at start": {
			pod:  stuckPod("w-0", crashing("missing-dependency\n", 2)),
			want: podCause{Reason: "CrashLoopBackOff", Detail: "container main exited 3 (Error), restarted 2 times: missing-dependency"}, ok: true,
		},
		"exited once, not restarted yet": {
			pod: stuckPod("w-0", func(p *corev1.Pod) {
				p.Status.ContainerStatuses[0].State.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}
			}),
			want: podCause{Reason: "CrashLoopBackOff", Detail: "container main exited 1 (Error)"}, ok: true,
		},
		"no node fits": {
			pod:  stuckPod("w-0", unschedulable("0/7 nodes are available: 7 Insufficient cpu.")),
			want: podCause{Reason: "Unschedulable", Detail: "0/7 nodes are available: 7 Insufficient cpu."}, ok: true,
		},
		"being created":            {pod: stuckPod("w-0", waiting("ContainerCreating", ""))},
		"running":                  {pod: namedPod("train-workerset-cpu-0", true)},
		"restarted, exited 0 once": {pod: stuckPod("w-0", func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning })},
		"being deleted": {pod: stuckPod("w-0", func(p *corev1.Pod) {
			waiting("ImagePullBackOff", "x")(p)
			p.DeletionTimestamp = ptr.To(t0)
		})},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := causeOf(&tc.pod)
			if ok != tc.ok || got != tc.want {
				t.Errorf("causeOf = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// A set's cause is the one most of its pods share; the message names the first pods and says
// what the first of them says.
func TestCauseOfSet(t *testing.T) {
	pods := []corev1.Pod{
		stuckPod("w-0", unschedulable("0/7 nodes are available")),
		stuckPod("w-1", waiting("ImagePullBackOff", "back-off")),
		stuckPod("w-2", waiting("ImagePullBackOff", "back-off")),
		stuckPod("w-3", nil),
	}
	var ptrs []*corev1.Pod
	for i := range pods {
		ptrs = append(ptrs, &pods[i])
	}
	c, ok := causeOfSet("cpu", ptrs)
	want := setCause{Set: "cpu", Reason: "ImagePullBackOff", Pods: []string{"w-1", "w-2"}, Detail: "w-1: container main: back-off"}
	if !ok || !cmp.Equal(c, want) {
		t.Fatalf("causeOfSet = %+v, %v; want %+v", c, ok, want)
	}
	if got := c.String(); got != "cpu: ImagePullBackOff on 2 pods (w-1, w-2): w-1: container main: back-off" {
		t.Errorf("String = %q", got)
	}
	if _, ok := causeOfSet("cpu", ptrs[3:]); ok {
		t.Errorf("a set whose pods are on their way has no cause")
	}
}

// WorkersReady, Running, ReplicaFailure and status.reason name what holds the job.
func TestStatusNamesTheCause(t *testing.T) {
	now := t0
	conds := func(st troupev1.JobStatus) map[string]*metav1.Condition {
		out := map[string]*metav1.Condition{}
		for _, ty := range []string{troupev1.ConditionWorkersReady, troupev1.ConditionRunning, troupev1.ConditionReplicaFailure} {
			out[ty] = meta.FindStatusCondition(st.Conditions, ty)
		}
		return out
	}

	t.Run("workers that cannot pull their image", func(t *testing.T) {
		o := observe().master(nil).workers("cpu", 0).workers("gpu", 1).withPods(
			stuckPod("train-workerset-cpu-0", waiting("ImagePullBackOff", `Back-off pulling image "registry.invalid/nope:1"`)),
			stuckPod("train-workerset-cpu-1", waiting("ErrImagePull", "no such host")),
			namedPod("train-workerset-gpu-0", true),
		).obj()
		st := computeStatus(testSpec(), o, &troupev1.JobStatus{}, 1, now)
		c := conds(st)[troupev1.ConditionWorkersReady]
		want := `waiting for workers: cpu: 0/2 ready; cpu: ImagePullBackOff on 2 pods (train-workerset-cpu-0, train-workerset-cpu-1): ` +
			`train-workerset-cpu-0: container main: Back-off pulling image "registry.invalid/nope:1"; hosts not ready: ` +
			`train-workerset-cpu-0.train.ml.svc, train-workerset-cpu-1.train.ml.svc`
		if c.Status != metav1.ConditionFalse || c.Reason != troupev1.ReasonImagePullBackOff || c.Message != want {
			t.Errorf("WorkersReady = %s/%s %q\nwant False/ImagePullBackOff %q", c.Status, c.Reason, c.Message, want)
		}
		if st.Reason != troupev1.ReasonImagePullBackOff {
			t.Errorf("status.reason = %q, want ImagePullBackOff", st.Reason)
		}
	})

	t.Run("a worker that exits at start", func(t *testing.T) {
		o := observe().master(nil).workers("cpu", 1).workers("gpu", 1).withPods(
			stuckPod("train-workerset-cpu-0", crashing("missing-dependency", 3)),
			namedPod("train-workerset-cpu-1", true), namedPod("train-workerset-gpu-0", true),
		).obj()
		st := computeStatus(testSpec(), o, &troupev1.JobStatus{}, 1, now)
		c := conds(st)
		if w := c[troupev1.ConditionWorkersReady]; w.Reason != troupev1.ReasonCrashLoopBackOff ||
			!strings.Contains(w.Message, "container main exited 3 (Error), restarted 3 times: missing-dependency") {
			t.Errorf("WorkersReady = %s %q, want CrashLoopBackOff with the exit", w.Reason, w.Message)
		}
		// A pod that restarts has not failed, but ReplicaFailure never says "no pod failed" then.
		if r := c[troupev1.ConditionReplicaFailure]; r.Status != metav1.ConditionTrue || r.Reason != troupev1.ReasonPodsRestarting ||
			!strings.HasPrefix(r.Message, "cpu: 3 restarts; cpu: CrashLoopBackOff on pod (train-workerset-cpu-0)") {
			t.Errorf("ReplicaFailure = %s/%s %q, want True/PodsRestarting naming the set and the exit", r.Status, r.Reason, r.Message)
		}
		if st.ReplicaStatuses[1].Restarts != 3 {
			t.Errorf("restarts of set cpu = %d, want 3", st.ReplicaStatuses[1].Restarts)
		}
	})

	t.Run("a crash-looping worker, Ready for a moment between its restarts: the cause stays until the job starts", func(t *testing.T) {
		restarted := namedPod("train-workerset-cpu-0", true)
		restarted.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", Ready: true, RestartCount: 2,
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error"}}}}
		o := observe().master(nil).workers("cpu", 2).workers("gpu", 1).withPods(restarted,
			namedPod("train-workerset-cpu-1", true), namedPod("train-workerset-gpu-0", true)).obj()
		prev := &troupev1.JobStatus{Phase: troupev1.JobPending, Reason: troupev1.ReasonCrashLoopBackOff}
		st := computeStatus(testSpec(), o, prev, 1, t0)
		if w := conds(st)[troupev1.ConditionWorkersReady]; w.Status != metav1.ConditionTrue || st.Phase != troupev1.JobPending ||
			st.Reason != troupev1.ReasonCrashLoopBackOff {
			t.Errorf("WorkersReady %s, phase %s, status.reason %q; want True, Pending, CrashLoopBackOff kept", w.Status, st.Phase, st.Reason)
		}
		running := &troupev1.JobStatus{Phase: troupev1.JobRunning, Reason: troupev1.ReasonCrashLoopBackOff}
		if st := computeStatus(testSpec(), o, running, 1, t0); st.Reason != "" {
			t.Errorf("a running job keeps status.reason %q", st.Reason)
		}
	})

	t.Run("a master the scheduler cannot place", func(t *testing.T) {
		master := stuckPod("train-master-x", unschedulable("0/7 nodes are available: 7 Insufficient nvidia.com/gpu."))
		master.Labels = map[string]string{troupev1.LabelRole: troupev1.RoleMaster}
		o := observe().master(nil).workers("cpu", 2).workers("gpu", 1).withPods(master,
			namedPod("train-workerset-cpu-0", true), namedPod("train-workerset-cpu-1", true), namedPod("train-workerset-gpu-0", true)).obj()
		st := computeStatus(testSpec(), o, &troupev1.JobStatus{}, 1, now)
		r := conds(st)[troupev1.ConditionRunning]
		if r.Reason != troupev1.ReasonUnschedulable ||
			r.Message != "the master is not running: master: Unschedulable on pod (train-master-x): train-master-x: 0/7 nodes are available: 7 Insufficient nvidia.com/gpu." {
			t.Errorf("Running = %s %q", r.Reason, r.Message)
		}
		if st.Reason != troupev1.ReasonUnschedulable {
			t.Errorf("status.reason = %q, want Unschedulable", st.Reason)
		}
	})

	t.Run("the launcher's wait timed out: the failure says why the hosts were missing", func(t *testing.T) {
		o := observe().master(finishedJob(batchv1.JobFailed, "PodFailurePolicy", "Container troupe-wait failed with exit code 3")).
			workers("cpu", 0).workers("gpu", 1).withPods(
			stuckPod("train-workerset-cpu-0", unschedulable("0/7 nodes are available: 7 Insufficient cpu.")),
			stuckPod("train-workerset-cpu-1", unschedulable("0/7 nodes are available: 7 Insufficient cpu.")),
			namedPod("train-workerset-gpu-0", true)).obj()
		st := computeStatus(testSpec(), o, &troupev1.JobStatus{Phase: troupev1.JobPending}, 1, now)
		f := meta.FindStatusCondition(st.Conditions, troupev1.ConditionFailed)
		if f == nil || !strings.HasSuffix(f.Message,
			"; workers: cpu: Unschedulable on 2 pods (train-workerset-cpu-0, train-workerset-cpu-1): train-workerset-cpu-0: 0/7 nodes are available: 7 Insufficient cpu.") {
			t.Errorf("Failed = %+v, want the workers' cause", f)
		}
		if st.Reason != "PodFailurePolicy" {
			t.Errorf("status.reason = %q, want the failure's reason", st.Reason)
		}
	})
}

// Pods the scheduler holds back because the job's gang is not admitted are named as such, with
// what the PodGroup says first.
func TestWithGang(t *testing.T) {
	causes := []setCause{
		{Set: "cpu", Reason: troupev1.ReasonUnschedulable, Pods: []string{"w-0"}, Detail: "w-0: 0/2 nodes are available"},
		{Set: "gpu", Reason: troupev1.ReasonImagePullBackOff, Pods: []string{"g-0"}, Detail: "g-0: back-off"},
	}
	waitingGang := &metav1.Condition{Type: troupev1.ConditionGangScheduled, Status: metav1.ConditionFalse,
		Reason: troupev1.ReasonGangWaiting, Message: "PodGroup train is Pending: waiting for 4 pods to fit together"}
	got := withGang(causes, waitingGang)
	if got[0].Reason != troupev1.ReasonGangNotAdmitted ||
		got[0].Detail != "PodGroup train is Pending: waiting for 4 pods to fit together; w-0: 0/2 nodes are available" {
		t.Errorf("unschedulable pods of a waiting gang: %+v", got[0])
	}
	if !cmp.Equal(got[1], causes[1]) || causes[0].Reason != troupev1.ReasonUnschedulable {
		t.Errorf("other causes, or the input, changed: %+v, %+v", got[1], causes[0])
	}
	admitted := &metav1.Condition{Status: metav1.ConditionTrue}
	if got := withGang(causes, admitted); got[0].Reason != troupev1.ReasonUnschedulable {
		t.Errorf("an admitted gang's unschedulable pods: %+v", got[0])
	}
	if got := withGang(causes, nil); got[0].Reason != troupev1.ReasonUnschedulable {
		t.Errorf("no gang: %+v", got[0])
	}
}

// A worker restarted runPolicy.workerRestartLimit times fails the job without a failure policy,
// restarts it with one, and is left alone without a limit (an elastic HorovodJob).
func TestCrashLoopingWorker(t *testing.T) {
	loopingObs := func(restarts int32) *Observed {
		return observe().master(runningMaster).workers("cpu", 1).workers("gpu", 1).withPods(
			stuckPod("train-workerset-cpu-0", crashing("missing-dependency", restarts)),
			namedPod("train-workerset-cpu-1", true), namedPod("train-workerset-gpu-0", true)).obj()
	}
	prev := &troupev1.JobStatus{Phase: troupev1.JobPending}
	const cause = "worker pod train-workerset-cpu-0 crash-looped: container main exited 3 (Error), restarted 3 times: missing-dependency"

	s := testSpec()
	s.RunPolicy.WorkerRestartLimit = ptr.To[int32](3)
	if p := planRestart(s, loopingObs(2), prev); p.seen.Cause != "" {
		t.Errorf("under the limit: %+v", p.seen)
	}
	p := planRestart(s, loopingObs(3), prev)
	if p.seen.Cause != cause || !p.seen.WorkerLost || !p.seen.CrashLoop || p.state.Deciding {
		t.Fatalf("at the limit, no failure policy: %+v %+v", p.seen, p.state)
	}
	s.Plan.RestartSeen = p.seen
	st := computeStatus(s, loopingObs(3), prev, 1, t0)
	f := meta.FindStatusCondition(st.Conditions, troupev1.ConditionFailed)
	if st.Phase != troupev1.JobFailed || f == nil || f.Reason != troupev1.ReasonWorkerCrashLooping ||
		f.Message != cause+" (runPolicy.workerRestartLimit: 3)" || st.Reason != troupev1.ReasonWorkerCrashLooping {
		t.Errorf("phase %s, Failed %+v, reason %q; want Failed, WorkerCrashLooping", st.Phase, f, st.Reason)
	}
	// Its launcher is stopped once the failure is written, as for a lost worker.
	failed := &troupev1.JobStatus{Phase: troupev1.JobFailed, Conditions: []metav1.Condition{*f}}
	if p := planRestart(s, loopingObs(3), failed); p.launcherToStop == nil {
		t.Errorf("the failed job's launcher is not stopped")
	}

	s = testSpec()
	s.RunPolicy.WorkerRestartLimit = ptr.To[int32](3)
	s.RunPolicy.FailurePolicy = &troupev1.FailurePolicy{MaxRestarts: 2}
	if p := planRestart(s, loopingObs(3), prev); p.seen.Cause != cause || !p.seen.CrashLoop || !p.state.Deciding {
		t.Errorf("with restarts left: %+v %+v, want a restart decided", p.seen, p.state)
	}

	s = testSpec() // no limit
	if p := planRestart(s, loopingObs(30), prev); p.seen.Cause != "" {
		t.Errorf("without a limit: %+v", p.seen)
	}
	s.RunPolicy.WorkerRestartLimit = ptr.To[int32](3)
	s.RunPolicy.Suspend = ptr.To(true)
	if p := planRestart(s, loopingObs(3), prev); p.seen.Cause != "" {
		t.Errorf("a suspended job's workers are released: %+v", p.seen)
	}
}

// A cause is told once, as a Warning event, when it is first written (status.reason, so a cause
// of the workers and the master alike is one event); a new message of the same cause (a count,
// the kubelet's words) is no new event, nor a failure (its own event tells it).
func TestCauseEventsOnce(t *testing.T) {
	s := testSpec()
	status := func(reason, msg string) *troupev1.JobStatus {
		st := &troupev1.JobStatus{Phase: troupev1.JobPending, Conditions: []metav1.Condition{
			{Type: troupev1.ConditionWorkersReady, Status: metav1.ConditionFalse, Reason: reason, Message: msg},
			{Type: troupev1.ConditionRunning, Status: metav1.ConditionFalse, Reason: reason, Message: "the master: " + msg},
		}}
		if reason != troupev1.ReasonWorkersNotReady {
			st.Reason = reason // as computeStatus says it of a cause (TestStatusNamesTheCause)
		}
		return st
	}
	causeEvents := func(prev, next *troupev1.JobStatus) (out []string) {
		for _, e := range lifecycleEvents(s, prev, next) {
			if e.Type == corev1.EventTypeWarning {
				out = append(out, e.Reason+": "+e.Message)
			}
		}
		return out
	}
	first := status(troupev1.ReasonImagePullBackOff, "cpu: ImagePullBackOff on pod (w-0)")
	if got := causeEvents(status(troupev1.ReasonWorkersNotReady, "waiting"), first); !cmp.Equal(got, []string{"ImagePullBackOff: cpu: ImagePullBackOff on pod (w-0)"}) {
		t.Errorf("a new cause: %v", got)
	}
	if got := causeEvents(first, status(troupev1.ReasonImagePullBackOff, "cpu: ImagePullBackOff on 2 pods (w-0, w-1)")); len(got) != 0 {
		t.Errorf("the same cause again: %v", got)
	}
	if got := causeEvents(first, status(troupev1.ReasonCrashLoopBackOff, "cpu: CrashLoopBackOff")); len(got) != 1 {
		t.Errorf("another cause: %v", got)
	}
	if got := causeEvents(first, status(troupev1.ReasonWorkersNotReady, "waiting")); len(got) != 0 {
		t.Errorf("no cause any more: %v", got)
	}
	failed := status(troupev1.ReasonCrashLoopBackOff, "x")
	failed.Phase, failed.Reason = troupev1.JobFailed, troupev1.ReasonWorkerCrashLooping
	for _, e := range causeEvents(first, failed) {
		if !strings.HasPrefix(e, troupev1.EventFailed+": ") {
			t.Errorf("a failure told as a cause: %v", e)
		}
	}
}

// The cache keeps what says why a pod does not run, cut short, and the pod watch wakes the job
// when it changes.
func TestTrimPodKeepsWhyNotRunning(t *testing.T) {
	long := "the start " + strings.Repeat("x", 5000) + " the end"
	pod := stuckPod("train-workerset-cpu-0", crashing(long, 2))
	pod.Status.ContainerStatuses[0].State.Waiting.Message = long
	pod.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: long},
		{Type: corev1.ContainersReady, Status: corev1.ConditionFalse},
	}
	trimmed, err := trimPod(&pod)
	if err != nil {
		t.Fatal(err)
	}
	tp := readBack(trimmed)
	cs := tp.Status.ContainerStatuses[0]
	// The start of the kubelet's and the scheduler's words, the end of a log.
	if w := cs.State.Waiting; w == nil || w.Reason != "CrashLoopBackOff" || len(w.Message) > maxCauseText || !strings.HasPrefix(w.Message, "the start") {
		t.Errorf("waiting = %+v", cs.State.Waiting)
	}
	if l := cs.LastTerminationState.Terminated; l == nil || l.ExitCode != 3 || len(l.Message) > maxCauseText+3 || !strings.HasSuffix(l.Message, "the end") {
		t.Errorf("last termination = %+v", l)
	}
	if len(tp.Status.Conditions) != 1 || tp.Status.Conditions[0].Type != corev1.PodScheduled ||
		len(tp.Status.Conditions[0].Message) > maxCauseText || !strings.HasPrefix(tp.Status.Conditions[0].Message, "the start") {
		t.Errorf("conditions = %+v, want PodScheduled alone", tp.Status.Conditions)
	}
	if c, ok := causeOf(tp); !ok || c.Reason != troupev1.ReasonCrashLoopBackOff {
		t.Errorf("the trimmed pod's cause = %+v, %v", c, ok)
	}

	// Scheduled now: the condition goes (a scheduled pod's PodScheduled says nothing).
	pod.Status.Conditions[0].Status, pod.Status.Conditions[0].Reason, pod.Status.Conditions[0].Message = corev1.ConditionTrue, "", ""
	if trimmed, _ := trimPod(&pod); len(readBack(trimmed).Status.Conditions) != 0 {
		t.Errorf("a scheduled pod keeps %+v", readBack(trimmed).Status.Conditions)
	}

	before := stuckPod("train-workerset-cpu-0", waiting("ContainerCreating", ""))
	after := stuckPod("train-workerset-cpu-0", waiting("ErrImagePull", "no such host"))
	if sameForEngine(newCachedPod(&before), newCachedPod(&after)) {
		t.Errorf("a pod that cannot pull its image wakes no pass")
	}
}
