package engine

import (
	"errors"
	"math"
	"testing"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// A job past the bounds is refused before any child is built, however it got past admission;
// sums that would wrap an int32 are caught too.
func TestCheckBounds(t *testing.T) {
	sets := func(replicas ...int32) *Spec {
		s := &Spec{Master: Master{Slots: 1}}
		for _, r := range replicas {
			s.WorkerSets = append(s.WorkerSets, WorkerSet{Name: "w", Replicas: r, Slots: 1})
		}
		return s
	}
	tests := map[string]struct {
		spec     *Spec
		tooLarge bool
	}{
		"the largest job":                    {spec: sets(troupev1.MaxWorkerReplicas)},
		"one pod more":                       {spec: sets(troupev1.MaxWorkerReplicas, 1), tooLarge: true},
		"replicas that wrap an int32 sum":    {spec: sets(math.MaxInt32, math.MaxInt32, 2), tooLarge: true},
		"a scale to the largest int32":       {spec: sets(math.MaxInt32), tooLarge: true},
		"slots past the bound on a worker":   {spec: func() *Spec { s := sets(2); s.WorkerSets[0].Slots = troupev1.MaxSlotsPerPod + 1; return s }(), tooLarge: true},
		"slots past the bound on the master": {spec: func() *Spec { s := sets(2); s.Master.Slots = troupev1.MaxSlotsPerPod + 1; return s }(), tooLarge: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := checkBounds(tc.spec)
			var se *SpecError
			if got := errors.As(err, &se) && se.Reason == troupev1.ReasonTooLarge; got != tc.tooLarge {
				t.Errorf("checkBounds = %v, want TooLarge %v", err, tc.tooLarge)
			}
		})
	}
}
