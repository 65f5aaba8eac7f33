package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

func workerPod(name string, uid types.UID, attempt string, mutate func(*corev1.Pod)) corev1.Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: uid, Labels: map[string]string{
			troupev1.LabelRole: troupev1.RoleWorker, troupev1.LabelRestartAttempt: attempt,
		}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	if mutate != nil {
		mutate(&p)
	}
	return p
}

// A worker is lost when a pod the status recorded while the launcher ran failed, was
// disrupted, is being deleted, or is gone; not before the launcher ran, not when the job
// scaled it away or released its workers, and never for pods of another attempt.
func TestLostWorker(t *testing.T) {
	spec := func() *Spec {
		s := testSpec()
		s.WorkerSets = s.WorkerSets[:1] // train-workerset-cpu-0 and -1
		s.RunPolicy.FailurePolicy = &troupev1.FailurePolicy{MaxRestarts: 1}
		s.Plan.Restart.Attempt = 1
		return s
	}
	running := troupev1.JobStatus{Phase: troupev1.JobRunning, Restarts: 1, Tasks: []troupev1.TaskStatus{
		{Type: troupev1.ReplicaMaster},
		{Type: troupev1.ReplicaWorker, Status: []troupev1.PodReference{
			{Name: "train-workerset-cpu-0", UID: "w0"}, {Name: "train-workerset-cpu-1", UID: "w1"},
		}},
	}}
	healthy := workerPod("train-workerset-cpu-0", "w0", "1", nil)
	tests := map[string]struct {
		edit func(*Spec)
		prev troupev1.JobStatus
		pods []corev1.Pod
		want string
	}{
		"all alive": {prev: running, pods: []corev1.Pod{healthy, workerPod("train-workerset-cpu-1", "w1", "1", nil)}},
		"failed": {prev: running, pods: []corev1.Pod{healthy, workerPod("train-workerset-cpu-1", "w1", "1", func(p *corev1.Pod) {
			p.Status.Phase, p.Status.Reason = corev1.PodFailed, "Evicted"
		})}, want: "worker pod train-workerset-cpu-1 failed (Evicted)"},
		"evicted": {prev: running, pods: []corev1.Pod{healthy, workerPod("train-workerset-cpu-1", "w1", "1", func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
				Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting"}}
		})}, want: "worker pod train-workerset-cpu-1 was disrupted (EvictionByEvictionAPI: Eviction API: evicting)"},
		"being deleted": {prev: running, pods: []corev1.Pod{healthy, workerPod("train-workerset-cpu-1", "w1", "1", func(p *corev1.Pod) {
			p.DeletionTimestamp = &now
		})}, want: "worker pod train-workerset-cpu-1 is being deleted"},
		"gone":     {prev: running, pods: []corev1.Pod{healthy}, want: "worker pod train-workerset-cpu-1 was deleted"},
		"replaced": {prev: running, pods: []corev1.Pod{healthy, workerPod("train-workerset-cpu-1", "w1-new", "1", nil)}, want: "worker pod train-workerset-cpu-1 was deleted and created again"},
		"two lost": {prev: running, pods: nil, want: "worker pod train-workerset-cpu-0 was deleted (and 1 more)"},
		"failed, not yet recorded": {prev: running, pods: []corev1.Pod{healthy, workerPod("train-workerset-cpu-1", "w1", "1", nil),
			workerPod("train-workerset-cpu-1", "w1b", "1", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed })},
			want: "worker pod train-workerset-cpu-1 failed"},
		"before the launcher ran": {prev: troupev1.JobStatus{Phase: troupev1.JobPending, Restarts: 1, Tasks: running.Tasks}, pods: []corev1.Pod{healthy}},
		"scaled down":             {edit: func(s *Spec) { s.WorkerSets[0].Replicas = 1 }, prev: running, pods: []corev1.Pod{healthy}},
		"suspended":               {edit: func(s *Spec) { s.RunPolicy.Suspend = ptr.To(true) }, prev: running, pods: []corev1.Pod{healthy}},
		"paused":                  {edit: func(s *Spec) { s.RunMode.Pause, s.Plan.Pause = true, true }, prev: running, pods: []corev1.Pod{healthy}},
		"a pod of another attempt": {prev: running, pods: []corev1.Pod{healthy, workerPod("train-workerset-cpu-1", "w1", "1", nil),
			workerPod("train-workerset-cpu-1", "old", "0", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed })}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			s := spec()
			if tt.edit != nil {
				tt.edit(s)
			}
			obs := &Observed{Attempt: currentAttempt(s, &tt.prev)} // as observe splits the pods
			obs.setPods(tt.pods)
			if got, _ := lostWorker(s, obs, &tt.prev); got != tt.want {
				t.Errorf("lostWorker = %q, want %q", got, tt.want)
			}
		})
	}
}

