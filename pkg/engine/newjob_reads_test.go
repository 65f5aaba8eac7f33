package engine

import (
	"context"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// recordingReader is the API server's reader that notes each read ("Kind name").
type recordingReader struct {
	client.Client
	reads []string
}

func (r *recordingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	gvk, err := apiutil.GVKForObject(obj, r.Scheme())
	if err != nil {
		return err
	}
	r.reads = append(r.reads, gvk.Kind+" "+key.Name)
	return r.Client.Get(ctx, key, obj, opts...)
}

// workersKeysAdapter is a job with a generated Secret, a worker StatefulSet and a master Job.
type workersKeysAdapter struct{ workersAdapter }

func (a workersKeysAdapter) Describe(job Object, s *Spec) error {
	if err := a.workersAdapter.Describe(job, s); err != nil {
		return err
	}
	s.Backend = keysBackend{generated: &keysGenerated}
	return nil
}

// firstPassReads runs the first pass of a new job "train" and returns what it read from the API
// server, failing unless it created every child, the master Job last.
func firstPassReads(t *testing.T, a Adapter) []string {
	t.Helper()
	job := &troupev1.ChainerJob{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ml", UID: "uid-1"}}
	c := fakeJobClient(t, job)
	reader := &recordingReader{Client: c}
	r := &Reconciler{deferred: newDeferredWrites(0), podCreates: newPodCreatePace(),
		client: c, apiReader: reader, recorder: events.NewFakeRecorder(100), adapter: a, gvk: chainerJobGVK,
		clock: clocktesting.NewFakePassiveClock(metav1.Now().Time),
	}
	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(job)}); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ml", Name: "train-master"}, &batchv1.Job{}); err != nil {
		t.Fatalf("the master Job after the first pass: %v", err)
	}
	return reader.reads
}

// A new job's first pass reads from the API server only what its creates would not find in time:
// a child that holds pods and is not the first of them (the master Job after the workers: a
// foreign Job of its name must be found before the workers start), and the job itself before its
// master is created, unless the record of a generated Secret was written in the pass (a write
// with the cached copy's resourceVersion proves that copy the latest). Every read is a request
// in the operator's client budget, before the job's pods can start (docs/performance.md).
func TestNewJobReadsOnlyWhatCreatesCannotFind(t *testing.T) {
	for _, tc := range []struct {
		name    string
		adapter Adapter
		want    []string
	}{
		{"master alone", masterOnlyAdapter{}, []string{"ChainerJob train"}},
		{"master alone, generated Secret", keysAdapter{}, nil},
		{"workers and master", workersAdapter{}, []string{"Job train-master", "ChainerJob train"}},
		{"workers and master, generated Secret", workersKeysAdapter{}, []string{"Job train-master"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := firstPassReads(t, tc.adapter)
			if !slices.Equal(got, tc.want) {
				t.Errorf("reads %v, want %v", got, tc.want)
			}
		})
	}
}

// The read of the master Job guards the workers: with its name taken by a foreign Job, the first
// pass finds it before the StatefulSet is created, and no pod-holding child exists after it.
func TestForeignMasterFoundBeforeTheWorkers(t *testing.T) {
	ctx := context.Background()
	job := &troupev1.ChainerJob{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ml", UID: "uid-1"}}
	foreign := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train-master", Namespace: "ml", UID: "theirs"}}
	cache, apiServer := fakeJobClient(t, job.DeepCopy()), fakeJobClient(t, job.DeepCopy(), foreign)
	r := &Reconciler{deferred: newDeferredWrites(0), podCreates: newPodCreatePace(),
		client: laggingCache{Client: apiServer, cache: cache}, apiReader: apiServer,
		recorder: events.NewFakeRecorder(100), adapter: workersAdapter{}, gvk: chainerJobGVK,
		clock: clocktesting.NewFakePassiveClock(metav1.Now().Time),
	}
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(job)}); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	got := getJob(t, apiServer, client.ObjectKeyFromObject(job))
	if c := meta.FindStatusCondition(got.Status.Conditions, troupev1.ConditionInitialized); c == nil || c.Reason != troupev1.ReasonChildConflict {
		t.Errorf("Initialized = %+v, want reason %s", c, troupev1.ReasonChildConflict)
	}
	var sets appsv1.StatefulSetList
	if err := apiServer.List(ctx, &sets); err != nil {
		t.Fatal(err)
	}
	if len(sets.Items) != 0 {
		t.Errorf("StatefulSet %s created while the master Job's name is taken", sets.Items[0].Name)
	}
}

