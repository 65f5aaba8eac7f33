package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/troupe-dev/troupe/test/bench/benchstats"
)

// figure is one number a side's run gives, with how to print it. The medians, the spreads, the
// ratios and the A/B verdicts all range over this one table.
type figure struct {
	name   string // column and label
	unit   string // printed after the value ("s", " MiB", "")
	format string // of one value
	// of is the figure of a run; ok false where the side has none (the limit's CPU).
	of func(r *result) (v float64, ok bool)
}

func always(f func(r *result) float64) func(r *result) (float64, bool) {
	return func(r *result) (float64, bool) { return f(r), true }
}

func perJob(r *result, n int) float64 { return float64(n) / float64(r.jobs) }

var figures = []figure{
	{"all pods Running", "s", "%.1f", always(func(r *result) float64 { return r.allRunning.Seconds() })},
	{"all jobs final", "s", "%.1f", always(func(r *result) float64 { return r.allFinal.Seconds() })},
	{"job to Running p50", "s", "%.2f", always(func(r *result) float64 { return r.ttrP50.Seconds() })},
	{"job to Running p99", "s", "%.2f", always(func(r *result) float64 { return r.ttrP99.Seconds() })},
	{"status lag p50", "s", "%.2f", always(func(r *result) float64 { return r.lagP50.Seconds() })},
	{"status lag p99", "s", "%.2f", always(func(r *result) float64 { return r.lagP99.Seconds() })},
	// The lag's parts (lagParts), where the side's final status writes were timed.
	{"lag to the write p99", "s", "%.2f", func(r *result) (float64, bool) {
		return r.lagParts.toWriteP99.Seconds(), r.lagParts.jobs > 0
	}},
	{"lag the write p99", "s", "%.2f", func(r *result) (float64, bool) {
		return r.lagParts.writeP99.Seconds(), r.lagParts.jobs > 0
	}},
	{"writes/job", "", "%.1f", always(func(r *result) float64 { return perJob(r, r.writes.writes) })},
	{"events/job", "", "%.1f", always(func(r *result) float64 { return perJob(r, r.writes.events) })},
	{"reads/job", "", "%.1f", always(func(r *result) float64 { return perJob(r, r.writes.reads) })},
	{"passes/job", "", "%.1f", func(r *result) (float64, bool) { return r.passes / float64(r.jobs), r.passes >= 0 }},
	{"CPU/job", "s", "%.3f", func(r *result) (float64, bool) { return r.cpuSeconds / float64(r.jobs), r.cpuSeconds >= 0 }},
	{"peak RSS", " MiB", "%.0f", func(r *result) (float64, bool) { return float64(r.peakRSS) / (1 << 20), r.cpuSeconds >= 0 }},
	{"controller-manager CPU/job", "s", "%.3f", func(r *result) (float64, bool) {
		return r.kcmCPUSeconds / float64(r.jobs), r.kcmCPUSeconds >= 0
	}},
	{"cluster CPU/job", "s", "%.3f", func(r *result) (float64, bool) {
		return r.clusterCPUSeconds / float64(r.jobs), r.clusterCPUSeconds >= 0
	}},
	{"machine CPU/job", "s", "%.3f", func(r *result) (float64, bool) {
		return r.machineCPUSeconds / float64(r.jobs), r.machineCPUSeconds >= 0
	}},
	// How much of the machine's cores the run kept busy, from its first create to every job
	// final: near 100% the cores set the pace for every side.
	{"machine busy", "%", "%.0f", (*result).machineBusyPercent},
	{"watch floor CPU/job", "s", "%.3f", func(r *result) (float64, bool) {
		return r.floorCPUSeconds / float64(r.jobs), r.floorCPUSeconds >= 0
	}},
	{"watch floor peak RSS", " MiB", "%.0f", func(r *result) (float64, bool) {
		return float64(r.floorPeakRSS) / (1 << 20), r.floorCPUSeconds >= 0
	}},
}

// figureNamed is the figure of that name; it panics on a name the table has not (a typo in
// this package).
func figureNamed(name string) figure {
	i := slices.IndexFunc(figures, func(f figure) bool { return f.name == name })
	if i < 0 {
		panic("no figure " + name)
	}
	return figures[i]
}