// A failed master Job fails its attempt; one past its deadline, or one that succeeded, does
// not: the job ends as it would without a failure policy.
func TestAttemptFailureOfTheMaster(t *testing.T) {
	s := testSpec()
	s.RunMode.MasterType = troupev1.ReplicaLauncher
	for reason, want := range map[string]string{
		batchv1.JobReasonBackoffLimitExceeded: "launcher Job train-master failed (BackoffLimitExceeded: limit reached)",
		batchv1.JobReasonDeadlineExceeded:     "",
	} {
		obs := observe().master(finishedJob(batchv1.JobFailed, reason, "limit reached")).obj()
		if got := attemptFailure(s, obs, &troupev1.JobStatus{}); got.Cause != want || got.WorkerLost {
			t.Errorf("%s: attemptFailure = %+v; want %q", reason, got, want)
		}
	}
	obs := observe().master(finishedJob(batchv1.JobComplete, "", "")).obj()
	if got := attemptFailure(s, obs, &troupev1.JobStatus{Phase: troupev1.JobRunning}); got.Cause != "" {
		t.Errorf("a succeeded master: %+v", got)
	}
}

// workersAdapter describes a ChainerJob as a master and one worker set of two, with a failure
// policy of its own: enough to drive the reconciler through a restart.
type workersAdapter struct{ maxRestarts *int32 }

func (workersAdapter) NewObject() Object { return &troupev1.ChainerJob{} }
func (workersAdapter) NameLabel() string { return "chainerjob.troupe.dev/name" }
func (a workersAdapter) Describe(job Object, s *Spec) error {
	s.MainContainer = "main"
	s.Master = Master{JobName: job.GetName() + "-master", Template: podTemplate("main"), BackoffLimit: 1}
	s.WorkerSets = []WorkerSet{{Name: "ws", ChildName: job.GetName() + "-workerset-ws", Replicas: 2, Template: podTemplate("main")}}
	if a.maxRestarts != nil {
		s.RunPolicy.FailurePolicy = &troupev1.FailurePolicy{MaxRestarts: *a.maxRestarts}
	}
	return nil
}

// restartHarness runs the reconciler against a fake API server, on which the test plays the
// Job and StatefulSet controllers by hand.
type restartHarness struct {
	t   *testing.T
	ctx context.Context
	c   client.Client
	r   *Reconciler
	rec *events.FakeRecorder
	key client.ObjectKey
}

