package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

func TestCountsOnly(t *testing.T) {
	base := troupev1.JobStatus{
		Phase: troupev1.JobRunning,
		Conditions: []metav1.Condition{
			{Type: troupev1.ConditionWorkersReady, Status: metav1.ConditionFalse, Reason: troupev1.ReasonWorkersNotReady, Message: "waiting for workers: ws0: 1/8 ready"},
			{Type: troupev1.ConditionRunning, Status: metav1.ConditionTrue, Reason: "MasterRunning", Message: "the master is running"},
		},
		ReplicaStatuses: []troupev1.ReplicaStatus{{Name: "master", Replicas: 1, Active: 1}, {Name: "ws0", Replicas: 8, Ready: 1}},
		Pods:            troupev1.PodPhaseCounts{Running: 2, Pending: 7},
		Workers:         "1/8",
	}
	tests := map[string]struct {
		change func(st *troupev1.JobStatus)
		want   bool
	}{
		"a ready worker more": {change: func(st *troupev1.JobStatus) {
			st.ReplicaStatuses[1].Ready, st.Pods, st.Workers = 2, troupev1.PodPhaseCounts{Running: 3, Pending: 6}, "2/8"
			st.Conditions[0].Message = "waiting for workers: ws0: 2/8 ready"
		}, want: true},
		"worker replicas and tasks": {change: func(st *troupev1.JobStatus) {
			st.WorkerReplicas = 8
			st.Tasks = []troupev1.TaskStatus{{Type: troupev1.ReplicaWorker}}
			st.Aggregate = &troupev1.Aggregate{Running: 9}
		}, want: true},
		"the phase": {change: func(st *troupev1.JobStatus) { st.Phase = troupev1.JobSucceeded }, want: false},
		"a condition's status": {change: func(st *troupev1.JobStatus) {
			st.Conditions[0].Status, st.Conditions[0].Reason = metav1.ConditionTrue, troupev1.ReasonWorkersReady
		}, want: false},
		"a condition's reason alone": {change: func(st *troupev1.JobStatus) { st.Conditions[0].Reason = troupev1.ReasonWorkersReleased }, want: false},
		"a new condition": {change: func(st *troupev1.JobStatus) {
			st.Conditions = append(st.Conditions, metav1.Condition{Type: troupev1.ConditionFailed, Status: metav1.ConditionTrue, Reason: "X"})
		}, want: false},
		"the start time":          {change: func(st *troupev1.JobStatus) { st.StartTime = &metav1.Time{Time: time.Unix(1, 0)} }, want: false},
		"the observed generation": {change: func(st *troupev1.JobStatus) { st.ObservedGeneration = 2 }, want: false},
		"a generated Secret": {change: func(st *troupev1.JobStatus) {
			st.GeneratedSecrets = []troupev1.GeneratedSecretRecord{{Name: "k", SHA256: "h"}}
		}, want: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			next := base.DeepCopy()
			tc.change(next)
			if got := countsOnly(&base, next); got != tc.want {
				t.Errorf("countsOnly = %t, want %t", got, tc.want)
			}
		})
	}
}