// statusWrites counts the status writes made through it.
type statusWrites struct {
	client.Client
	n int
}

func (c *statusWrites) Status() client.SubResourceWriter {
	return countedStatusWriter{SubResourceWriter: c.Client.Status(), n: &c.n}
}

type countedStatusWriter struct {
	client.SubResourceWriter
	n *int
}

func (w countedStatusWriter) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	*w.n++
	return w.SubResourceWriter.Update(ctx, obj, opts...)
}

// A new job with a generated Secret costs one status write in its first pass: the status the
// pass has computed so far (Pending, creating its children) with the Secret's record, written
// before the Secret is created. That the rest of its children were created, its start time and
// the Secret's resourceVersion are progress within Pending: they wait (countsWriteDelay) and go
// with the next change, here the master running, without the Secret's data read meanwhile.
func TestNewJobsFirstPassWritesStatusOnce(t *testing.T) {
	ctx := context.Background()
	job := &troupev1.ChainerJob{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ml", UID: "uid-1"}}
	c := &statusWrites{Client: fakeJobClient(t, job)}
	reader := &recordingReader{Client: c.Client}
	clock := clocktesting.NewFakeClock(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))
	r := &Reconciler{deferred: newDeferredWrites(countsWriteDelay), podCreates: newPodCreatePace(),
		client: c, apiReader: reader, recorder: events.NewFakeRecorder(100), adapter: keysAdapter{}, gvk: chainerJobGVK,
		clock: clock,
	}
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(job)}
	pass := func() (reconcile.Result, *troupev1.ChainerJob) {
		t.Helper()
		res, err := r.Reconcile(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return res, getJob(t, c, req.NamespacedName)
	}

	res, got := pass()
	if c.n != 1 {
		t.Errorf("the first pass wrote the status %d times, want once", c.n)
	}
	init := meta.FindStatusCondition(got.Status.Conditions, troupev1.ConditionInitialized)
	if got.Status.Phase != troupev1.JobPending || init == nil || init.Reason != troupev1.ReasonCreatingChildren ||
		len(got.Status.GeneratedSecrets) != 1 || got.Status.GeneratedSecrets[0].ResourceVersion != "" {
		t.Fatalf("after the first pass: phase %q, Initialized %+v, records %+v; want Pending, creating its children, the Secret's record",
			got.Status.Phase, init, got.Status.GeneratedSecrets)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ml", Name: "train-master"}, &batchv1.Job{}); err != nil {
		t.Fatalf("the master Job after the first pass: %v", err)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > countsWriteDelay {
		t.Errorf("RequeueAfter = %s, want a wake-up within %s for the progress", res.RequeueAfter, countsWriteDelay)
	}

	// Passes within the delay write nothing and read no Secret.
	clock.Step(countsWriteDelay / 2)
	if pass(); c.n != 1 {
		t.Errorf("a pass within the delay wrote the status (%d writes)", c.n)
	}
	if slices.Contains(reader.reads, "Secret train-keys") {
		t.Errorf("the Secret's data was read again before its version was recorded: reads %v", reader.reads)
	}

	// The master runs: one write carries the phase and the progress.
	pod := trainMasterPod(corev1.PodRunning)
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	_, got = pass()
	init = meta.FindStatusCondition(got.Status.Conditions, troupev1.ConditionInitialized)
	if c.n != 2 || got.Status.Phase != troupev1.JobRunning || init == nil || init.Status != metav1.ConditionTrue ||
		got.Status.GeneratedSecrets[0].ResourceVersion == "" {
		t.Errorf("after the master started: %d writes, phase %q, Initialized %+v, records %+v; want 2 writes, Running, "+
			"Initialized True and the Secret's version", c.n, got.Status.Phase, init, got.Status.GeneratedSecrets)
	}
}

// Progress alone left waiting is written once its delay has passed.
func TestProgressWrittenWithinTheDelay(t *testing.T) {
	ctx := context.Background()
	job := &troupev1.ChainerJob{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ml", UID: "uid-1"}}
	c := fakeJobClient(t, job)
	clock := clocktesting.NewFakeClock(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))
	r := &Reconciler{deferred: newDeferredWrites(countsWriteDelay), podCreates: newPodCreatePace(),
		client: c, apiReader: c, recorder: events.NewFakeRecorder(100), adapter: keysAdapter{}, gvk: chainerJobGVK,
		clock: clock,
	}
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(job)}
	for range 2 {
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
		clock.Step(countsWriteDelay)
	}
	got := getJob(t, c, req.NamespacedName)
	if !meta.IsStatusConditionTrue(got.Status.Conditions, troupev1.ConditionInitialized) || got.Status.GeneratedSecrets[0].ResourceVersion == "" {
		t.Errorf("after the delay: conditions %+v, records %+v; want Initialized and the Secret's version",
			got.Status.Conditions, got.Status.GeneratedSecrets)
	}
}