// spread is a figure's median over repeated runs and its range (min-max): with 3 runs an
// interquartile range says nothing more.
type spread struct {
	n                int
	median, min, max float64
}

func spreadOf(values []float64) spread {
	if len(values) == 0 {
		return spread{}
	}
	median, lo, hi := benchstats.Spread(values)
	return spread{n: len(values), median: median, min: lo, max: hi}
}

// values are the figure of each run, in order, leaving out runs where the side has none.
func (f figure) values(runs []*result) []float64 {
	var v []float64
	for _, r := range runs {
		if x, ok := f.of(r); ok {
			v = append(v, x)
		}
	}
	return v
}

// String is "median [min-max]" in the figure's format and unit.
func (f figure) show(s spread) string {
	if s.n == 1 {
		return fmt.Sprintf(f.format+"%s", s.median, f.unit)
	}
	return fmt.Sprintf(f.format+"%s ["+f.format+"-"+f.format+"]", s.median, f.unit, s.min, s.max)
}

// medianLine is one side's figures over its runs: "median [min-max]" each.
func medianLine(side string, runs []*result) string {
	parts := []string{fmt.Sprintf("%-12s %d runs", side, len(runs))}
	for _, f := range figures {
		v := f.values(runs)
		if len(v) == 0 {
			continue
		}
		parts = append(parts, f.name+" "+f.show(spreadOf(v)))
	}
	return strings.Join(parts, "; ")
}

// ratios are a over b in each round both ran (same profile, same round: the runs closest in
// time), of the figure.
func ratios(f figure, a, b []*result) []float64 {
	var out []float64
	for _, ra := range a {
		for _, rb := range b {
			if ra.round != rb.round {
				continue
			}
			x, okA := f.of(ra)
			y, okB := f.of(rb)
			if okA && okB && y > 0 {
				out = append(out, x/y)
			}
		}
	}
	return out
}

// verdict compares a figure of two sides over repeated runs: the effect exceeds the spread when
// the two sides' ranges (min-max) do not overlap, every run of one beyond every run of the
// other. For two identical binaries with n runs each in random order that happens by chance
// with probability 2/C(2n, n) (chance): 1 in 10 at 3 runs each, 1 in 35 at 4; below 3 runs
// (1 in 3) the bench gives no verdict.
type verdict struct {
	figure   figure
	a, b     spread
	exceeds  bool
	relative float64 // b's median over a's
}

// minVerdictRuns is the fewest runs of each side a verdict needs.
const minVerdictRuns = 3

func compare(f figure, a, b []*result) (verdict, bool) {
	va, vb := f.values(a), f.values(b)
	if len(va) == 0 || len(vb) == 0 {
		return verdict{}, false
	}
	v := verdict{figure: f, a: spreadOf(va), b: spreadOf(vb)}
	v.exceeds = v.a.max < v.b.min || v.b.max < v.a.min
	if v.a.median != 0 {
		v.relative = v.b.median / v.a.median
	}
	return v, true
}

func (v verdict) String() string {
	word := "within the spread"
	switch {
	case min(v.a.n, v.b.n) < minVerdictRuns:
		word = fmt.Sprintf("no verdict (fewer than %d runs each)", minVerdictRuns)
	case v.exceeds:
		word = "effect exceeds spread"
	}
	return fmt.Sprintf("%s: A %s, B %s, B/A %.2f: %s", v.figure.name, v.figure.show(v.a), v.figure.show(v.b), v.relative, word)
}

// chance is the probability that the ranges of n and m runs of two identical sides, in random
// order, do not overlap: 2 of the C(n+m, n) ways to split the n+m runs.
func chance(n, m int) float64 {
	c := 1.0 // C(n+m, n)
	for i := 1; i <= n; i++ {
		c = c * float64(m+i) / float64(i)
	}
	return 2 / c
}

// abFigures are the figures an A/B run gives a verdict on.
var abFigures = []string{"all pods Running", "all jobs final", "job to Running p99", "status lag p99",
	"writes/job", "reads/job", "CPU/job", "peak RSS", "machine CPU/job"}