func newRestartHarness(t *testing.T, maxRestarts *int32) *restartHarness {
	job := &troupev1.ChainerJob{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ml", UID: "uid-1"}}
	c := fakeJobClient(t, job)
	rec := events.NewFakeRecorder(100)
	return &restartHarness{
		t: t, ctx: context.Background(), c: c, rec: rec, key: client.ObjectKeyFromObject(job),
		r: &Reconciler{deferred: newDeferredWrites(0), podCreates: newPodCreatePace(),
			client: c, apiReader: c, recorder: rec, adapter: workersAdapter{maxRestarts: maxRestarts},
			gvk:   schema.GroupVersionKind{Group: "troupe.dev", Version: "v1alpha1", Kind: "ChainerJob"},
			clock: clocktesting.NewFakePassiveClock(now.Time),
		},
	}
}

func (h *restartHarness) reconcile() *troupev1.JobStatus {
	h.t.Helper()
	if _, err := h.r.Reconcile(h.ctx, reconcile.Request{NamespacedName: h.key}); err != nil {
		h.t.Fatal(err)
	}
	var job troupev1.ChainerJob
	if err := h.c.Get(h.ctx, h.key, &job); err != nil {
		h.t.Fatal(err)
	}
	return &job.Status
}

// event returns the first recorded event of reason, dropping the others before it.
func (h *restartHarness) event(reason string) string {
	for {
		select {
		case e := <-h.rec.Events:
			if strings.Contains(e, " "+reason+" ") {
				return e
			}
		default:
			return ""
		}
	}
}

func (h *restartHarness) master() *batchv1.Job {
	h.t.Helper()
	var j batchv1.Job
	err := h.c.Get(h.ctx, client.ObjectKey{Namespace: "ml", Name: "train-master"}, &j)
	if client.IgnoreNotFound(err) != nil {
		h.t.Fatal(err)
	}
	if err != nil {
		return nil
	}
	return &j
}

func (h *restartHarness) workers() *appsv1.StatefulSet {
	h.t.Helper()
	var sts appsv1.StatefulSet
	if err := h.c.Get(h.ctx, client.ObjectKey{Namespace: "ml", Name: "train-workerset-ws"}, &sts); err != nil {
		h.t.Fatal(err)
	}
	return &sts
}

// podsRun plays the controllers: the StatefulSet's pods and the master's pod exist as their
// templates say, Running, and the StatefulSet reports them.
func (h *restartHarness) podsRun() {
	h.t.Helper()
	sts := h.workers()
	n := ptr.Deref(sts.Spec.Replicas, 0)
	for i := range n {
		h.createPod(podOrdinalName(sts.Name, i), sts.Spec.Template)
	}
	sts.Status = appsv1.StatefulSetStatus{ObservedGeneration: sts.Generation, Replicas: n, ReadyReplicas: n}
	if err := h.c.Status().Update(h.ctx, sts); err != nil {
		h.t.Fatal(err)
	}
	m := h.master()
	h.createPod("train-master-abc"+m.Spec.Template.Labels[troupev1.LabelRestartAttempt], m.Spec.Template)
	m.Status.Active, m.Status.Ready = 1, ptr.To[int32](1)
	if err := h.c.Status().Update(h.ctx, m); err != nil {
		h.t.Fatal(err)
	}
}

func (h *restartHarness) createPod(name string, tmpl corev1.PodTemplateSpec) {
	h.t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml", Labels: tmpl.Labels, UID: types.UID(name + "-" + tmpl.Labels[troupev1.LabelRestartAttempt])},
		Spec:       tmpl.Spec,
	}
	if err := h.c.Create(h.ctx, p); err != nil {
		h.t.Fatal(err)
	}
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	if err := h.c.Status().Update(h.ctx, p); err != nil {
		h.t.Fatal(err)
	}
}

// podsGone plays the StatefulSet controller and the garbage collector after a scale to zero.
func (h *restartHarness) podsGone() {
	h.t.Helper()
	if err := h.c.DeleteAllOf(h.ctx, &corev1.Pod{}, client.InNamespace("ml")); err != nil {
		h.t.Fatal(err)
	}
	sts := h.workers()
	sts.Status = appsv1.StatefulSetStatus{ObservedGeneration: sts.Generation}
	if err := h.c.Status().Update(h.ctx, sts); err != nil {
		h.t.Fatal(err)
	}
}

func (h *restartHarness) failMaster() {
	h.t.Helper()
	m := h.master()
	finishedJob(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded, "Job has reached the specified backoff limit")(m)
	m.Status.Active, m.Status.Ready = 0, ptr.To[int32](0)
	if err := h.c.Status().Update(h.ctx, m); err != nil {
		h.t.Fatal(err)
	}
}

func restarting(st *troupev1.JobStatus) string {
	c := meta.FindStatusCondition(st.Conditions, troupev1.ConditionRestarting)
	if c == nil {
		return ""
	}
	return string(c.Status) + "/" + c.Reason
}

