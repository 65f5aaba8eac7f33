package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// Writes are attributed to the resource the path names, with its subresource; events of both
// APIs and leader-election Leases are counted apart from the operator's other writes.
func TestSplitWrites(t *testing.T) {
	for path, want := range map[string]string{
		"/api/v1/namespaces/ns/pods":                                "pods",
		"/api/v1/namespaces/ns/pods/p-0/status":                     "pods/status",
		"/apis/troupe.dev/v1alpha1/namespaces/ns/mpijobs/j/status":  "mpijobs/status",
		"/apis/events.k8s.io/v1/namespaces/ns/events":               "events",
		"/apis/coordination.k8s.io/v1/namespaces/lock/leases/l":     "leases",
		"/api/v1/namespaces/ns":                                     "namespaces",
		"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/x": "customresourcedefinitions",
		"/apis/batch/v1": "discovery",
	} {
		if got := resourceOf(path); got != want {
			t.Errorf("resourceOf(%q) = %q, want %q", path, got, want)
		}
	}
	w := splitWrites(map[string]int{
		"POST pods": 2, "PUT mpijobs/status": 3, "GET pods": 9, "WATCH pods": 1, "WATCHLIST mpijobs": 2,
		"POST events": 4, "PATCH events": 1, "PUT leases": 5, "DELETE statefulsets": 1, "CONFLICT PUT mpijobs/status": 2,
	})
	if w.writes != 6 || w.events != 5 || w.leases != 5 || w.conflicts != 2 {
		t.Errorf("splitWrites = %d writes, %d events, %d leases, %d conflicts; want 6, 5, 5, 2", w.writes, w.events, w.leases, w.conflicts)
	}
	if want := "DELETE statefulsets 1, POST pods 2, PUT mpijobs/status 3"; w.detail != want {
		t.Errorf("detail = %q, want %q", w.detail, want)
	}
	if w.reads != 9 || w.readDetail != "GET pods 9" {
		t.Errorf("reads = %d (%q), want 9 (GET pods 9)", w.reads, w.readDetail)
	}
	if want := "WATCH pods 1, WATCHLIST mpijobs 2"; w.watchDetail != want {
		t.Errorf("watchDetail = %q, want %q", w.watchDetail, want)
	}
}

// A watch that asks for the initial events is a list (client-go's WatchListClient) and is
// counted apart from a watch that resumes; a plain GET of a collection is a read.
func TestCountWatches(t *testing.T) {
	p := &countingProxy{counts: map[string]int{}}
	for _, url := range []string{
		"/api/v1/namespaces/ns/pods?watch=true&resourceVersion=10",
		"/api/v1/namespaces/ns/pods?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan",
		"/api/v1/namespaces/ns/pods?limit=500",
	} {
		p.count(httptest.NewRequest(http.MethodGet, url, nil), http.StatusOK)
	}
	for key, want := range map[string]int{"WATCH pods": 1, "WATCHLIST pods": 1, "GET pods": 1} {
		if p.counts[key] != want {
			t.Errorf("counts[%q] = %d, want %d (all: %v)", key, p.counts[key], want, p.counts)
		}
	}
}
