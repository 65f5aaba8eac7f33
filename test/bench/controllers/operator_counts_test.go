package main

import "testing"

func TestCountsBetween(t *testing.T) {
	before := labelledCounts{"MPIJob success": 10, "MPIJob error": 2, "mpijob-kueue success": 4}
	after := labelledCounts{"MPIJob success": 910, "MPIJob error": 2, "mpijob-kueue success": 5, "MPIJob requeue_after": 300}
	want := "MPIJob success 900, MPIJob requeue_after 300, mpijob-kueue success 1"
	if got := countsBetween(before, after); got != want {
		t.Errorf("countsBetween = %q, want %q", got, want)
	}
	if got := after.total() - before.total(); got != 1201 {
		t.Errorf("passes between the reads %v, want 1201", got)
	}
	if got := countsBetween(before, nil); got != "" {
		t.Errorf("with the second read unknown: %q, want nothing", got)
	}
}
