package main

import (
	"strings"
	"testing"
)

// An API server's gauge of long-running requests: watches of built-in and custom resources,
// summed by resource over versions and scopes; other verbs and requests without a resource
// (a proxy's path) left out.
func TestWatchesByResource(t *testing.T) {
	metrics := `# HELP apiserver_longrunning_requests [STABLE] Gauge of all active long-running apiserver requests.
# TYPE apiserver_longrunning_requests gauge
apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="cluster",subresource="",verb="WATCH",version="v1"} 3
apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="namespace",subresource="",verb="WATCH",version="v1"} 1
apiserver_longrunning_requests{component="apiserver",group="batch",resource="jobs",scope="cluster",subresource="",verb="WATCH",version="v1"} 2
apiserver_longrunning_requests{component="apiserver",group="troupe.dev",resource="mpijobs",scope="cluster",subresource="",verb="WATCH",version="v1alpha1"} 1
apiserver_longrunning_requests{component="apiserver",group="troupe.dev",resource="chainerjobs",scope="cluster",subresource="",verb="WATCH",version="v1alpha1"} 0
apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="namespace",subresource="exec",verb="CONNECT",version="v1"} 4
# HELP apiserver_request_total [STABLE] Counter of apiserver requests.
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="cluster",subresource="",verb="LIST",version="v1"} 7
`
	got, err := watchesByResource(strings.NewReader(metrics))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"pods": 4, "jobs.batch": 2, "mpijobs.troupe.dev": 1, "chainerjobs.troupe.dev": 0}
	if len(got) != len(want) {
		t.Fatalf("watches = %v, want %v", got, want)
	}
	for r, n := range want {
		if got[r] != n {
			t.Errorf("watches of %s = %d, want %d (all: %v)", r, got[r], n, got)
		}
	}

	if _, err := watchesByResource(strings.NewReader("# TYPE up gauge\nup 1\n")); err == nil {
		t.Error("metrics without apiserver_longrunning_requests: no error")
	}
}

// After a restart the watches are back only when every resource has at least as many as before.
func TestWatchesShort(t *testing.T) {
	before := map[string]int{"pods": 4, "jobs.batch": 2, "mpijobs.troupe.dev": 1}
	if s := watchesShort(before, map[string]int{"pods": 5, "jobs.batch": 2, "mpijobs.troupe.dev": 1, "nodes": 1}); s != "" {
		t.Errorf("every watch back: short %q, want none", s)
	}
	got := watchesShort(before, map[string]int{"pods": 3, "jobs.batch": 2})
	if want := "jobs.batch 2 of 2"; strings.Contains(got, want) {
		t.Errorf("short %q names a resource that is back (%s)", got, want)
	}
	for _, want := range []string{"pods 3 of 4", "mpijobs.troupe.dev 0 of 1"} {
		if !strings.Contains(got, want) {
			t.Errorf("short %q, want it to name %q", got, want)
		}
	}
}
