package engine

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// jobStatus builds a status fluently for the transition tests.
type jobStatus struct{ troupev1.JobStatus }

func statusOf(p troupev1.JobPhase) *jobStatus {
	return &jobStatus{troupev1.JobStatus{Phase: p}}
}

func (s *jobStatus) cond(t string, ok bool, reason string, at metav1.Time) *jobStatus {
	c := newCondition(t, ok, reason, "message of "+t)
	c.LastTransitionTime = at
	s.Conditions = append(s.Conditions, c)
	return s
}

func (s *jobStatus) workers(set string, replicas int32) *jobStatus {
	if len(s.ReplicaStatuses) == 0 {
		s.ReplicaStatuses = []troupev1.ReplicaStatus{{Name: troupev1.MasterReplicaName, Replicas: 1}}
	}
	s.ReplicaStatuses = append(s.ReplicaStatuses, troupev1.ReplicaStatus{Name: set, Replicas: replicas})
	return s
}

func (s *jobStatus) obj() *troupev1.JobStatus { return &s.JobStatus }

func TestLifecycleEvents(t *testing.T) {
	s := testSpec() // master Job train-master, 3 workers
	type ev struct{ Type, Reason, Message string }
	normal, warning := corev1.EventTypeNormal, corev1.EventTypeWarning
	pending := func() *jobStatus {
		return statusOf(troupev1.JobPending).
			cond(troupev1.ConditionSuspended, false, troupev1.ReasonNotSuspended, t0).
			cond(troupev1.ConditionWorkersReady, false, troupev1.ReasonWorkersNotReady, t0).
			workers("ws0", 2)
	}
	cases := []struct {
		name       string
		prev, next *troupev1.JobStatus
		want       []ev
	}{{
		name: "first status: nothing happened yet",
		prev: statusOf("").obj(),
		next: pending().obj(),
	}, {
		name: "gang admitted",
		prev: pending().cond(troupev1.ConditionGangScheduled, false, troupev1.ReasonGangWaiting, t0).obj(),
		next: pending().cond(troupev1.ConditionGangScheduled, true, troupev1.ReasonGangScheduled, t1).obj(),
		want: []ev{{normal, troupev1.EventGangScheduled, "message of GangScheduled"}},
	}, {
		name: "workers ready and master running in one pass",
		prev: pending().obj(),
		next: statusOf(troupev1.JobRunning).
			cond(troupev1.ConditionSuspended, false, troupev1.ReasonNotSuspended, t0).
			cond(troupev1.ConditionWorkersReady, true, troupev1.ReasonWorkersReady, t1).workers("ws0", 2).obj(),
		want: []ev{
			{normal, troupev1.EventWorkersReady, "all 3 worker pods are ready"},
			{normal, troupev1.EventRunning, "the master Job train-master is running"},
		},
	}, {
		name: "a job without workers is not told its workers are ready",
		prev: statusOf(troupev1.JobPending).cond(troupev1.ConditionWorkersReady, true, troupev1.ReasonNoWorkers, t0).obj(),
		next: statusOf(troupev1.JobRunning).cond(troupev1.ConditionWorkersReady, true, troupev1.ReasonNoWorkers, t0).obj(),
		want: []ev{{normal, troupev1.EventRunning, "the master Job train-master is running"}},
	}, {
		name: "scaled while running",
		prev: statusOf(troupev1.JobRunning).workers("ws0", 2).workers("ws1", 1).obj(),
		next: statusOf(troupev1.JobRunning).workers("ws0", 4).workers("ws1", 1).obj(),
		want: []ev{{normal, troupev1.EventScaled, "worker set ws0 scaled from 2 to 4 replicas"}},
	}, {
		name: "suspended: the sets go to zero without a Scaled event",
		prev: pending().obj(),
		next: statusOf(troupev1.JobSuspended).
			cond(troupev1.ConditionSuspended, true, troupev1.ReasonSuspended, t1).workers("ws0", 0).obj(),
		want: []ev{{normal, troupev1.EventSuspended,
			"message of Suspended: the master Job train-master is suspended and the worker sets are scaled to zero"}},
	}, {
		name: "resumed from a suspend",
		prev: statusOf(troupev1.JobSuspended).cond(troupev1.ConditionSuspended, true, troupev1.ReasonSuspended, t0).workers("ws0", 0).obj(),
		next: pending().obj(),
		want: []ev{{normal, troupev1.EventResumed, "runPolicy.suspend was cleared: the job's pods start again"}},
	}, {
		name: "paused",
		prev: statusOf(troupev1.JobRunning).workers("ws0", 2).obj(),
		next: statusOf(troupev1.JobPaused).workers("ws0", 0).obj(),
		want: []ev{{normal, troupev1.EventPaused,
			"runMode.pause.enabled is set: the master Job train-master is deleted and the worker sets are scaled to zero"}},
	}, {
		name: "resuming from a pause",
		prev: statusOf(troupev1.JobPaused).workers("ws0", 0).obj(),
		next: statusOf(troupev1.JobResuming).workers("ws0", 2).obj(),
		want: []ev{{normal, troupev1.EventResuming, "runMode.pause.enabled was cleared: bringing the replicas back"}},
	}, {
		name: "succeeded",
		prev: statusOf(troupev1.JobRunning).obj(),
		next: statusOf(troupev1.JobSucceeded).obj(),
		want: []ev{{normal, troupev1.EventSucceeded, "the master completed successfully"}},
	}, {
		name: "failed, with the Failed condition's message",
		prev: statusOf(troupev1.JobRunning).obj(),
		next: statusOf(troupev1.JobFailed).cond(troupev1.ConditionFailed, true, "BackoffLimitExceeded", t1).obj(),
		want: []ev{{warning, troupev1.EventFailed, "message of Failed"}},
	}, {
		name: "a name taken",
		prev: statusOf(troupev1.JobPending).obj(),
		next: statusOf(troupev1.JobPending).cond(troupev1.ConditionInitialized, false, troupev1.ReasonChildConflict, t1).obj(),
		want: []ev{{warning, troupev1.EventChildConflict, "message of Initialized"}},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []ev
			for _, e := range lifecycleEvents(s, tc.prev, tc.next) {
				got = append(got, ev{e.Type, e.Reason, e.Message})
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			// A pass whose status did not change tells nothing: no event storm however
			// often the job is reconciled.
			if again := lifecycleEvents(s, tc.next, tc.next); len(again) != 0 {
				t.Errorf("events of an unchanged status: %+v", again)
			}
		})
	}
}

