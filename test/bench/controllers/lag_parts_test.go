package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// A job's lag splits at the last successful status write sent before the bench saw the job
// final, even when its answer came back after: not at a refused write, nor at a later one.
func TestStatusLagPartsSplitAtTheFinalWrite(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	launcherDone := map[string]time.Time{"a": at(0), "b": at(0), "limit-like": at(0)}
	jobFinal := map[string]time.Time{"a": at(1500), "b": at(900), "limit-like": at(300)}
	writes := []statusWrite{
		{name: "a", sent: at(-2000), done: at(-1990), code: 200}, // Running, long before
		{name: "a", sent: at(1000), done: at(1100), code: 409},   // refused
		{name: "a", sent: at(1200), done: at(1400), code: 200},   // the one that made it final
		{name: "a", sent: at(1600), done: at(1700), code: 200},   // after the bench saw it final
		{name: "b", sent: at(500), done: at(1000), code: 200},    // b's, answered after its watch saw it
		{name: "other", sent: at(100), done: at(200), code: 200}, // a job the bench did not track
	}
	got := statusLagParts(t0, launcherDone, jobFinal, writes)
	if got.jobs != 2 {
		t.Fatalf("jobs = %d, want 2 (a and b; limit-like has no write)", got.jobs)
	}
	// a: 1200 to the write, 200 the write, 100 to the watch; b: 500, 500, -100.
	for _, c := range []struct {
		name     string
		p50, p99 time.Duration
		want50   time.Duration
		want99   time.Duration
	}{
		{"to the write", got.toWriteP50, got.toWriteP99, 1200 * time.Millisecond, 1200 * time.Millisecond},
		{"the write", got.writeP50, got.writeP99, 500 * time.Millisecond, 500 * time.Millisecond},
		{"to the watch", got.seenP50, got.seenP99, 100 * time.Millisecond, 100 * time.Millisecond},
	} {
		if c.p50 != c.want50 || c.p99 != c.want99 {
			t.Errorf("%s: p50 %s p99 %s, want %s and %s", c.name, c.p50, c.p99, c.want50, c.want99)
		}
	}
	if len(got.rows) != 2 || got.rows[0].job != "b" || got.rows[0].writeDone != time.Second {
		t.Errorf("rows %+v, want b's first (seen final first), its write done at 1s", got.rows)
	}
}

// The proxy times writes of a status subresource, by the object's name, and nothing else.
func TestProxyTimesStatusWrites(t *testing.T) {
	p := &countingProxy{counts: map[string]int{}}
	for _, r := range []*http.Request{
		httptest.NewRequest(http.MethodPut, "/apis/kubeflow.org/v2beta1/namespaces/ns/mpijobs/job-1/status", nil),
		httptest.NewRequest(http.MethodPatch, "/apis/troupe.dev/v1alpha1/namespaces/ns/mpijobs/job-2/status", nil),
		httptest.NewRequest(http.MethodPut, "/apis/troupe.dev/v1alpha1/namespaces/ns/mpijobs/job-3", nil),
		httptest.NewRequest(http.MethodGet, "/apis/troupe.dev/v1alpha1/namespaces/ns/mpijobs/job-4/status", nil),
	} {
		p.timeStatusWrite(r, time.Now(), http.StatusOK)
	}
	var names []string
	for _, w := range p.takeStatusWrites() {
		names = append(names, w.name)
	}
	if len(names) != 2 || names[0] != "job-1" || names[1] != "job-2" {
		t.Errorf("timed %v, want [job-1 job-2]", names)
	}
	if left := p.takeStatusWrites(); len(left) != 0 {
		t.Errorf("take left %d writes behind", len(left))
	}
}
