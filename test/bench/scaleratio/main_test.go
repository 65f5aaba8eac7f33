package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadTroupeRunsKeepsTroupesRowsByColumnName(t *testing.T) {
	csv := strings.Join([]string{
		"profile,side,jobs,passes,cpu_s,peak_rss_bytes,watch_floor_cpu_s,all_running_s,status_lag_p99_s",
		"unthrottled,limit,1000,-1,-1,0,-1,40,0.5",
		"unthrottled,troupe,1000,9000,28.1,243269632,13.2,60.5,1.02",
	}, "\n")
	path := filepath.Join(t.TempDir(), "summary.csv")
	if err := os.WriteFile(path, []byte(csv), 0o644); err != nil {
		t.Fatal(err)
	}
	runs, err := readTroupeRuns(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 {
		t.Fatalf("want troupe's one row, got %d", len(runs))
	}
	if got := perJobFigures[0].of(runs[0]); math.Abs(got-0.0281) > 1e-9 {
		t.Errorf("CPU/job %v, want 0.0281", got)
	}
	if got := perJobFigures[3].of(runs[0]); math.Abs(got-28.1/9) > 1e-9 {
		t.Errorf("CPU a pass %v ms, want %v", got, 28.1/9)
	}
}

func TestReadTroupeRunsNamesAMissingColumn(t *testing.T) {
	path := filepath.Join(t.TempDir(), "summary.csv")
	if err := os.WriteFile(path, []byte("side,jobs\ntroupe,1000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readTroupeRuns(path); err == nil || !strings.Contains(err.Error(), "no column cpu_s") {
		t.Fatalf("want an error naming cpu_s, got %v", err)
	}
}

func TestRatioOfMediansAndItsRange(t *testing.T) {
	small, large := []float64{0.038, 0.028, 0.030}, []float64{0.039, 0.0415, 0.036}
	ratio, lo, hi := ratioOf(small, large)
	if math.Abs(ratio-0.039/0.030) > 1e-9 || math.Abs(lo-0.036/0.038) > 1e-9 || math.Abs(hi-0.0415/0.028) > 1e-9 {
		t.Errorf("ratio %v [%v-%v]", ratio, lo, hi)
	}
	if m := median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Errorf("median of an even count %v, want 2.5", m)
	}
}

func TestPairedRatiosPairRunsInTheOrderGiven(t *testing.T) {
	// Three pairs, each from a machine of a different pace: the pair's ratio is what the pace
	// does not move.
	small, large := []float64{0.038, 0.082, 0.0995}, []float64{0.0389, 0.0932, 0.1010}
	ratios := pairedRatios(small, large)
	want := []float64{0.0389 / 0.038, 0.0932 / 0.082, 0.1010 / 0.0995}
	for i := range want {
		if math.Abs(ratios[i]-want[i]) > 1e-9 {
			t.Errorf("pair %d: ratio %v, want %v", i, ratios[i], want[i])
		}
	}
	if m := median(ratios); math.Abs(m-0.0389/0.038) > 1e-9 {
		t.Errorf("median %v, want the middle ratio %v", m, 0.0389/0.038)
	}
	if got := pairedRatios([]float64{1, 2}, []float64{3}); len(got) != 1 {
		t.Errorf("an unpaired run is dropped, got %d ratios", len(got))
	}
	if got := formatRatios([]float64{1.024, 1.5}); got != "1.02x 1.50x" {
		t.Errorf("formatRatios %q", got)
	}
}