func TestStartupBegan(t *testing.T) {
	created := earlier
	t2, t3 := metav1.NewTime(t1.Add(time.Minute)), metav1.NewTime(t1.Add(2*time.Minute))
	// base has the conditions as the first status write leaves them: all at t0.
	base := func(running bool, runAt metav1.Time) *jobStatus {
		return statusOf(troupev1.JobPending).
			cond(troupev1.ConditionRunning, running, troupev1.ReasonMasterNotRunning, runAt)
	}
	cases := []struct {
		name   string
		prev   *troupev1.JobStatus
		want   metav1.Time
		wantOK bool
	}{
		{"the first status", statusOf("").obj(), created, true},
		{"never stopped: from creation",
			base(false, t0).cond(troupev1.ConditionSuspended, false, "", t0).cond(troupev1.ConditionPaused, false, "", t0).obj(), created, true},
		{"the master ran and stopped since (a retry): not a start",
			base(false, t1).cond(troupev1.ConditionSuspended, false, "", t0).cond(troupev1.ConditionPaused, false, "", t0).obj(), created, false},
		{"admitted after waiting suspended: from the admission",
			base(false, t0).cond(troupev1.ConditionSuspended, false, "", t1).cond(troupev1.ConditionPaused, false, "", t0).obj(), t1, true},
		{"preempted after running, then admitted again: from the admission",
			base(false, t1).cond(troupev1.ConditionSuspended, false, "", t2).cond(troupev1.ConditionPaused, false, "", t0).obj(), t2, true},
		{"resumed from a pause: from the resume",
			base(false, t2).cond(troupev1.ConditionSuspended, false, "", t0).cond(troupev1.ConditionPaused, false, troupev1.ReasonResumed, t3).obj(), t3, true},
		{"master running, workers never ready since: from creation",
			base(true, t1).cond(troupev1.ConditionSuspended, false, "", t0).cond(troupev1.ConditionPaused, false, "", t0).
				cond(troupev1.ConditionWorkersReady, false, troupev1.ReasonWorkersNotReady, t0).obj(), created, true},
		{"master running, a worker went and came back: not a start",
			base(true, t1).cond(troupev1.ConditionSuspended, false, "", t0).cond(troupev1.ConditionPaused, false, "", t0).
				cond(troupev1.ConditionWorkersReady, false, troupev1.ReasonWorkersNotReady, t2).obj(), created, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := startupBegan(created, tc.prev)
			if ok != tc.wantOK || (ok && !got.Equal(&tc.want)) {
				t.Errorf("startupBegan = %v, %v; want %v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

// launcherPod is a master pod whose troupe-wait init container ended with code after running
// from start to end.
func launcherPod(name string, created time.Time, phase corev1.PodPhase, code int32, start, end time.Time) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created),
			Labels: map[string]string{troupev1.LabelRole: troupev1.RoleMaster}},
		Status: corev1.PodStatus{Phase: phase, InitContainerStatuses: []corev1.ContainerStatus{{
			Name: troupev1.ContainerLauncherWait,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: code, StartedAt: metav1.NewTime(start), FinishedAt: metav1.NewTime(end)}},
		}}},
	}
}

