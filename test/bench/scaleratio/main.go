// Command scaleratio reads the summary.csv of make bench runs of troupe at two job counts
// (make bench-scale-ratio: 1,000 and 3,000 jobs, interleaved) and prints, for each count, the
// median and range of the per-job figures issue 53 targets, and the ratio of the larger count's
// median to the smaller's with the widest and narrowest ratio any two runs give
// (docs/performance.md: per-job CPU and RSS at 3,000 jobs within 1.2x of 1,000). It also pairs
// the runs in the order given (the i-th run of each count) and prints each pair's ratio and
// their median: a pair runs back to back, so its ratio does not carry the machine's pace from one
// day to the next, and pairs from several sessions can be read together.
//
//	go run ./test/bench/scaleratio bench-results/scale-*/*/summary.csv
package main

import (
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/troupe-dev/troupe/test/bench/benchstats"
)

// perJobFigure is one figure of a run, from its summary row.
type perJobFigure struct {
	name, unit, format string
	of                 func(row map[string]float64) float64
}

var perJobFigures = []perJobFigure{
	{"CPU/job", "s", "%.4f", func(r map[string]float64) float64 { return r["cpu_s"] / r["jobs"] }},
	{"peak RSS/job", " KiB", "%.0f", func(r map[string]float64) float64 { return r["peak_rss_bytes"] / 1024 / r["jobs"] }},
	{"passes/job", "", "%.1f", func(r map[string]float64) float64 { return r["passes"] / r["jobs"] }},
	{"CPU a pass", " ms", "%.2f", func(r map[string]float64) float64 { return 1000 * r["cpu_s"] / r["passes"] }},
	{"watch floor CPU/job", "s", "%.4f", func(r map[string]float64) float64 { return r["watch_floor_cpu_s"] / r["jobs"] }},
}

// wholeRunFigures are the figures of a whole run, not of a job; their pairs' ratios say nothing
// the target asks, so only the medians print them.
var wholeRunFigures = []perJobFigure{
	{"all pods Running", "s", "%.0f", func(r map[string]float64) float64 { return r["all_running_s"] }},
	{"status lag p99", "s", "%.2f", func(r map[string]float64) float64 { return r["status_lag_p99_s"] }},
}

// numericColumns are the summary.csv columns the figures read.
var numericColumns = []string{"jobs", "cpu_s", "peak_rss_bytes", "passes", "watch_floor_cpu_s", "all_running_s", "status_lag_p99_s"}

func main() {
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: scaleratio summary.csv... (troupe's rows, two job counts)")
	}
	flag.Parse()
	runs := map[int][]map[string]float64{}
	for _, path := range flag.Args() {
		rows, err := readTroupeRuns(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "scaleratio:", err)
			os.Exit(1)
		}
		for _, r := range rows {
			runs[int(r["jobs"])] = append(runs[int(r["jobs"])], r)
		}
	}
	if len(runs) != 2 {
		fmt.Fprintf(os.Stderr, "scaleratio: want troupe's runs at two job counts, have %d\n", len(runs))
		os.Exit(2)
	}
	counts := make([]int, 0, 2)
	for n := range runs {
		counts = append(counts, n)
	}
	slices.Sort(counts)
	small, large := counts[0], counts[1]
	fmt.Printf("troupe at %d jobs (%d runs) and %d jobs (%d runs): median [range]; ratio of medians [narrowest-widest of any two runs]\n",
		small, len(runs[small]), large, len(runs[large]))
	for _, f := range slices.Concat(perJobFigures, wholeRunFigures) {
		s, l := valuesOf(runs[small], f), valuesOf(runs[large], f)
		ratio, lo, hi := ratioOf(s, l)
		fmt.Printf("%-20s %d: "+f.format+"%s [%s]  %d: "+f.format+"%s [%s]  ratio %.2fx [%.2f-%.2f]\n",
			f.name, small, median(s), f.unit, rangeOf(s, f.format), large, median(l), f.unit, rangeOf(l, f.format), ratio, lo, hi)
	}
	fmt.Printf("paired, run i at %d with run i at %d in the order given (%d pairs): each pair's ratio; their median\n",
		small, large, min(len(runs[small]), len(runs[large])))
	for _, f := range perJobFigures {
		ratios := pairedRatios(valuesOf(runs[small], f), valuesOf(runs[large], f))
		fmt.Printf("%-20s %s  median %.2fx\n", f.name, formatRatios(ratios), median(ratios))
	}
}

// pairedRatios are large[i]/small[i] for the runs both counts have.
func pairedRatios(small, large []float64) []float64 {
	ratios := make([]float64, min(len(small), len(large)))
	for i := range ratios {
		ratios[i] = large[i] / small[i]
	}
	return ratios
}

func formatRatios(ratios []float64) string {
	formatted := make([]string, len(ratios))
	for i, r := range ratios {
		formatted[i] = fmt.Sprintf("%.2fx", r)
	}
	return strings.Join(formatted, " ")
}

// readTroupeRuns are the rows of troupe's side in one summary.csv, by column name.
func readTroupeRuns(path string) ([]map[string]float64, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = file.Close() }() // read only: a failed close loses nothing
	r := csv.NewReader(file)
	header, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	column := map[string]int{}
	for i, name := range header {
		column[name] = i
	}
	for _, name := range append([]string{"side"}, numericColumns...) {
		if _, ok := column[name]; !ok {
			return nil, fmt.Errorf("%s: no column %s", path, name)
		}
	}
	var runs []map[string]float64
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return runs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if rec[column["side"]] != "troupe" {
			continue
		}
		run := map[string]float64{}
		for _, name := range numericColumns {
			v, err := strconv.ParseFloat(rec[column[name]], 64)
			if err != nil {
				return nil, fmt.Errorf("%s: column %s: %w", path, name, err)
			}
			run[name] = v
		}
		runs = append(runs, run)
	}
}

func valuesOf(runs []map[string]float64, f perJobFigure) []float64 {
	vs := make([]float64, len(runs))
	for i, r := range runs {
		vs[i] = f.of(r)
	}
	return vs
}

func median(vs []float64) float64 {
	m, _, _ := benchstats.Spread(vs)
	return m
}

func rangeOf(vs []float64, format string) string {
	_, lo, hi := benchstats.Spread(vs)
	return fmt.Sprintf(format+"-"+format, lo, hi)
}

// ratioOf is the larger count's median over the smaller's, and the narrowest and widest ratio
// of one run of each.
func ratioOf(small, large []float64) (ratio, lo, hi float64) {
	return median(large) / median(small), slices.Min(large) / slices.Max(small), slices.Max(large) / slices.Min(small)
}
