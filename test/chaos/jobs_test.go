package main

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/kinds"
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

// The plan covers what the issue asks for, and every job it makes is one the webhooks admit.
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
		obj := s.object("ns").(engine.Object)
		k := kindOf(t, s.Kind)
		if errs := k.Admit(obj, webhooks.Options{DefaultGang: troupev1.GangNone}); len(errs) > 0 {
			t.Errorf("%s refused: %v", s.Name, errs.ToAggregate())
		}
	}
	for _, want := range []string{"MPIJob", "HorovodJob", "ChainerJob", "sets1", "sets2", "sets3", "gang", "fail", "suspend", "scale", "ttl"} {
		if seen[want] == 0 {
			t.Errorf("no job with %s in 100: %v", want, seen)
		}
	}
}

func kindOf(t *testing.T, name string) kinds.Kind {
	t.Helper()
	for _, k := range kinds.All() {
		if k.Name == name {
			return k
		}
	}
	t.Fatalf("no kind %s", name)
	return kinds.Kind{}
}

// The chaos run creates jobs of every registered kind: a kind added to the registry without
// its shape here would go untested under faults.
func TestChaosRunsEveryKind(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range shapes(1, 30, time.Minute, 5*time.Second, 20*time.Second) {
		seen[s.Kind] = true
	}
	for _, k := range kinds.All() {
		if !seen[k.Name] {
			t.Errorf("no chaos job of kind %s", k.Name)
		}
	}
}

// Every registered kind has tamperings (tamper.Actions): a kind added to the registry and not
// to the tamper switch would be left out of the chaos run's tampering unnoticed.
func TestEveryKindIsTampered(t *testing.T) {
	for _, k := range kinds.All() {
		if len(tamperPackage{}.Actions(k.Name)) == 0 {
			t.Errorf("no tampering of kind %s (test/chaos/tamper: Actions)", k.Name)
		}
	}
}
