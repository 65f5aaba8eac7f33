package engine

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// waitingJob is a master Job whose pods wait for their workers (troupe-wait init container).
func waitingJob(j *batchv1.Job) {
	j.Spec.Template.Spec.InitContainers = []corev1.Container{{Name: troupev1.ContainerLauncherWait}}
}

// waitPod is a master pod created at created whose troupe-wait is in state.
func waitPod(name string, created metav1.Time, state corev1.ContainerState, restarts int32) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: created, Labels: map[string]string{troupev1.LabelRole: troupev1.RoleMaster}},
		Status: corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{{
			Name: troupev1.ContainerLauncherWait, State: state, RestartCount: restarts,
		}}},
	}
}

var (
	waitPending = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}
	waitBackOff = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
	waitRunning = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: t0}}
)

func waitEnded(code int32, msg string) corev1.ContainerState {
	return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: code, Message: msg, StartedAt: t0, FinishedAt: metav1.NewTime(t0.Add(4 * time.Second)),
	}}
}

func TestLauncherWaitingCondition(t *testing.T) {
	// testSpec: worker sets cpu (2) and gpu (1) of job train in namespace ml.
	cpu0 := namedPod("train-workerset-cpu-0", true)
	cpu1 := namedPod("train-workerset-cpu-1", false)
	gpu0 := namedPod("train-workerset-gpu-0", true)
	const notReady = "the launcher waits for its workers to answer; hosts not ready: "
	tests := map[string]struct {
		job    func(*batchv1.Job) // nil: no master Job observed
		noJob  bool
		pods   []corev1.Pod
		status metav1.ConditionStatus
		reason string
		msg    string
	}{
		"nothing created yet": {
			noJob: true, status: "False", reason: troupev1.ReasonWaitNotStarted,
			msg: "the launcher has not started waiting for its workers",
		},
		"a launcher without the wait": {
			pods:   []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{troupev1.LabelRole: troupev1.RoleMaster}}}},
			status: "False", reason: troupev1.ReasonNoLauncherWait, msg: "the launcher starts without waiting for its workers",
		},
		"no launcher pod yet": {
			job: waitingJob, status: "False", reason: troupev1.ReasonWaitNotStarted,
			msg: "the launcher has not started waiting for its workers",
		},
		"the launcher pod starts its containers": {
			job: waitingJob, pods: []corev1.Pod{waitPod("l-a", t0, waitPending, 0), cpu0},
			status: "False", reason: troupev1.ReasonWaitNotStarted, msg: "the launcher has not started waiting for its workers",
		},
		"waiting: the hosts not ready are named": {
			job: waitingJob, pods: []corev1.Pod{waitPod("l-a", t0, waitRunning, 0), cpu0, cpu1},
			status: "True", reason: troupev1.ReasonWaitingForWorkers,
			msg: notReady + "train-workerset-cpu-1.train.ml.svc, train-workerset-gpu-0.train.ml.svc",
		},
		"waiting for hosts whose pods are ready": {
			job: waitingJob, pods: []corev1.Pod{waitPod("l-a", t0, waitRunning, 0), cpu0, namedPod("train-workerset-cpu-1", true), gpu0},
			status: "True", reason: troupev1.ReasonWaitingForWorkers,
			msg: "the launcher waits for its workers to answer; every worker pod is ready",
		},
		"a wait restarted in place still waits": {
			job: waitingJob, pods: []corev1.Pod{waitPod("l-a", t0, waitBackOff, 1), cpu0, cpu1, gpu0},
			status: "True", reason: troupev1.ReasonWaitingForWorkers, msg: notReady + "train-workerset-cpu-1.train.ml.svc",
		},
		"the workers answered": {
			job: waitingJob, pods: []corev1.Pod{waitPod("l-a", t0, waitEnded(0, ""), 0)},
			status: "False", reason: troupev1.ReasonWorkersReached, msg: "the launcher finished waiting for its workers after 4s",
		},
		"the wait timed out": {
			job: waitingJob, pods: []corev1.Pod{waitPod("l-a", t0, waitEnded(3, "1 of 3 hosts still unreachable over SSH after 5s: h1\n"), 0)},
			status: "False", reason: troupev1.ReasonWaitTimedOut,
			msg: "the launcher's wait for its workers timed out (troupe-wait exited with code 3): 1 of 3 hosts still unreachable over SSH after 5s: h1",
		},
		"the wait failed otherwise": {
			job: waitingJob, pods: []corev1.Pod{waitPod("l-a", t0, waitEnded(1, ""), 0)},
			status: "False", reason: troupev1.ReasonWaitFailed,
			msg: "the launcher's wait for its workers failed (troupe-wait exited with code 1)",
		},
		"the Job's retry waits again after a timeout": {
			job: waitingJob, pods: []corev1.Pod{
				waitPod("l-b", t1, waitRunning, 0), waitPod("l-a", t0, waitEnded(3, "late"), 0), cpu0, cpu1, gpu0,
			},
			status: "True", reason: troupev1.ReasonWaitingForWorkers, msg: notReady + "train-workerset-cpu-1.train.ml.svc",
		},
		"a pod being deleted is not the launcher's attempt": {
			job: waitingJob, pods: func() []corev1.Pod {
				gone := waitPod("l-b", t1, waitRunning, 0)
				gone.DeletionTimestamp = &now
				return []corev1.Pod{gone, waitPod("l-a", t0, waitEnded(0, ""), 0)}
			}(),
			status: "False", reason: troupev1.ReasonWorkersReached, msg: "the launcher finished waiting for its workers after 4s",
		},
		"the Job not seen yet, its pod waiting": {
			noJob: true, pods: []corev1.Pod{waitPod("l-a", t0, waitRunning, 0), cpu0, cpu1, gpu0},
			status: "True", reason: troupev1.ReasonWaitingForWorkers, msg: notReady + "train-workerset-cpu-1.train.ml.svc",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o := observe()
			if !tc.noJob {
				o.master(tc.job)
			}
			o.setPods(tc.pods)
			got := launcherWaitingCondition(waitingSpec(), o.obj())
			want := newCondition(troupev1.ConditionLauncherWaiting, tc.status == "True", tc.reason, tc.msg)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("LauncherWaiting (-want +got):\n%s", diff)
			}
		})
	}
}

