package main

import "testing"

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
		"POST pods": 2, "PUT mpijobs/status": 3, "GET pods": 9, "WATCH pods": 1,
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
}