// A change of counts alone reaches the API server within countsWriteDelay of the first one
// seen, carried by the next change of phase if that comes first; a phase change is written at
// once.
func TestCountsWaitPhaseDoesNot(t *testing.T) {
	ctx := context.Background()
	job := &troupev1.ChainerJob{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ml", UID: "uid-1"}}
	c := fakeJobClient(t, job)
	clock := clocktesting.NewFakeClock(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	r := &Reconciler{podCreates: newPodCreatePace(),
		client: c, apiReader: c, recorder: events.NewFakeRecorder(100), adapter: masterOnlyAdapter{},
		gvk:   schema.GroupVersionKind{Group: "troupe.dev", Version: "v1alpha1", Kind: "ChainerJob"},
		clock: clock, deferred: newDeferredWrites(countsWriteDelay),
	}
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(job)}
	pass := func() (reconcile.Result, *troupev1.ChainerJob) {
		t.Helper()
		res, err := r.Reconcile(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		got := &troupev1.ChainerJob{}
		if err := c.Get(ctx, req.NamespacedName, got); err != nil {
			t.Fatal(err)
		}
		return res, got
	}

	// The pass that creates the children writes the status that says they exist: one write,
	// not one saying "creating" and a second once the watch brings them in.
	_, got := pass()
	if !meta.IsStatusConditionTrue(got.Status.Conditions, troupev1.ConditionInitialized) || got.Status.Phase != troupev1.JobPending {
		t.Fatalf("after the creating pass: phase %q, conditions %+v; want Pending and Initialized", got.Status.Phase, got.Status.Conditions)
	}

	// The master's pod appears, Pending: counts only.
	pod := trainMasterPod(corev1.PodPending)
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	res, got := pass()
	if got.Status.Pods.Pending != 0 {
		t.Errorf("a count-only change was written at once: %+v", got.Status.Pods)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > countsWriteDelay {
		t.Errorf("RequeueAfter = %s, want a wake-up within %s", res.RequeueAfter, countsWriteDelay)
	}
	clock.Step(countsWriteDelay / 2)
	if res, _ := pass(); res.RequeueAfter <= 0 || res.RequeueAfter > countsWriteDelay/2 {
		t.Errorf("a later pass moved the deadline: RequeueAfter = %s, want at most %s", res.RequeueAfter, countsWriteDelay/2)
	}
	clock.Step(countsWriteDelay / 2)
	if _, got := pass(); got.Status.Pods.Pending != 1 {
		t.Errorf("the count was not written once its delay passed: %+v", got.Status.Pods)
	}

	// The master runs: the phase changes and is written at once.
	pod.Status.Phase = corev1.PodRunning
	if err := c.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if _, got := pass(); got.Status.Phase != troupev1.JobRunning || got.Status.Pods.Running != 1 {
		t.Errorf("after the master started: phase %q, pods %+v; want Running with its count", got.Status.Phase, got.Status.Pods)
	}
}

// The log of a status write names what changed in a stable order, cleared fields included, so
// that two writes of the same transition read the same.
func TestStatusChangesNamesFieldsInOrder(t *testing.T) {
	now := metav1.Now()
	prev := troupev1.JobStatus{
		Phase: troupev1.JobRunning, Workers: "2/2", WorkerReplicas: 2, WorkerSelector: "a=b",
		StartTime: &now, CompletionTime: &now, Succeeded: 1,
		Conditions: []metav1.Condition{{Type: troupev1.ConditionRunning, Status: metav1.ConditionTrue, Reason: "MasterRunning"}},
	}
	next := troupev1.JobStatus{
		Phase:      troupev1.JobRestarting,
		Conditions: []metav1.Condition{{Type: troupev1.ConditionRunning, Status: metav1.ConditionFalse, Reason: "Restarting"}},
	}
	want := "condition Running=False/Restarting, phase, completionTime (cleared), startTime (cleared), " +
		"succeeded (cleared), workerReplicas (cleared), workerSelector (cleared), workers (cleared)"
	for range 20 { // map order differs from one range to the next
		if got := strings.Join(statusChanges(&prev, &next), ", "); got != want {
			t.Fatalf("statusChanges:\n got %s\nwant %s", got, want)
		}
	}
}

// A spec that cannot run: the job is Pending (or keeps its phase) with Initialized False, the
// reason InvalidSpec or the SpecError's own, and the cause as message.
func TestInvalidSpecStatus(t *testing.T) {
	st, reason := invalidSpecStatus(&troupev1.JobStatus{}, errors.New("spec.x: bad"), 3, now)
	c := meta.FindStatusCondition(st.Conditions, troupev1.ConditionInitialized)
	if st.Phase != troupev1.JobPending || st.ObservedGeneration != 3 || reason != troupev1.ReasonInvalidSpec ||
		c == nil || c.Status != metav1.ConditionFalse || c.Reason != reason || c.Message != "spec.x: bad" {
		t.Errorf("status %+v, reason %s", st, reason)
	}
	running := &troupev1.JobStatus{Phase: troupev1.JobRunning}
	st, reason = invalidSpecStatus(running, &SpecError{Reason: troupev1.ReasonGangUnavailable, Err: errors.New("no Volcano")}, 4, now)
	if st.Phase != troupev1.JobRunning || reason != troupev1.ReasonGangUnavailable || running.Conditions != nil {
		t.Errorf("a running job: phase %s, reason %s, the previous status changed: %+v", st.Phase, reason, running)
	}
}