// A failed launcher restarts the job as a whole: the failure is recorded first, then the old
// attempt's master Job goes and the workers are held at zero until its pods are gone, then the
// next attempt is created with its label; when that attempt fails too and no restart is left,
// the job fails saying which attempt.
func TestRestartAfterLauncherFailure(t *testing.T) {
	h := newRestartHarness(t, ptr.To[int32](1))
	h.reconcile()
	if got := h.master().Spec.Template.Labels[troupev1.LabelRestartAttempt]; got != "0" {
		t.Fatalf("first master's attempt label = %q, want 0", got)
	}
	h.podsRun()
	if st := h.reconcile(); st.Phase != troupev1.JobRunning {
		t.Fatalf("phase %s, want Running", st.Phase)
	}

	h.failMaster()
	st := h.reconcile()
	if st.Restarts != 1 || st.Phase != troupev1.JobRestarting || restarting(st) != "True/StoppingAttempt" {
		t.Fatalf("after the launcher failed: restarts %d, phase %s, Restarting %s", st.Restarts, st.Phase, restarting(st))
	}
	msg := meta.FindStatusCondition(st.Conditions, troupev1.ConditionRestarting).Message
	if !strings.HasPrefix(msg, "attempt 1 of 1: master Job train-master failed (BackoffLimitExceeded") {
		t.Errorf("Restarting message %q", msg)
	}
	if h.master() == nil || ptr.Deref(h.workers().Spec.Replicas, 0) != 2 {
		t.Fatal("the decision changed children before it was recorded")
	}
	if e := h.event("Restarting"); !strings.HasPrefix(e, "Warning Restarting attempt 1 of 1: master Job train-master failed") {
		t.Errorf("Restarting event %q", e)
	}

	// Stopping: the old master goes, the workers are held at zero with the new template.
	h.reconcile()
	if h.master() != nil {
		t.Fatal("the failed attempt's master Job was not deleted")
	}
	sts := h.workers()
	if ptr.Deref(sts.Spec.Replicas, -1) != 0 || sts.Spec.Template.Labels[troupev1.LabelRestartAttempt] != "1" {
		t.Fatalf("workers while stopping: replicas %d, attempt %q", ptr.Deref(sts.Spec.Replicas, -1), sts.Spec.Template.Labels[troupev1.LabelRestartAttempt])
	}
	if st := h.reconcile(); restarting(st) != "True/StoppingAttempt" || h.master() != nil {
		t.Fatalf("the next attempt started while pods of the failed one remain: %s", restarting(st))
	}

	// The cache shows no pod, but the StatefulSet controller has not reported the scale-down:
	// a pod of the old template could still exist unseen.
	if err := h.c.DeleteAllOf(h.ctx, &corev1.Pod{}, client.InNamespace("ml")); err != nil {
		t.Fatal(err)
	}
	if st := h.reconcile(); restarting(st) != "True/StoppingAttempt" {
		t.Fatalf("the StatefulSet still counts pods: Restarting %s", restarting(st))
	}

	// Every pod gone and the StatefulSet says so: recorded first, then created.
	h.podsGone()
	if st := h.reconcile(); restarting(st) != "True/StartingAttempt" || h.master() != nil {
		t.Fatalf("once the pods are gone: Restarting %s, master %v", restarting(st), h.master() != nil)
	}
	h.reconcile()
	if m := h.master(); m == nil || m.Spec.Template.Labels[troupev1.LabelRestartAttempt] != "1" {
		t.Fatal("no master Job of attempt 1")
	}
	if ptr.Deref(h.workers().Spec.Replicas, 0) != 2 {
		t.Fatal("the workers were not scaled back")
	}
	h.podsRun()
	st = h.reconcile()
	if st.Phase != troupev1.JobRunning || restarting(st) != "False/AttemptRunning" || st.Restarts != 1 {
		t.Fatalf("attempt 1 running: phase %s, Restarting %s, restarts %d", st.Phase, restarting(st), st.Restarts)
	}

	// No restart left: the job fails and says which attempt.
	h.failMaster()
	st = h.reconcile()
	failed := meta.FindStatusCondition(st.Conditions, troupev1.ConditionFailed)
	if restarting(st) != "False/AttemptRunning" {
		t.Errorf("Restarting after the job failed: %s", restarting(st))
	}
	if st.Phase != troupev1.JobFailed || st.Restarts != 1 || failed == nil || failed.Reason != batchv1.JobReasonBackoffLimitExceeded ||
		!strings.Contains(failed.Message, "in attempt 1; no restart left (runPolicy.failurePolicy.maxRestarts: 1)") {
		t.Fatalf("exhausted: phase %s, restarts %d, Failed %+v", st.Phase, st.Restarts, failed)
	}
}

