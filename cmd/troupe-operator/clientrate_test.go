package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

func TestIsEventWrite(t *testing.T) {
	tests := []struct {
		method, path string
		want         bool
	}{
		{http.MethodPost, "/apis/events.k8s.io/v1/namespaces/ml/events", true},
		{http.MethodPatch, "/apis/events.k8s.io/v1/namespaces/ml/events/train.1870", true},
		{http.MethodPost, "/api/v1/namespaces/ml/events", true},
		{http.MethodPatch, "/api/v1/namespaces/ml/events/train.1870", true},
		{http.MethodGet, "/api/v1/namespaces/ml/events", false}, // the engine's FailedCreate lookups
		{http.MethodPut, "/apis/troupe.dev/v1alpha1/namespaces/ml/mpijobs/train/status", false},
		{http.MethodPost, "/api/v1/namespaces/ml/configmaps", false},
		{http.MethodPut, "/api/v1/namespaces/events", false}, // a namespace named events
		{http.MethodPost, "/apis/batch/v1/namespaces/events/jobs", false},
	}
	for _, tc := range tests {
		req := httptest.NewRequest(tc.method, tc.path, nil)
		if got := isEventWrite(req); got != tc.want {
			t.Errorf("isEventWrite(%s %s) = %t, want %t", tc.method, tc.path, got, tc.want)
		}
	}
}

// While other requests wait for tokens, an event waits for them all: the status writes of
// jobs ending together are not held back behind their own events.
func TestEventsComeLast(t *testing.T) {
	// A token every 100 ms: the five requests below all ask before the first comes.
	l := newEventsLast(10, 1)
	l.limiter.Allow() // the bucket is empty: every request waits
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	send := func(name, method, path string) {
		defer wg.Done()
		req := httptest.NewRequest(method, path, nil).WithContext(context.Background())
		if err := l.wait(req); err != nil {
			t.Error(err)
			return
		}
		mu.Lock()
		order = append(order, name)
		mu.Unlock()
	}
	wg.Add(1)
	go send("event", http.MethodPost, "/apis/events.k8s.io/v1/namespaces/ml/events")
	time.Sleep(5 * time.Millisecond) // orders the arrivals: the event asks first
	for _, name := range []string{"status-1", "status-2", "status-3", "status-4"} {
		wg.Add(1)
		go send(name, http.MethodPut, "/apis/troupe.dev/v1alpha1/namespaces/ml/mpijobs/"+name+"/status")
	}
	wg.Wait()
	if len(order) != 5 || order[4] != "event" {
		t.Errorf("requests served in the order %v; want the event last", order)
	}
}

// Events leave the burst to the other requests: after a backlog of events, the status writes
// of jobs ending together still go out at once, not one per token time.
func TestEventsLeaveTheBurst(t *testing.T) {
	// A burst of 10 and a token every 100 s: no token comes back during the test.
	l := newEventsLast(0.01, 10)
	event := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		return l.wait(httptest.NewRequest(http.MethodPost, "/api/v1/namespaces/ml/events", nil).WithContext(ctx))
	}
	if err := event(); err != nil {
		t.Fatalf("an event did not get a token from a full bucket: %v", err)
	}
	if err := event(); err == nil {
		t.Fatal("a second event took a token from a bucket that was no longer full")
	}
	// The nine tokens left are the status writes': each is served now, none waits.
	for i := range 9 {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		err := l.wait(httptest.NewRequest(http.MethodPut, "/apis/troupe.dev/v1alpha1/namespaces/ml/mpijobs/train/status", nil).WithContext(ctx))
		cancel()
		if err != nil {
			t.Fatalf("status write %d waited for a token after one event: %v", i+1, err)
		}
	}
}

// An event waiting for a spare token gives up with its request's context.
func TestEventWaitEndsWithItsContext(t *testing.T) {
	l := newEventsLast(0.001, 1)
	l.limiter.Allow()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	req := httptest.NewRequest(http.MethodPost, "/api/v1/namespaces/ml/events", nil).WithContext(ctx)
	if err := l.wait(req); err == nil {
		t.Error("the event got a token from an empty bucket")
	}
}

// Once the operator stops, the events still waiting for a full bucket go out with the tokens
// there are: controller-runtime cancels pending event writes soon after the stop signal, and
// no reconcile needs the budget any more.
func TestEventsGoOutWhenTheOperatorStops(t *testing.T) {
	// A burst of 10 and a token every 100 s: the bucket is not full again during the test.
	l := newEventsLast(0.01, 10)
	l.limiter.Allow()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 3)
	for range 3 { // one waits at the bucket, two at the gate
		go func() {
			done <- l.wait(httptest.NewRequest(http.MethodPost, "/api/v1/namespaces/ml/events", nil).WithContext(ctx))
		}()
	}
	select {
	case err := <-done:
		t.Fatalf("an event did not wait for a full bucket while the operator runs: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	l.stop()
	for i := range 3 {
		if err := <-done; err != nil {
			t.Errorf("event %d after the stop: %v, want it written with one of the 9 tokens", i+1, err)
		}
	}
}

// Leader election has a budget of its own: with the shared bucket saturated (every token for
// the next seconds reserved), a Lease renewal still goes out at once, where a request in the
// shared bucket waits its turn.
func TestLeaderElectionOutsideTheSharedBucket(t *testing.T) {
	var served sync.WaitGroup
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		served.Done()
		w.WriteHeader(http.StatusOK)
	}))
	defer api.Close()
	base := &rest.Config{Host: api.URL}
	leader := leaderElectionConfig(base)
	shared := rest.CopyConfig(base)
	stopping, stop := context.WithCancel(context.Background())
	defer stop()
	limitRequests(shared, 1, 1, stopping) // one token a second
	get := func(cfg *rest.Config) time.Duration {
		client, err := rest.HTTPClientFor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		served.Add(1)
		start := time.Now()
		resp, err := client.Get(api.URL + "/apis/coordination.k8s.io/v1/namespaces/troupe-system/leases/troupe-operator.troupe.dev")
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return time.Since(start)
	}
	get(shared) // the one token of the bucket
	// Three more requests of the shared bucket reserve the tokens of the next 3 s.
	for range 3 {
		served.Add(1)
		go func() {
			client, _ := rest.HTTPClientFor(shared)
			if resp, err := client.Get(api.URL + "/api/v1/pods"); err == nil {
				_ = resp.Body.Close()
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	if d := get(leader); d > 500*time.Millisecond {
		t.Errorf("a Lease renewal took %v with the shared bucket saturated, want at once", d)
	}
	if d := get(shared); d < 2*time.Second {
		t.Errorf("a request of the shared bucket took %v, want it to wait behind the reserved tokens (the bucket was not saturated)", d)
	}
	served.Wait()
}
