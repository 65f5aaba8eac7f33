package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// A finished job past its TTL is deleted, and TTLExpired is told once, for the delete that
// succeeded: a delete the API server refuses is retried without telling it again.
func TestExpireTTLTellsTheDeleteThatSucceeded(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := troupev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	finished := metav1.NewTime(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	job := &troupev1.ChainerJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "train"}}
	failDeletes := 2
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(job).WithInterceptorFuncs(interceptor.Funcs{
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if failDeletes > 0 {
				failDeletes--
				return errors.New("the API server is away")
			}
			return c.Delete(ctx, obj, opts...)
		},
	}).Build()
	rec := events.NewFakeRecorder(10)
	r := &Reconciler{deferred: newDeferredWrites(0), podCreates: newPodCreatePace(), client: c, apiReader: c, recorder: rec, adapter: masterOnlyAdapter{},
		gvk:   schema.GroupVersionKind{Group: "troupe.dev", Version: "v1alpha1", Kind: "ChainerJob"},
		clock: clocktesting.NewFakePassiveClock(finished.Add(61 * time.Second))}
	s := testSpec()
	s.RunPolicy.TTLSecondsAfterFinished = ptr.To[int32](60)
	if !ttlExpired(s, &troupev1.JobStatus{CompletionTime: &finished}, r.clock.Now()) {
		t.Fatal("61 s after it finished, a job of a 60 s TTL has not expired")
	}

	told := func() []string {
		var out []string
		for {
			select {
			case e := <-rec.Events:
				if strings.Contains(e, troupev1.EventTTLExpired) {
					out = append(out, e)
				}
			default:
				return out
			}
		}
	}
	for attempt := 1; attempt <= 2; attempt++ {
		if err := r.deleteExpired(context.Background(), job, s); err == nil {
			t.Fatalf("attempt %d with the delete refused: no error", attempt)
		}
		if e := told(); len(e) != 0 {
			t.Errorf("attempt %d: the delete failed, yet told %q", attempt, e)
		}
	}
	if err := r.deleteExpired(context.Background(), job, s); err != nil {
		t.Fatalf("attempt 3: %v", err)
	}
	if e := told(); len(e) != 1 || !strings.Contains(e[0], "deleting the job 60s after it finished") {
		t.Errorf("after the delete succeeded, told %q; want one TTLExpired", e)
	}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(job), &troupev1.ChainerJob{}); err == nil {
		t.Error("the job still exists")
	}
	// Deleted meanwhile by someone else: nothing to do, nothing to tell.
	if err := r.deleteExpired(context.Background(), job, s); err != nil {
		t.Errorf("job already gone: %v", err)
	}
	if e := told(); len(e) != 0 {
		t.Errorf("job deleted by someone else: told %q", e)
	}
}

// A finished job expires ttlSecondsAfterFinished after its completion time, as observed; a job
// without a TTL or not finished never does.
func TestTTLExpired(t *testing.T) {
	finished := metav1.NewTime(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	s := testSpec()
	s.RunPolicy.TTLSecondsAfterFinished = ptr.To[int32](60)
	done := &troupev1.JobStatus{CompletionTime: &finished}
	for after, want := range map[time.Duration]bool{0: false, 59 * time.Second: false, 60 * time.Second: true, time.Hour: true} {
		if got := ttlExpired(s, done, finished.Add(after)); got != want {
			t.Errorf("%s after it finished: expired %t, want %t", after, got, want)
		}
	}
	if ttlExpired(s, &troupev1.JobStatus{}, finished.Add(time.Hour)) {
		t.Error("a job that has not finished expired")
	}
	if ttlExpired(testSpec(), done, finished.Add(time.Hour)) {
		t.Error("a job without a TTL expired")
	}
}