// With maxRestarts 0, a worker lost while the launcher runs fails the job, naming the pod, and
// the launcher is stopped.
func TestWorkerLostWithoutRestartsLeft(t *testing.T) {
	h := newRestartHarness(t, ptr.To[int32](0))
	h.reconcile()
	h.podsRun()
	h.reconcile()
	if err := h.c.Delete(h.ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "train-workerset-ws-1"}}); err != nil {
		t.Fatal(err)
	}
	st := h.reconcile()
	failed := meta.FindStatusCondition(st.Conditions, troupev1.ConditionFailed)
	if st.Phase != troupev1.JobFailed || failed == nil || failed.Reason != troupev1.ReasonWorkerFailed ||
		failed.Message != "worker pod train-workerset-ws-1 was deleted in attempt 0; no restart left (runPolicy.failurePolicy.maxRestarts: 0)" {
		t.Fatalf("phase %s, Failed %+v", st.Phase, failed)
	}
	h.reconcile()
	if m := h.master(); m == nil || !ptr.Deref(m.Spec.Suspend, false) {
		t.Error("the launcher of the failed job was not stopped")
	}
}

// Without a failure policy nothing changes: no label, and a lost worker ends nothing.
func TestNoFailurePolicyNoRestart(t *testing.T) {
	h := newRestartHarness(t, nil)
	h.reconcile()
	if _, ok := h.master().Spec.Template.Labels[troupev1.LabelRestartAttempt]; ok {
		t.Error("a job without a failure policy got the attempt label")
	}
	h.podsRun()
	h.reconcile()
	if err := h.c.Delete(h.ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "train-workerset-ws-1"}}); err != nil {
		t.Fatal(err)
	}
	if st := h.reconcile(); st.Phase != troupev1.JobRunning || st.Restarts != 0 || restarting(st) != "" {
		t.Errorf("phase %s, restarts %d, Restarting %q", st.Phase, st.Restarts, restarting(st))
	}
	h.failMaster()
	if st := h.reconcile(); st.Phase != troupev1.JobFailed || st.Restarts != 0 {
		t.Errorf("a failed master: phase %s, restarts %d", st.Phase, st.Restarts)
	}
}

