package engine

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// countingLists counts the LISTs that reach the API server.
type countingLists struct {
	client.Reader
	lists atomic.Int64
}

func (c *countingLists) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	c.lists.Add(1)
	return c.Reader.List(ctx, list, opts...)
}

// 500 jobs of one namespace stuck for 10 minutes (each a worker set whose pods the API server
// refuses), each reconciled every second, look their refusals up at most 7 times each: after
// 5 s, then 10 s later, doubling to every 5 min (podCreatePace). Before, they looked on every
// pass: 600 LISTs a job. And the lookups of the namespace's jobs share a LIST of its events,
// at most one per failedCreateSnapshotAge, however many jobs look (before, one a lookup: up to
// 3,500 here). Between lookups each job still reports what the last one found.
func TestStuckJobsLookUpRefusalsRarely(t *testing.T) {
	const jobs, minutes = 500, 10
	refusal := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "refused", Namespace: "ns"},
		InvolvedObject: corev1.ObjectReference{UID: "sts-0"},
		Reason:         reasonFailedCreate,
		Message:        `pods "job-0-worker-0" is forbidden: exceeded quota`,
	}
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(refusal).
		WithIndex(&corev1.Event{}, "involvedObject.uid", func(o client.Object) []string { return []string{string(o.(*corev1.Event).InvolvedObject.UID)} }).
		WithIndex(&corev1.Event{}, "reason", func(o client.Object) []string { return []string{o.(*corev1.Event).Reason} }).
		Build()
	reader := &countingLists{Reader: c}
	clock := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	r := &Reconciler{deferred: newDeferredWrites(0), apiReader: reader, clock: clock, podCreates: newPodCreatePace()}

	type stuck struct {
		s   *Spec
		obs *Observed
	}
	var all []stuck
	for i := range jobs {
		sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("job-%d-worker", i), UID: types.UID(fmt.Sprintf("sts-%d", i))},
			Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2)}}
		all = append(all, stuck{
			s:   &Spec{Name: fmt.Sprintf("job-%d", i), Namespace: "ns", Owner: metav1.OwnerReference{UID: types.UID(fmt.Sprintf("job-%d", i))}},
			obs: &Observed{StatefulSets: map[string]*appsv1.StatefulSet{"worker": sts}},
		})
	}
	start := clock.Now()
	for second := 0; second < minutes*60; second++ {
		clock.SetTime(start.Add(time.Duration(second) * time.Second))
		for i, j := range all {
			failures, recheck, err := r.podCreateFailures(context.Background(), j.s, j.obs)
			if err != nil {
				t.Fatal(err)
			}
			if recheck <= 0 || recheck > podCreateMaxInterval {
				t.Fatalf("job %d at %d s: recheck in %v", i, second, recheck)
			}
			if i == 0 && second >= int(podCreateGrace/time.Second) && (len(failures) != 1 || !strings.Contains(failures[0], "exceeded quota")) {
				t.Fatalf("at %d s job 0 reports %q, want the refusal found", second, failures)
			}
		}
	}
	lists := reader.lists.Load()
	t.Logf("%d jobs stuck for %d min, a pass a second each: %d LISTs of events (%.1f a job)", jobs, minutes, lists, float64(lists)/jobs)
	if most := int64(minutes*time.Minute/failedCreateSnapshotAge) + 1; lists > most {
		t.Errorf("%d LISTs of one namespace's events, want at most %d (one per %v)", lists, most, failedCreateSnapshotAge)
	}

	// A job whose pods came is forgotten; lacking pods again, it waits its grace first.
	j := all[1]
	j.obs.StatefulSets["worker"].Status.Replicas = 2
	if _, recheck, _ := r.podCreateFailures(context.Background(), j.s, j.obs); recheck != 0 {
		t.Errorf("a job with its pods rechecks in %v, want never", recheck)
	}
	j.obs.StatefulSets["worker"].Status.Replicas = 0
	before := reader.lists.Load()
	if _, recheck, _ := r.podCreateFailures(context.Background(), j.s, j.obs); recheck != podCreateGrace || reader.lists.Load() != before {
		t.Errorf("lacking pods again: a lookup now (%d LISTs) or a recheck in %v, want none and %v", reader.lists.Load()-before, recheck, podCreateGrace)
	}
}