func TestLauncherWaitMetrics(t *testing.T) {
	timeout := troupev1.ExitCodeLauncherWaitTimeout
	old := launcherPod("old", t0.Time, corev1.PodFailed, timeout, t0.Time, t0.Add(time.Minute))
	crashed := launcherPod("crashed", t1.Time, corev1.PodFailed, 0, t1.Time, t1.Add(time.Second))
	timedOut := launcherPod("late", t1.Time, corev1.PodFailed, timeout, t1.Time, t1.Add(time.Minute))
	running := launcherPod("run", t1.Time, corev1.PodRunning, 0, t1.Time, t1.Add(7*time.Second))

	names := func(ps []*corev1.Pod) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Name)
		}
		return out
	}
	for _, tc := range []struct {
		name        string
		pods        []corev1.Pod
		newlyFailed int32
		want        []string
	}{
		{"the newly failed launcher timed out", []corev1.Pod{old, timedOut}, 1, []string{"late"}},
		{"no new failure: the old timeout was counted before", []corev1.Pod{old, timedOut}, 0, nil},
		{"the newly failed launcher crashed after its wait", []corev1.Pod{old, crashed}, 1, nil},
	} {
		if got := names(launcherWaitTimeouts(masterPods(tc.pods...), tc.newlyFailed, troupev1.ContainerLauncherWait)); !cmp.Equal(got, tc.want) {
			t.Errorf("%s: timeouts %v, want %v", tc.name, got, tc.want)
		}
	}

	if d, ok := launcherWaited(masterPods(old, running), troupev1.ContainerLauncherWait); !ok || d != 7*time.Second {
		t.Errorf("launcherWaited = %v, %v; want 7s", d, ok)
	}
	// The operator's cache trims pods; the wait's times must survive it.
	trimmed, err := trimPod(&running)
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := launcherWaited(masterPods(*readBack(trimmed)), troupev1.ContainerLauncherWait); !ok || d != 7*time.Second {
		t.Errorf("launcherWaited of a trimmed pod = %v, %v; want 7s", d, ok)
	}
	if _, ok := launcherWaited(masterPods(old), troupev1.ContainerLauncherWait); ok {
		t.Error("launcherWaited without a running launcher reported a wait")
	}
}