// The phase of a restarting job: Restarting from the decision until the next attempt's
// launcher runs; a suspension or pause meanwhile wins; a worker lost with no restart left
// fails the job; a finished job stays as it ended.
func TestRestartPhase(t *testing.T) {
	withReason := func(reason string) *troupev1.JobStatus {
		return &troupev1.JobStatus{Restarts: 1, Conditions: []metav1.Condition{{Type: troupev1.ConditionRestarting, Status: metav1.ConditionTrue, Reason: reason}}}
	}
	tests := map[string]struct {
		edit         func(*Spec, *Observed)
		prev         *troupev1.JobStatus
		p            troupev1.JobPhase
		want         troupev1.JobPhase
		wantRestarts int32
	}{
		"deciding": {edit: func(s *Spec, _ *Observed) { s.Plan.Restart.Deciding = true }, prev: &troupev1.JobStatus{}, p: troupev1.JobPending,
			want: troupev1.JobRestarting, wantRestarts: 1},
		"stopping":                   {prev: withReason(troupev1.ReasonStoppingAttempt), p: troupev1.JobPending, want: troupev1.JobRestarting, wantRestarts: 1},
		"starting, launcher pending": {prev: withReason(troupev1.ReasonStartingAttempt), p: troupev1.JobPending, want: troupev1.JobRestarting, wantRestarts: 1},
		"starting, launcher runs":    {prev: withReason(troupev1.ReasonStartingAttempt), p: troupev1.JobRunning, want: troupev1.JobRunning, wantRestarts: 1},
		"suspended while stopping":   {prev: withReason(troupev1.ReasonStoppingAttempt), p: troupev1.JobSuspended, want: troupev1.JobSuspended, wantRestarts: 1},
		"worker lost, none left": {edit: func(s *Spec, _ *Observed) {
			s.Plan.RestartSeen = RestartObservation{Cause: "worker pod w-1 was deleted", WorkerLost: true}
		},
			prev: &troupev1.JobStatus{Phase: troupev1.JobRunning}, p: troupev1.JobRunning, want: troupev1.JobFailed},
		"succeeded stays": {prev: withReason(troupev1.ReasonStartingAttempt), p: troupev1.JobSucceeded, want: troupev1.JobSucceeded, wantRestarts: 1},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			s, obs := testSpec(), &Observed{}
			s.RunPolicy.FailurePolicy = &troupev1.FailurePolicy{MaxRestarts: 2}
			if tt.edit != nil {
				tt.edit(s, obs)
			}
			got, restarts := restartPhase(s, tt.prev, tt.p)
			if got != tt.want || restarts != tt.wantRestarts {
				t.Errorf("restartPhase = %s, %d; want %s, %d", got, restarts, tt.want, tt.wantRestarts)
			}
		})
	}
}

// A job that ends while its next attempt is starting is not restarting any more.
func TestRestartingEndsWithTheJob(t *testing.T) {
	prev := &troupev1.JobStatus{Restarts: 1, Conditions: []metav1.Condition{{
		Type: troupev1.ConditionRestarting, Status: metav1.ConditionTrue, Reason: troupev1.ReasonStartingAttempt, Message: "attempt 1 of 1: x",
	}}}
	for phase, want := range map[troupev1.JobPhase]string{troupev1.JobSucceeded: "False/Succeeded", troupev1.JobFailed: "False/Failed"} {
		st := prev.DeepCopy()
		restartConditions(testSpec(), &Observed{}, prev, phase, nil, func(c metav1.Condition) { meta.SetStatusCondition(&st.Conditions, c) })
		if got := restarting(st); got != want {
			t.Errorf("%s: Restarting %s, want %s", phase, got, want)
		}
	}
}

// staleJobClient serves a job from an old snapshot, as an informer that has not yet seen the
// operator's last status write does; everything else, writes included, goes to the API server.
type staleJobClient struct {
	client.Client
	stale *troupev1.ChainerJob
}