// A PyTorchJob of 4,095 workers whose worker Jobs all lack pods (the API server refuses them)
// looks its refusals up with one LIST of events per lookup, not one per worker Job, and still
// names each refused Job.
func TestRefusalLookupOfALargeJobIsOneList(t *testing.T) {
	const workers = 4095
	builder := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).
		WithIndex(&corev1.Event{}, "involvedObject.uid", func(o client.Object) []string { return []string{string(o.(*corev1.Event).InvolvedObject.UID)} }).
		WithIndex(&corev1.Event{}, "reason", func(o client.Object) []string { return []string{o.(*corev1.Event).Reason} })
	jobs := map[string][]*batchv1.Job{}
	for i := range workers {
		// Synced by the Job controller (its first sync writes the ready count), no pod yet.
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("big-worker-%d", i), UID: types.UID(fmt.Sprintf("job-%d", i))},
			Status: batchv1.JobStatus{Ready: ptr.To[int32](0)}}
		jobs["worker"] = append(jobs["worker"], j)
		if i%1000 == 0 { // a few refused, the rest not yet told
			builder = builder.WithObjects(&corev1.Event{
				ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("refused-%d", i), Namespace: "ns"},
				InvolvedObject: corev1.ObjectReference{Kind: "Job", UID: j.UID},
				Reason:         reasonFailedCreate,
				Message:        fmt.Sprintf(`pods "big-worker-%d-x" is forbidden: exceeded quota`, i),
			})
		}
	}
	reader := &countingLists{Reader: builder.Build()}
	clock := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	r := &Reconciler{deferred: newDeferredWrites(0), apiReader: reader, clock: clock, podCreates: newPodCreatePace()}
	s := &Spec{Name: "big", Namespace: "ns", Owner: metav1.OwnerReference{UID: "big"}}
	obs := &Observed{WorkerJobs: jobs}
	if _, _, err := r.podCreateFailures(context.Background(), s, obs); err != nil { // starts the grace
		t.Fatal(err)
	}
	clock.SetTime(clock.Now().Add(podCreateGrace))
	failures, _, err := r.podCreateFailures(context.Background(), s, obs)
	if err != nil {
		t.Fatal(err)
	}
	if got := reader.lists.Load(); got != 1 {
		t.Errorf("%d LISTs of events for one lookup of %d worker Jobs, want 1", got, workers)
	}
	if len(failures) != 5 || !strings.HasPrefix(failures[0], "Job big-worker-0: ") || !strings.Contains(failures[4], "big-worker-4000-x") {
		t.Errorf("failures %q, want the 5 refused worker Jobs named", failures)
	}
}

// A namespace's snapshot of refusals answers its jobs for failedCreateSnapshotAge only, and
// never another namespace's: a refusal recorded after a LIST is found by the next one.
func TestRefusalSnapshotIsPerNamespaceAndShortLived(t *testing.T) {
	refusal := func(ns, uid string) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "refused-" + uid, Namespace: ns},
			InvolvedObject: corev1.ObjectReference{UID: types.UID(uid)}, Reason: reasonFailedCreate, Message: "refused " + uid}
	}
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(refusal("a", "sts-a")).
		WithIndex(&corev1.Event{}, "reason", func(o client.Object) []string { return []string{o.(*corev1.Event).Reason} }).
		Build()
	reader := &countingLists{Reader: c}
	events := newFailedCreateEvents()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ctx := context.Background()

	got, _, err := events.newestByObject(ctx, reader, "a", now)
	if err != nil || got["sts-a"] != "refused sts-a" {
		t.Fatalf("namespace a: %v %v, want sts-a's refusal", got, err)
	}
	if got, _, _ := events.newestByObject(ctx, reader, "b", now); len(got) != 0 {
		t.Errorf("namespace b answered with %v, namespace a's", got)
	}
	if err := c.Create(ctx, refusal("a", "sts-a2")); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := events.newestByObject(ctx, reader, "a", now.Add(failedCreateSnapshotAge-time.Second)); got["sts-a2"] != "" || reader.lists.Load() != 2 {
		t.Errorf("within the snapshot's age: %v after %d LISTs, want the snapshot (2 LISTs: a and b)", got, reader.lists.Load())
	}
	if got, _, _ := events.newestByObject(ctx, reader, "a", now.Add(failedCreateSnapshotAge)); got["sts-a2"] != "refused sts-a2" {
		t.Errorf("after the snapshot's age: %v, want the new refusal found", got)
	}
	events.forgetIdle(now.Add(2 * failedCreateSnapshotAge))
	if len(events.namespaces) != 0 {
		t.Errorf("%d snapshots kept after every namespace went idle", len(events.namespaces))
	}
}

