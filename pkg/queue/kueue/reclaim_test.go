package kueue

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
	kueuev1 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// An admitted elastic Workload of 3 workers: what it is charged for, and which pods a smaller
// job hands back, once they are gone and never fewer than before.
func TestReclaimablePods(t *testing.T) {
	wl := &kueuev1.Workload{
		Spec: kueuev1.WorkloadSpec{PodSets: []kueuev1.PodSet{{Name: "worker", Count: 3}}},
		Status: kueuev1.WorkloadStatus{Admission: &kueuev1.Admission{
			PodSetAssignments: []kueuev1.PodSetAssignment{{Name: "worker", Count: ptr.To[int32](3)}},
		}},
	}
	want := func(n int32) []kueuev1.PodSet { return []kueuev1.PodSet{{Name: "worker", Count: n}} }
	active := func(n int32) map[kueuev1.PodSetReference]int32 { return map[kueuev1.PodSetReference]int32{"worker": n} }
	if got := ChargedPodSets(wl)["worker"]; got != 3 {
		t.Fatalf("charged %d, want 3", got)
	}
	// Scaled to 1 with 3 pods still active: nothing yet; with 2 left, one.
	if got := ReclaimablePods(wl, want(1), active(3)); len(got) != 0 {
		t.Errorf("reclaimable %v while every pod runs", got)
	}
	one := []kueuev1.ReclaimablePod{{Name: "worker", Count: 1}}
	if got := ReclaimablePods(wl, want(1), active(2)); !cmp.Equal(got, one) {
		t.Errorf("reclaimable %v, want %v", got, one)
	}
	wl.Status.ReclaimablePods = one
	if got := ChargedPodSets(wl)["worker"]; got != 2 {
		t.Errorf("charged %d after one pod handed back, want 2", got)
	}
	if got := FormatPodSetCounts(ChargedPodSets(wl), wl.Status.Admission); got != "worker=2" {
		t.Errorf("admitted counts %q, want worker=2", got)
	}
	two := []kueuev1.ReclaimablePod{{Name: "worker", Count: 2}}
	if got := ReclaimablePods(wl, want(1), active(1)); !cmp.Equal(got, two) {
		t.Errorf("reclaimable %v, want %v", got, two)
	}
	// Kueue refuses a smaller count while it holds the quota: a pod once handed back stays so.
	if got := ReclaimablePods(wl, want(3), active(1)); !cmp.Equal(got, one) {
		t.Errorf("reclaimable %v after a scale-up, want %v kept", got, one)
	}
}