func (c staleJobClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if j, ok := obj.(*troupev1.ChainerJob); ok && key.Name == c.stale.Name {
		c.stale.DeepCopyInto(j)
		return nil
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// A reconcile from a cache that has not seen the recorded restart sees the same failure again;
// its status write carries the old resourceVersion and is refused, so the failure counts once
// and no second Restarting event is recorded.
func TestRestartCountsOnceFromAStaleCache(t *testing.T) {
	h := newRestartHarness(t, ptr.To[int32](3))
	h.reconcile()
	h.podsRun()
	h.reconcile()
	h.failMaster()
	var stale troupev1.ChainerJob
	if err := h.c.Get(h.ctx, h.key, &stale); err != nil {
		t.Fatal(err)
	}
	if st := h.reconcile(); st.Restarts != 1 {
		t.Fatalf("restarts %d, want 1", st.Restarts)
	}
	h.event("Restarting")

	h.r.client = staleJobClient{Client: h.c, stale: &stale}
	st := h.reconcile()
	if st.Restarts != 1 || restarting(st) != "True/StoppingAttempt" {
		t.Errorf("after a reconcile from a stale cache: restarts %d, Restarting %s", st.Restarts, restarting(st))
	}
	if e := h.event("Restarting"); e != "" {
		t.Errorf("a second Restarting event: %q", e)
	}
	if h.master() == nil {
		t.Error("the stale reconcile changed the children")
	}
}

// Restart n waits restartBackoff(n) from the record of its failure: the first not at all, then
// 10 s doubling to 6 min.
func TestRestartBackoff(t *testing.T) {
	for n, want := range map[int32]time.Duration{0: 0, 1: 0, 2: 10 * time.Second, 3: 20 * time.Second, 4: 40 * time.Second,
		7: 320 * time.Second, 8: 6 * time.Minute, 1000: 6 * time.Minute} {
		if got := restartBackoff(n); got != want {
			t.Errorf("restartBackoff(%d) = %s, want %s", n, got, want)
		}
	}
}

// A second restart's attempt waits its backoff after the earlier attempt is gone: the job stays
// StoppingAttempt, says when it goes on, asks to be woken then, and starts the attempt once the
// time has come.
func TestSecondRestartBacksOff(t *testing.T) {
	h := newRestartHarness(t, ptr.To[int32](3))
	clock := clocktesting.NewFakePassiveClock(now.Time)
	h.r.clock = clock
	h.reconcile()
	h.podsRun()
	h.reconcile()
	// The first restart goes on at once.
	h.failMaster()
	h.reconcile()
	h.reconcile()
	h.podsGone()
	if st := h.reconcile(); restarting(st) != "True/StartingAttempt" {
		t.Fatalf("the first restart waits: Restarting %s", restarting(st))
	}
	h.reconcile()
	h.podsRun()
	if st := h.reconcile(); restarting(st) != "False/AttemptRunning" {
		t.Fatalf("attempt 1: Restarting %s", restarting(st))
	}

	// The second waits 10 s from its record.
	clock.SetTime(clock.Now().Add(time.Hour))
	h.failMaster()
	st := h.reconcile()
	msg := meta.FindStatusCondition(st.Conditions, troupev1.ConditionRestarting).Message
	if st.Restarts != 2 || !strings.HasSuffix(msg, "; the next attempt starts 10s after this (restart 2 backs off)") {
		t.Fatalf("restarts %d, Restarting message %q", st.Restarts, msg)
	}
	h.reconcile()
	h.podsGone()
	clock.SetTime(clock.Now().Add(4 * time.Second))
	res, err := h.r.Reconcile(h.ctx, reconcile.Request{NamespacedName: h.key})
	if err != nil {
		t.Fatal(err)
	}
	var job troupev1.ChainerJob
	if err := h.c.Get(h.ctx, h.key, &job); err != nil {
		t.Fatal(err)
	}
	if restarting(&job.Status) != "True/StoppingAttempt" || h.master() != nil {
		t.Fatalf("4 s into a 10 s backoff: Restarting %s, master %v", restarting(&job.Status), h.master() != nil)
	}
	if res.RequeueAfter != 6*time.Second {
		t.Errorf("woken after %s, want 6s", res.RequeueAfter)
	}
	clock.SetTime(clock.Now().Add(6 * time.Second))
	if st := h.reconcile(); restarting(st) != "True/StartingAttempt" {
		t.Fatalf("after the backoff: Restarting %s", restarting(st))
	}
	h.reconcile()
	if m := h.master(); m == nil || m.Spec.Template.Labels[troupev1.LabelRestartAttempt] != "2" {
		t.Fatal("no master Job of attempt 2 after the backoff")
	}
}

// A failed worker Job a rule ignores is made again no sooner than workerReplaceDelay after it
// failed.
func TestFailedWorkerJobIsReplacedAfterADelay(t *testing.T) {
	failedAt := now.Time
	j := &batchv1.Job{Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{
		Type: batchv1.JobFailed, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(failedAt)}}}}
	for after, want := range map[time.Duration]time.Duration{0: 10 * time.Second, 3 * time.Second: 7 * time.Second, 10 * time.Second: 0, time.Hour: 0} {
		if got := replaceLeft(j, failedAt.Add(after)); got != want {
			t.Errorf("%s after the failure: %s left, want %s", after, got, want)
		}
	}
	if got := replaceLeft(&batchv1.Job{}, failedAt); got != 0 {
		t.Errorf("a Job that has not failed: %s left", got)
	}
}
