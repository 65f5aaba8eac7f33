package engine

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// The pass that creates a new job's children tells it in one Created event naming them all, in
// the order they were created; a pass that creates nothing tells nothing.
func TestCreatedToldOncePerPass(t *testing.T) {
	ctx := context.Background()
	job := &troupev1.ChainerJob{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ml", UID: "uid-1"}}
	c := fakeJobClient(t, job)
	rec := events.NewFakeRecorder(100)
	r := &Reconciler{podCreates: newPodCreatePace(),
		client: c, apiReader: c, recorder: rec, adapter: masterOnlyAdapter{},
		gvk:   schema.GroupVersionKind{Group: "troupe.dev", Version: "v1alpha1", Kind: "ChainerJob"},
		clock: clocktesting.NewFakeClock(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)), deferred: newDeferredWrites(countsWriteDelay),
	}
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(job)}

	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	created := createdEvents(rec)
	want := "Normal Created created Service train, NetworkPolicy train, Job train-master"
	if len(created) != 1 || created[0] != want {
		t.Errorf("Created events of the first pass:\n%q\nwant one:\n%q", created, want)
	}

	// The master's pod runs (the Job controller made it); the next pass has nothing to create.
	pod := trainMasterPod(corev1.PodRunning)
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if created := createdEvents(rec); len(created) != 0 {
		t.Errorf("a pass that created nothing told %q", created)
	}
}

// createdEvents drains the recorder and returns its Created events.
func createdEvents(rec *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			if strings.Contains(e, " "+troupev1.EventCreated+" ") {
				out = append(out, e)
			}
		default:
			return out
		}
	}
}

// The note names every child while it fits the events API's limit, and says how many more
// were created once it would not.
func TestCreatedNote(t *testing.T) {
	few := []childRef{{"Service", "a"}, {"Job", "a-master"}}
	if got, want := createdNote(few), "created Service a, Job a-master"; got != want {
		t.Errorf("createdNote = %q, want %q", got, want)
	}
	var many []childRef
	for range 40 {
		many = append(many, childRef{"StatefulSet", strings.Repeat("w", 60)})
	}
	got := createdNote(many)
	if len(got) > createdNoteLimit {
		t.Errorf("createdNote is %d bytes, over %d", len(got), createdNoteLimit)
	}
	named := strings.Count(got, "StatefulSet ")
	if !strings.HasSuffix(got, " and "+strconv.Itoa(40-named)+" more") || named == 0 || named == 40 {
		t.Errorf("createdNote of 40 long names names %d and ends %q", named, got[max(0, len(got)-30):])
	}
}