// blockingLists holds each LIST until release is closed, and says when one arrived.
type blockingLists struct {
	client.Reader
	arrived chan struct{}
	release chan struct{}
	lists   atomic.Int64
}

func (b *blockingLists) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	b.lists.Add(1)
	b.arrived <- struct{}{}
	<-b.release
	return b.Reader.List(ctx, list, opts...)
}

// While one job's LIST of its namespace's refusals is in flight (a slow API server), the
// namespace's other jobs do not wait for it, and send no LIST of their own: before the first
// snapshot, a job reports what it found before and looks again in failedCreateListPending;
// later, it takes the last snapshot.
func TestRefusalLookupsDoNotWaitForAnother(t *testing.T) {
	refusal := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "refused", Namespace: "ns"},
		InvolvedObject: corev1.ObjectReference{UID: "sts-a"}, Reason: reasonFailedCreate, Message: "refused sts-a"}
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(refusal).
		WithIndex(&corev1.Event{}, "reason", func(o client.Object) []string { return []string{o.(*corev1.Event).Reason} }).
		Build()
	reader := &blockingLists{Reader: c, arrived: make(chan struct{}, 1), release: make(chan struct{})}
	clock := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	r := &Reconciler{deferred: newDeferredWrites(0), apiReader: reader, clock: clock, podCreates: newPodCreatePace()}
	lacking := func(name, uid string) (*Spec, *Observed) {
		sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name + "-worker", UID: types.UID(uid)},
			Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2)}}
		return &Spec{Name: name, Namespace: "ns", Owner: metav1.OwnerReference{UID: types.UID(name)}},
			&Observed{StatefulSets: map[string]*appsv1.StatefulSet{"worker": sts}}
	}
	sa, oa := lacking("a", "sts-a")
	sb, ob := lacking("b", "sts-b")
	type answer struct {
		failures []string
		recheck  time.Duration
		err      error
	}
	lookup := func(s *Spec, obs *Observed) <-chan answer {
		out := make(chan answer, 1)
		go func() {
			failures, recheck, err := r.podCreateFailures(context.Background(), s, obs)
			out <- answer{failures, recheck, err}
		}()
		return out
	}
	// Without waiting for the other job: a slow LIST must not hold this lookup up.
	now := func(ch <-chan answer) answer {
		t.Helper()
		select {
		case a := <-ch:
			return a
		case <-time.After(10 * time.Second):
			t.Fatal("the lookup waited for another job's LIST")
			return answer{}
		}
	}
	for _, j := range []struct {
		s   *Spec
		obs *Observed
	}{{sa, oa}, {sb, ob}} { // both start their grace
		if a := now(lookup(j.s, j.obs)); a.err != nil || a.recheck != podCreateGrace {
			t.Fatalf("%s: %+v, want a recheck after the grace", j.s.Name, a)
		}
	}
	clock.SetTime(clock.Now().Add(podCreateGrace))

	first := lookup(sa, oa)
	<-reader.arrived
	if a := now(lookup(sb, ob)); a.err != nil || len(a.failures) != 0 || a.recheck != failedCreateListPending {
		t.Errorf("b while a's first LIST is in flight: %+v, want nothing found yet and a look again in %v", a, failedCreateListPending)
	}
	close(reader.release)
	if a := <-first; a.err != nil || len(a.failures) != 1 || !strings.Contains(a.failures[0], "refused sts-a") {
		t.Fatalf("a: %+v, want its refusal", a)
	}

	// The snapshot aged: the next lookup LISTs again, and one meanwhile takes the last snapshot.
	clock.SetTime(clock.Now().Add(podCreateFirstInterval))
	reader.release = make(chan struct{})
	second := lookup(sa, oa)
	<-reader.arrived
	if got, ok, err := r.podCreates.events.newestByObject(context.Background(), reader, "ns", clock.Now()); err != nil || !ok || got["sts-a"] != "refused sts-a" {
		t.Errorf("while the second LIST is in flight: %v %v %v, want the last snapshot", got, ok, err)
	}
	close(reader.release)
	if a := <-second; a.err != nil || len(a.failures) != 1 {
		t.Fatalf("a's second lookup: %+v", a)
	}
	if n := reader.lists.Load(); n != 2 {
		t.Errorf("%d LISTs, want 2 (one per snapshot, none while one was in flight)", n)
	}
}