// A large job's message names the first hosts only; a wait's long termination message is cut.
func TestLauncherWaitingMessagesBounded(t *testing.T) {
	s := waitingSpec()
	s.WorkerSets[0].Replicas = 12 // 13 hosts missing
	o := observe().master(waitingJob)
	o.setPods([]corev1.Pod{waitPod("l-a", t0, waitRunning, 0)})
	if got := launcherWaitingCondition(s, o.obj()).Message; !strings.HasSuffix(got, "train-workerset-cpu-9.train.ml.svc and 3 more") {
		t.Errorf("message %q, want the first 10 hosts and 3 more", got)
	}
	o.setPods([]corev1.Pod{waitPod("l-a", t0, waitEnded(3, strings.Repeat("h", 5000)), 0)})
	if got := launcherWaitingCondition(s, o.obj()).Message; len(got) > maxExitMessage+100 || !strings.HasSuffix(got, "h...") {
		t.Errorf("message of %d bytes, want the termination message cut to %d", len(got), maxExitMessage)
	}
}

// Through computeStatus: a finished job keeps how its last wait ended, even once its pods are
// gone; and the operator's cache keeps what the condition reads of a pod (trimPod).
func TestLauncherWaitingInStatus(t *testing.T) {
	s := waitingSpec()
	running := waitPod("l-a", t0, waitRunning, 0)
	trimmed, err := trimPod(&running)
	if err != nil {
		t.Fatal(err)
	}
	o := observe().master(waitingJob).workers("cpu", 0).workers("gpu", 0)
	o.setPods([]corev1.Pod{*readBack(trimmed)})
	st := computeStatus(s, o.obj(), &troupev1.JobStatus{}, genOfJob, now)
	if c := meta.FindStatusCondition(st.Conditions, troupev1.ConditionLauncherWaiting); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("LauncherWaiting of a trimmed waiting launcher pod: %+v, want True", c)
	}

	timedOut := waitPod("l-a", t0, waitEnded(3, "1 of 3 hosts still unreachable"), 0)
	timedOut.Status.Phase = corev1.PodFailed
	o = observe().master(func(j *batchv1.Job) {
		waitingJob(j)
		finishedJob(batchv1.JobFailed, "PodFailurePolicy", "Container troupe-wait failed with exit code 3")(j)
	})
	o.setPods([]corev1.Pod{timedOut})
	st = computeStatus(s, o.obj(), &st, genOfJob, now)
	if c := meta.FindStatusCondition(st.Conditions, troupev1.ConditionLauncherWaiting); c == nil || c.Reason != troupev1.ReasonWaitTimedOut {
		t.Fatalf("LauncherWaiting after the timeout: %+v, want WaitTimedOut", c)
	}
	// The Job and its pods deleted (ttlSecondsAfterFinished): the condition keeps its word.
	later := computeStatus(s, observe().obj(), &st, genOfJob, now)
	if diff := cmp.Diff(meta.FindStatusCondition(st.Conditions, troupev1.ConditionLauncherWaiting),
		meta.FindStatusCondition(later.Conditions, troupev1.ConditionLauncherWaiting)); diff != "" {
		t.Errorf("LauncherWaiting of a finished job changed (-before +after):\n%s", diff)
	}
}

// The start of a wait is told once, when the condition becomes True.
func TestLauncherWaitEvents(t *testing.T) {
	waiting := func(ok bool, reason string) *troupev1.JobStatus {
		return statusOf(troupev1.JobPending).cond(troupev1.ConditionLauncherWaiting, ok, reason, t0).obj()
	}
	notStarted := waiting(false, troupev1.ReasonWaitNotStarted)
	started := waiting(true, troupev1.ReasonWaitingForWorkers)
	want := []lifecycleEvent{{Type: corev1.EventTypeNormal, Reason: troupev1.EventWaitingForWorkers, Action: "Wait", Message: "message of LauncherWaiting"}}
	if diff := cmp.Diff(want, lifecycleEvents(testSpec(), notStarted, started)); diff != "" {
		t.Errorf("the wait starting (-want +got):\n%s", diff)
	}
	for name, tr := range map[string][2]*troupev1.JobStatus{
		"still waiting":    {started, started},
		"the wait ended":   {started, waiting(false, troupev1.ReasonWorkersReached)},
		"no wait, no news": {statusOf("").obj(), waiting(false, troupev1.ReasonNoLauncherWait)},
	} {
		if got := lifecycleEvents(testSpec(), tr[0], tr[1]); len(got) != 0 {
			t.Errorf("%s: events %+v, want none", name, got)
		}
	}
}

// waitBackend is a backend whose launcher waits in troupe-wait, as the MPI backend's does.
type waitBackend struct{ envBackend }

func (waitBackend) LauncherWaitContainer() string { return troupev1.ContainerLauncherWait }

// waitingSpec is testSpec with a backend whose launcher waits for its workers.
func waitingSpec() *Spec {
	s := testSpec()
	s.Backend = waitBackend{}
	return s
}
