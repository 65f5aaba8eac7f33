package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// kube-controller-manager's work queues are read from its /metrics over TLS, and a side's
// busiest are those whose workers spent the most time between two reads.
func TestBusiestQueuesBetweenTwoReads(t *testing.T) {
	metrics := func(endpointSlice, statefulset float64) string {
		return fmt.Sprintf(`# HELP workqueue_work_duration_seconds How long in seconds processing an item from workqueue takes.
# TYPE workqueue_work_duration_seconds histogram
workqueue_work_duration_seconds_bucket{name="endpoint_slice",le="+Inf"} 10
workqueue_work_duration_seconds_sum{name="endpoint_slice"} %g
workqueue_work_duration_seconds_count{name="endpoint_slice"} 10
workqueue_work_duration_seconds_bucket{name="statefulset",le="+Inf"} 10
workqueue_work_duration_seconds_sum{name="statefulset"} %g
workqueue_work_duration_seconds_count{name="statefulset"} 10
workqueue_work_duration_seconds_bucket{name="job",le="+Inf"} 1
workqueue_work_duration_seconds_sum{name="job"} 1
workqueue_work_duration_seconds_count{name="job"} 1
# HELP workqueue_adds_total Total number of adds handled by workqueue
# TYPE workqueue_adds_total counter
workqueue_adds_total{name="endpoint_slice"} %g
workqueue_adds_total{name="statefulset"} 7
workqueue_adds_total{name="job"} 1
`, endpointSlice, statefulset, endpointSlice*10)
	}
	body := metrics(5, 2)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = fmt.Fprint(w, body) }))
	defer srv.Close()

	before := readQueueWork(context.Background(), srv.URL)
	if before == nil || before["endpoint_slice"].seconds != 5 || before["statefulset"].adds != 7 {
		t.Fatalf("first read %+v, want endpoint_slice 5 s and statefulset's 7 adds", before)
	}
	body = metrics(45, 12)
	after := readQueueWork(context.Background(), srv.URL)
	if got, want := busiestQueues(before, after, 2), "endpoint_slice 40.0s (400 adds), statefulset 10.0s (0 adds)"; got != want {
		t.Errorf("busiestQueues = %q, want %q (the job queue did nothing between the reads)", got, want)
	}
	if got := busiestQueues(nil, after, 2); got != "" {
		t.Errorf("busiestQueues without a first read = %q, want nothing", got)
	}
	if readQueueWork(context.Background(), "") != nil {
		t.Error("readQueueWork without a URL read something")
	}
}
