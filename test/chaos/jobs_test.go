package main

import (
	"encoding/json"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/google/go-cmp/cmp"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/controllers"
	"github.com/troupe-dev/troupe/pkg/engine"
	"github.com/troupe-dev/troupe/webhooks"
)

// Both runs must create the same jobs: the plan is a function of the seed alone.
func TestShapesAreTheSeedsAlone(t *testing.T) {
	a := shapes(7, 100, time.Minute, 5*time.Second, 20*time.Second)
	b := shapes(7, 100, time.Minute, 5*time.Second, 20*time.Second)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Fatalf("two plans of one seed differ (-first +second):\n%s", diff)
	}
	if c := shapes(8, 100, time.Minute, 5*time.Second, 20*time.Second); cmp.Equal(a, c) {
		t.Fatal("seeds 7 and 8 gave the same plan")
	}
}

// The plan covers what the issue asks for, every registered kind included, and every job it
// makes is one the webhooks admit.
func TestShapesCoverTheMixAndAreAdmitted(t *testing.T) {
	plan := shapes(1, 100, time.Minute, 5*time.Second, 20*time.Second)
	seen := map[string]int{}
	for _, s := range plan {
		seen[s.Kind]++
		seen["sets"+string(rune('0'+len(s.Sets)))]++
		for _, n := range s.Sets {
			if n < 1 || n > 8 {
				t.Errorf("%s: a worker set of %d replicas, want 1 to 8", s.Name, n)
			}
		}
		if s.Gang != "" {
			seen["gang"]++
		}
		for what, on := range map[string]bool{"fail": s.Fail, "suspend": s.ResumeAfter > 0, "scale": s.ScaleTo > 0, "ttl": s.TTL > 0} {
			if on {
				seen[what]++
			}
		}
		if errs := kindNamed(s.Kind).Admit(s.object("ns"), webhooks.Options{DefaultGang: troupev1.GangNone}); len(errs) > 0 {
			t.Errorf("%s refused: %v", s.Name, errs.ToAggregate())
		}
	}
	for _, want := range append(kindNames(), "sets1", "sets2", "sets3", "gang", "fail", "suspend", "scale", "ttl") {
		if seen[want] == 0 {
			t.Errorf("no job with %s in 100: %v", want, seen)
		}
	}
}

// A scale patch, written from the kind's Sample, changes the replicas of the job's first worker
// set and nothing else, for every registered kind.
func TestScalePatchScalesTheFirstSet(t *testing.T) {
	for _, name := range kindNames() {
		s := shape{Kind: name, Name: "scaled", Sets: []int32{2}, Duration: time.Minute}
		if workerSetsOf(kindNamed(name)) > 1 {
			s.Sets = []int32{2, 3}
		}
		patch, err := s.scalePatch(5)
		if err != nil {
			t.Fatal(err)
		}
		before, err := json.Marshal(s.object("ns"))
		if err != nil {
			t.Fatal(err)
		}
		after, err := jsonpatch.MergePatch(before, []byte(patch))
		if err != nil {
			t.Fatalf("%s: %s: %v", name, patch, err)
		}
		got := kindNamed(name).NewObject()
		if err := json.Unmarshal(after, got); err != nil {
			t.Fatal(err)
		}
		want := s.objectWith("ns", append([]int32{5}, s.Sets[1:]...))
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: patch %s (-want +got):\n%s", name, patch, diff)
		}
		spec := &engine.Spec{Name: "scaled", Namespace: "ns"}
		if err := kindNamed(name).Adapter(controllers.Options{}).Describe(got, spec); err != nil || spec.WorkerSets[0].Replicas != 5 {
			t.Errorf("%s: patch %s: first worker set %+v (err %v), want 5 replicas", name, patch, spec.WorkerSets, err)
		}
	}
}
