package main

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func runOf(side string, round int, running time.Duration, cpu float64) *result {
	return &result{side: side, round: round, jobs: 10, allRunning: running, cpuSeconds: cpu}
}

// The median of an even count is the mean of the middle two; the range is min-max.
func TestSpreadOf(t *testing.T) {
	for _, tc := range []struct {
		values []float64
		want   spread
	}{
		{nil, spread{}},
		{[]float64{5}, spread{n: 1, median: 5, min: 5, max: 5}},
		{[]float64{3, 1, 2}, spread{n: 3, median: 2, min: 1, max: 3}},
		{[]float64{4, 1, 2, 10}, spread{n: 4, median: 3, min: 1, max: 10}},
	} {
		if diff := cmp.Diff(tc.want, spreadOf(tc.values), cmp.AllowUnexported(spread{})); diff != "" {
			t.Errorf("spreadOf(%v) (-want +got):\n%s", tc.values, diff)
		}
	}
}

// A side without the figure (the limit has no operator, so no CPU) is left out of its median.
func TestMedianLineLeavesOutWhatASideHasNot(t *testing.T) {
	limit := []*result{runOf("limit", 1, 20*time.Second, -1), runOf("limit", 2, 22*time.Second, -1), runOf("limit", 3, 30*time.Second, -1)}
	for i := range limit {
		limit[i].kcmCPUSeconds, limit[i].floorCPUSeconds = -1, -1
		limit[i].clusterCPUSeconds, limit[i].machineCPUSeconds = -1, -1
	}
	got := medianLine("limit", limit)
	if !strings.Contains(got, "all pods Running 22.0s [20.0-30.0]") {
		t.Errorf("medianLine = %q, want the time to every pod Running as median [min-max]", got)
	}
	if strings.Contains(got, "CPU/job") || strings.Contains(got, "peak RSS") {
		t.Errorf("medianLine = %q: the limit has no operator's CPU or RSS", got)
	}
}

// Ratios pair the runs of one round, the closest in time.
func TestRatiosPairRounds(t *testing.T) {
	troupe := []*result{runOf("troupe", 1, 40*time.Second, 1), runOf("troupe", 2, 60*time.Second, 1)}
	limit := []*result{runOf("limit", 2, 30*time.Second, -1), runOf("limit", 1, 20*time.Second, -1)}
	got := ratios(figureNamed("all pods Running"), troupe, limit)
	if diff := cmp.Diff([]float64{2, 2}, got); diff != "" {
		t.Errorf("ratios (-want +got):\n%s", diff)
	}
}

// The effect exceeds the spread only when every run of one side is beyond every run of the
// other.
func TestCompare(t *testing.T) {
	f := figureNamed("CPU/job")
	mk := func(side string, cpus ...float64) []*result {
		var out []*result
		for i, c := range cpus {
			out = append(out, runOf(side, i+1, time.Second, c))
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		a, b    []float64
		exceeds bool
		rel     float64
	}{
		{"apart", []float64{0.40, 0.38, 0.42}, []float64{0.30, 0.31, 0.29}, true, 0.75},
		{"overlap", []float64{0.40, 0.30, 0.42}, []float64{0.30, 0.31, 0.29}, false, 0.30 / 0.40},
		{"touching", []float64{0.40, 0.31, 0.42}, []float64{0.30, 0.31, 0.29}, false, 0.30 / 0.40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, ok := compare(f, mk("troupe-a", tc.a...), mk("troupe-b", tc.b...))
			if !ok {
				t.Fatal("compare: no verdict")
			}
			if v.exceeds != tc.exceeds || (v.relative-tc.rel) > 1e-9 || (tc.rel-v.relative) > 1e-9 {
				t.Errorf("compare = exceeds %v, B/A %.3f; want %v, %.3f", v.exceeds, v.relative, tc.exceeds, tc.rel)
			}
			word := "within the spread"
			if tc.exceeds {
				word = "effect exceeds spread"
			}
			if !strings.HasSuffix(v.String(), word) {
				t.Errorf("verdict %q does not end with %q", v, word)
			}
		})
	}
	few, _ := compare(f, mk("troupe-a", 0.40, 0.41), mk("troupe-b", 0.30, 0.31))
	if !strings.HasSuffix(few.String(), "no verdict (fewer than 3 runs each)") {
		t.Errorf("verdict on 2 runs each = %q, want no verdict", few)
	}
	if _, ok := compare(figureNamed("CPU/job"), mk("troupe-a", 1), []*result{runOf("limit", 1, time.Second, -1)}); ok {
		t.Error("compare gave a verdict on a side that has no such figure")
	}
}

// A and B trade places every other round; other sides keep theirs.
func TestRoundOrder(t *testing.T) {
	sides := []string{"limit", "troupe-a", "troupe-b"}
	for round, want := range map[int][]string{
		1: {"limit", "troupe-a", "troupe-b"},
		2: {"limit", "troupe-b", "troupe-a"},
		3: {"limit", "troupe-a", "troupe-b"},
	} {
		if diff := cmp.Diff(want, roundOrder(sides, round)); diff != "" {
			t.Errorf("round %d (-want +got):\n%s", round, diff)
		}
	}
	if diff := cmp.Diff(sides, []string{"limit", "troupe-a", "troupe-b"}); diff != "" {
		t.Errorf("roundOrder changed its argument: %s", diff)
	}
	plain := []string{"limit", "troupe", "mpi-operator"}
	if diff := cmp.Diff(plain, roundOrder(plain, 2)); diff != "" {
		t.Errorf("without A/B the order is -sides' (-want +got):\n%s", diff)
	}
}

// Every side's settings say its client rate; mpi-operator's its work queue's limits, the flags
// it is started with.
func TestSideSettings(t *testing.T) {
	o := &options{qps: 50, burst: 100, mpiQueueQPS: 100, mpiQueueBurst: 1000, troupeRefs: map[string]string{"troupe-a": "revision main (abc1234)"}}
	for side, want := range map[string][]string{
		"limit":        {"client QPS 50 burst 100"},
		"troupe":       {"client QPS 50 burst 100", "--max-concurrent-reconciles 8"},
		"troupe-a":     {"client QPS 50 burst 100", "revision main (abc1234)"},
		"mpi-operator": {"client QPS 50 burst 100", "--controller-queue-rate-limit 100 --controller-queue-burst 1000", "--threadiness 2"},
	} {
		got := o.sideSettings(side)
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("sideSettings(%s) = %q, want it to say %q", side, got, w)
			}
		}
	}
}

// The chance that identical sides' ranges are apart: 2 of the C(2n, n) splits of their runs.
func TestChance(t *testing.T) {
	for _, tc := range []struct {
		n, m int
		want float64
	}{{1, 1, 1}, {2, 2, 2.0 / 6}, {3, 3, 0.1}, {4, 4, 2.0 / 70}, {3, 2, 0.2}} {
		if got := chance(tc.n, tc.m); got-tc.want > 1e-12 || tc.want-got > 1e-12 {
			t.Errorf("chance(%d, %d) = %g, want %g", tc.n, tc.m, got, tc.want)
		}
	}
}