func TestProgressOnly(t *testing.T) {
	cond := func(typ, status, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: metav1.ConditionStatus(status), Reason: reason}
	}
	base := troupev1.JobStatus{
		Phase: troupev1.JobPending,
		Conditions: []metav1.Condition{
			cond(troupev1.ConditionInitialized, "False", troupev1.ReasonCreatingChildren),
			cond(troupev1.ConditionLauncherWaiting, "False", troupev1.ReasonWaitNotStarted),
			cond(troupev1.ConditionWorkersReady, "False", troupev1.ReasonWorkersNotReady),
		},
		GeneratedSecrets: []troupev1.GeneratedSecretRecord{{Name: "k", SHA256: "h"}},
	}
	tests := map[string]struct {
		change func(st *troupev1.JobStatus)
		want   bool
	}{
		"children created": {change: func(st *troupev1.JobStatus) {
			st.Conditions[0] = cond(troupev1.ConditionInitialized, "True", troupev1.ReasonChildrenCreated)
		}, want: true},
		"a master Job without a wait": {change: func(st *troupev1.JobStatus) {
			st.Conditions[1] = cond(troupev1.ConditionLauncherWaiting, "False", troupev1.ReasonNoLauncherWait)
		}, want: true},
		"the start time":       {change: func(st *troupev1.JobStatus) { st.StartTime = &metav1.Time{Time: time.Unix(1, 0)} }, want: true},
		"the Secret's version": {change: func(st *troupev1.JobStatus) { st.GeneratedSecrets[0].ResourceVersion = "7" }, want: true},
		"counts":               {change: func(st *troupev1.JobStatus) { st.Pods.Pending = 9 }, want: true},
		"the phase":            {change: func(st *troupev1.JobStatus) { st.Phase = troupev1.JobRunning }, want: false},
		"a conflict": {change: func(st *troupev1.JobStatus) {
			st.Conditions[0] = cond(troupev1.ConditionInitialized, "False", troupev1.ReasonChildConflict)
		}, want: false},
		"the launcher waits": {change: func(st *troupev1.JobStatus) {
			st.Conditions[1] = cond(troupev1.ConditionLauncherWaiting, "True", troupev1.ReasonWaitingForWorkers)
		}, want: true},
		"the launcher reached its workers": {change: func(st *troupev1.JobStatus) {
			st.Conditions[1] = cond(troupev1.ConditionLauncherWaiting, "False", troupev1.ReasonWorkersReached)
		}, want: true},
		"the launcher's wait timed out": {change: func(st *troupev1.JobStatus) {
			st.Conditions[1] = cond(troupev1.ConditionLauncherWaiting, "False", troupev1.ReasonWaitTimedOut)
		}, want: false},
		"every worker ready while Pending": {change: func(st *troupev1.JobStatus) {
			st.Conditions[2] = cond(troupev1.ConditionWorkersReady, "True", troupev1.ReasonWorkersReady)
		}, want: true},
		"a worker's cause": {change: func(st *troupev1.JobStatus) {
			st.Conditions[2] = cond(troupev1.ConditionWorkersReady, "False", troupev1.ReasonImagePullBackOff)
		}, want: false},
		"another Secret's data": {change: func(st *troupev1.JobStatus) { st.GeneratedSecrets[0].SHA256 = "other" }, want: false},
		"a reason for waiting":  {change: func(st *troupev1.JobStatus) { st.Reason = "Unschedulable" }, want: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			next := base.DeepCopy()
			tc.change(next)
			if got := progressOnly(&base, next); got != tc.want {
				t.Errorf("progressOnly = %t, want %t", got, tc.want)
			}
		})
	}
	// While the job runs, every worker ready is the end of its startup: written at once.
	running := base.DeepCopy()
	running.Phase = troupev1.JobRunning
	ready := running.DeepCopy()
	ready.Conditions[2] = cond(troupev1.ConditionWorkersReady, "True", troupev1.ReasonWorkersReady)
	if progressOnly(running, ready) {
		t.Error("every worker ready while Running: progressOnly, want a write at once")
	}
}
