package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// line is the run's one printed line.
func (r *result) line() string {
	perJob := func(n int) float64 { return float64(n) / float64(r.jobs) }
	s := fmt.Sprintf("%s r%d %-12s all %d pods Running %6.1fs, all %d jobs final %6.1fs (launchers released at %.1fs); "+
		"job to Running p50 %.2fs p99 %.2fs; status lag p50 %.2fs p99 %.2fs; writes/job %.1f (+%.1f events",
		r.profile, r.round, r.side, r.pods, r.allRunning.Seconds(), r.jobs, r.allFinal.Seconds(), r.startedLaunchersAt.Seconds(),
		r.ttrP50.Seconds(), r.ttrP99.Seconds(), r.lagP50.Seconds(), r.lagP99.Seconds(),
		perJob(r.writes.writes), perJob(r.writes.events))
	if r.writes.conflicts > 0 {
		s += fmt.Sprintf(", %d refused as conflicts", r.writes.conflicts)
	}
	if r.writes.leases > 0 {
		s += fmt.Sprintf(", +%d lease renewals", r.writes.leases)
	}
	s += fmt.Sprintf("); reads/job %.1f", perJob(r.writes.reads))
	if r.passes >= 0 {
		s += fmt.Sprintf("; passes/job %.1f", r.passes/float64(r.jobs))
	}
	if l := r.lagParts; l.jobs > 0 {
		s += fmt.Sprintf("; status lag of %d jobs in parts p50/p99: to the final status write %.2fs/%.2fs, the write %.2fs/%.2fs, to the bench's watch %.2fs/%.2fs",
			l.jobs, l.toWriteP50.Seconds(), l.toWriteP99.Seconds(), l.writeP50.Seconds(), l.writeP99.Seconds(), l.seenP50.Seconds(), l.seenP99.Seconds())
	}
	if r.side != "limit" { // the limit's status lag is its Job controller's
		s += fmt.Sprintf("; launcher Job Complete after p50 %.2fs p99 %.2fs", r.jcP50.Seconds(), r.jcP99.Seconds())
		if r.jcSeen < r.jobs {
			s += fmt.Sprintf(" (%d of %d Jobs)", r.jcSeen, r.jobs)
		}
	}
	if r.cpuSeconds >= 0 {
		s += fmt.Sprintf("; CPU %.1fs (%.3fs/job); peak RSS %.0f MiB", r.cpuSeconds, r.cpuSeconds/float64(r.jobs), float64(r.peakRSS)/(1<<20))
		if r.fileRSS > 0 {
			s += fmt.Sprintf(" (its binary's pages %.0f MiB at the end)", float64(r.fileRSS)/(1<<20))
		}
	}
	if r.kcmCPUSeconds >= 0 {
		s += fmt.Sprintf("; kube-controller-manager CPU %.1fs (%.3fs/job)", r.kcmCPUSeconds, r.kcmCPUSeconds/float64(r.jobs))
	}
	if r.clusterCPUSeconds >= 0 {
		s += fmt.Sprintf("; the cluster's CPU %.1fs (%.3fs/job)", r.clusterCPUSeconds, r.clusterCPUSeconds/float64(r.jobs))
	}
	if busy, ok := r.machineBusyPercent(); ok {
		s += fmt.Sprintf("; the machine's CPU %.1fs (%.3fs/job, %.0f%% of its %d cores busy)", r.machineCPUSeconds,
			r.machineCPUSeconds/float64(r.jobs), busy, runtime.NumCPU())
	}
	if r.kcmQueues != "" {
		s += "; kube-controller-manager's busiest work queues: " + r.kcmQueues
	}
	if r.floorCPUSeconds >= 0 {
		s += fmt.Sprintf("; its watches alone (watchfloor): CPU %.1fs (%.3fs/job), peak RSS %.0f MiB",
			r.floorCPUSeconds, r.floorCPUSeconds/float64(r.jobs), float64(r.floorPeakRSS)/(1<<20))
	}
	if r.unfinished > 0 {
		s += fmt.Sprintf("; TIMEOUT: %d jobs not final after %.0fs", r.unfinished, r.allFinal.Seconds())
	}
	if r.endedEarly > 0 {
		s += fmt.Sprintf("; INVALID: %d launchers ended before every pod was Running", r.endedEarly)
	}
	return s
}

// writeResults writes summary.csv (one row per run, with the side's settings), timeline.csv
// (pods Running and jobs final every 250 ms, per run), lag.csv (each job's status lag's times,
// lagParts) and a timeline-<profile>.png per profile into dir.
func writeResults(dir string, results []*result, o *options) error {
	summary := [][]string{{"profile", "round", "side", "jobs", "pods", "all_running_s", "all_final_s", "released_s",
		"job_running_p50_s", "job_running_p99_s", "status_lag_p50_s", "status_lag_p99_s",
		"lag_to_write_p50_s", "lag_to_write_p99_s", "lag_write_p50_s", "lag_write_p99_s", "lag_seen_p50_s", "lag_seen_p99_s",
		"launcher_job_complete_p50_s", "launcher_job_complete_p99_s", "writes", "events", "leases", "conflicts", "reads", "passes", "cpu_s", "peak_rss_bytes",
		"controller_manager_cpu_s", "cluster_cpu_s", "machine_cpu_s", "watch_floor_cpu_s", "watch_floor_peak_rss_bytes", "ended_early", "unfinished", "writes_detail", "reads_detail", "watches_detail", "passes_detail", "wakeups_detail", "controller_manager_queues",
		"settings", "cluster_settings"}}
	timeline := [][]string{{"profile", "round", "side", "seconds", "pods_running", "jobs_final"}}
	lags := [][]string{{"profile", "round", "side", "job", "launcher_done_s", "status_write_sent_s", "status_write_done_s", "final_s"}}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
	for _, r := range results {
		l := r.lagParts
		summary = append(summary, []string{r.profile, strconv.Itoa(r.round), r.side, strconv.Itoa(r.jobs), strconv.Itoa(r.pods),
			f(r.allRunning.Seconds()), f(r.allFinal.Seconds()), f(r.startedLaunchersAt.Seconds()),
			f(r.ttrP50.Seconds()), f(r.ttrP99.Seconds()), f(r.lagP50.Seconds()), f(r.lagP99.Seconds()),
			f(l.toWriteP50.Seconds()), f(l.toWriteP99.Seconds()), f(l.writeP50.Seconds()), f(l.writeP99.Seconds()), f(l.seenP50.Seconds()), f(l.seenP99.Seconds()),
			f(r.jcP50.Seconds()), f(r.jcP99.Seconds()), strconv.Itoa(r.writes.writes), strconv.Itoa(r.writes.events), strconv.Itoa(r.writes.leases),
			strconv.Itoa(r.writes.conflicts), strconv.Itoa(r.writes.reads), f(r.passes), f(r.cpuSeconds), strconv.FormatInt(r.peakRSS, 10),
			f(r.kcmCPUSeconds), f(r.clusterCPUSeconds), f(r.machineCPUSeconds), f(r.floorCPUSeconds), strconv.FormatInt(r.floorPeakRSS, 10), strconv.Itoa(r.endedEarly), strconv.Itoa(r.unfinished),
			r.writes.detail, r.writes.readDetail, r.writes.watchDetail, r.passesDetail, r.wakeupsDetail, r.kcmQueues, r.settings, clusterProfiles[r.profile].settings})
		for _, row := range l.rows {
			lags = append(lags, []string{r.profile, strconv.Itoa(r.round), r.side, row.job, f(row.launcherDone.Seconds()),
				f(row.writeSent.Seconds()), f(row.writeDone.Seconds()), f(row.final.Seconds())})
		}
		for _, s := range r.timeline {
			timeline = append(timeline, []string{r.profile, strconv.Itoa(r.round), r.side, f(s.at.Seconds()), strconv.Itoa(s.running), strconv.Itoa(s.final)})
		}
	}
	for name, rows := range map[string][][]string{"summary.csv": summary, "timeline.csv": timeline, "lag.csv": lags} {
		if err := writeCSV(filepath.Join(dir, name), rows); err != nil {
			return err
		}
	}
	for _, p := range o.profiles {
		runs := byProfile(results, p)
		if len(runs) == 0 {
			continue
		}
		if err := plotTimeline(filepath.Join(dir, "timeline-"+p+".png"), p, runs); err != nil {
			return err
		}
	}
	return nil
}

// byProfile are the runs of one profile, in the order they ran.
func byProfile(results []*result, profile string) []*result {
	return runsWhere(results, func(r *result) bool { return r.profile == profile })
}

// bySide are the runs of one side among runs.
func bySide(runs []*result, side string) []*result {
	return runsWhere(runs, func(r *result) bool { return r.side == side })
}

func runsWhere(runs []*result, keep func(*result) bool) []*result {
	var out []*result
	for _, r := range runs {
		if keep(r) {
			out = append(out, r)
		}
	}
	return out
}

// ratioPairs are the ratios the bench reports: troupe's time to every pod Running and CPU per
// job against the other sides'.
var ratioPairs = []struct{ a, b, figure string }{
	{"troupe", "limit", "all pods Running"},
	{"troupe", "mpi-operator", "all pods Running"},
	{"troupe", "mpi-operator", "all jobs final"},
	{"troupe", "mpi-operator", "CPU/job"},
	{"troupe", "mpi-operator", "peak RSS"},
	// What each side costs the whole shared machine (operator, cluster, bench): where the
	// cores are busy throughout, the time to Running follows it.
	{"troupe", "limit", "machine CPU/job"},
	{"troupe", "mpi-operator", "machine CPU/job"},
}

// summarize prints, per profile, each side's medians and ranges, the ratios with both sides'
// settings beside each, and an A/B run's verdicts.
func summarize(rep *reporter, o *options, results []*result) {
	for _, p := range o.profiles {
		runs := byProfile(results, p)
		if len(runs) == 0 {
			continue
		}
		rep.printf("profile %s (%s): median [min-max] of the rounds", p, clusterProfiles[p].settings)
		for _, side := range o.sides {
			if s := bySide(runs, side); len(s) > 0 {
				rep.printf("  %s", medianLine(side, s))
			}
		}
		for _, pair := range ratioPairs {
			if line, ok := ratioLine(o, p, pair.figure, bySide(runs, pair.a), bySide(runs, pair.b)); ok {
				rep.printf("  %s", line)
			}
		}
		a, b := bySide(runs, "troupe-a"), bySide(runs, "troupe-b")
		if len(a) > 0 && len(b) > 0 {
			rep.printf("  A/B (A %s; B %s), A and B trading places every round; identical binaries' ranges would be apart by chance %.0f%% of the time for each figure, so judge the figure the change is meant to move:",
				o.troupeRefs["troupe-a"], o.troupeRefs["troupe-b"], 100*chance(len(a), len(b)))
			for _, name := range abFigures {
				if v, ok := compare(figureNamed(name), a, b); ok {
					rep.printf("    %s", v)
				}
			}
		}
	}
}

// ratioLine is "ratio a/b (figure), profile: median [min-max] of the rounds' ratios", then
// both sides' settings and the cluster's.
func ratioLine(o *options, profile, name string, a, b []*result) (string, bool) {
	if len(a) == 0 || len(b) == 0 {
		return "", false
	}
	v := ratios(figureNamed(name), a, b)
	if len(v) == 0 {
		return "", false
	}
	s := spreadOf(v)
	side := func(r []*result) string { return r[0].side }
	line := fmt.Sprintf("ratio %s/%s (%s), profile %s: %.2f", side(a), side(b), name, profile, s.median)
	if s.n > 1 {
		line += fmt.Sprintf(" [%.2f-%.2f]", s.min, s.max)
	}
	return line + fmt.Sprintf(" of %d rounds' ratios; %s: %s; %s: %s; cluster: %s", s.n,
		side(a), o.sideSettings(side(a)), side(b), o.sideSettings(side(b)), clusterProfiles[profile].settings), true
}

// writeMedians writes medians.csv: per profile, side and figure, the number of runs, the
// median, the range, and the side's settings; the ratios as rows of side "a/b".
func writeMedians(dir string, results []*result, o *options) error {
	rows := [][]string{{"profile", "side", "figure", "runs", "median", "min", "max", "settings", "cluster_settings"}}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 4, 64) }
	for _, p := range o.profiles {
		runs := byProfile(results, p)
		for _, side := range o.sides {
			s := bySide(runs, side)
			for _, fig := range figures {
				if v := fig.values(s); len(v) > 0 {
					sp := spreadOf(v)
					rows = append(rows, []string{p, side, fig.name, strconv.Itoa(sp.n), f(sp.median), f(sp.min), f(sp.max),
						o.sideSettings(side), clusterProfiles[p].settings})
				}
			}
		}
		for _, pair := range ratioPairs {
			a, b := bySide(runs, pair.a), bySide(runs, pair.b)
			if v := ratios(figureNamed(pair.figure), a, b); len(v) > 0 {
				sp := spreadOf(v)
				rows = append(rows, []string{p, pair.a + "/" + pair.b, pair.figure, strconv.Itoa(sp.n), f(sp.median), f(sp.min), f(sp.max),
					pair.a + ": " + o.sideSettings(pair.a) + "; " + pair.b + ": " + o.sideSettings(pair.b), clusterProfiles[p].settings})
			}
		}
	}
	return writeCSV(filepath.Join(dir, "medians.csv"), rows)
}

// reporter prints the bench's lines and keeps them in report.txt.
type reporter struct {
	file *os.File
	out  io.Writer
}

func newReporter(path string) (*reporter, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &reporter{file: f, out: io.MultiWriter(os.Stdout, f)}, nil
}

func (r *reporter) printf(format string, args ...any) {
	_, _ = fmt.Fprintf(r.out, format+"\n", args...)
}

func (r *reporter) close() { _ = r.file.Close() }

func writeCSV(path string, rows [][]string) error {
	file, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(file)
	if err := w.WriteAll(rows); err != nil {
		_ = file.Close()
		return err
	}
	return file.Close()
}

// plotTimeline draws two panels, one above the other: pods Running and jobs final over time
// since each run's first create, a line per run (side and round) of the profile.
func plotTimeline(path, profile string, results []*result) error {
	running, final := plot.New(), plot.New()
	if len(results) > 0 {
		r := results[0]
		running.Title.Text = fmt.Sprintf("%d MPI jobs x (1 launcher + %d workers), cluster profile %s: pods Running", r.jobs, r.pods/r.jobs-1, profile)
	}
	final.Title.Text = "jobs final (launchers released once every pod of the side is Running)"
	running.X.Label.Text, final.X.Label.Text = "seconds since the first create", "seconds since the first create"
	running.Y.Label.Text, final.Y.Label.Text = "pods Running", "jobs final"
	var runLines, finalLines []any
	for _, r := range results {
		rx, fx := make(plotter.XYs, len(r.timeline)), make(plotter.XYs, len(r.timeline))
		for i, s := range r.timeline {
			rx[i] = plotter.XY{X: s.at.Seconds(), Y: float64(s.running)}
			fx[i] = plotter.XY{X: s.at.Seconds(), Y: float64(s.final)}
		}
		label := fmt.Sprintf("%s r%d", r.side, r.round)
		runLines = append(runLines, label, rx)
		finalLines = append(finalLines, label, fx)
	}
	if err := plotutil.AddLines(running, runLines...); err != nil {
		return err
	}
	if err := plotutil.AddLines(final, finalLines...); err != nil {
		return err
	}
	running.Legend.Top, final.Legend.Top = false, false
	running.Legend.Left, final.Legend.Left = false, false
	img := vgimg.New(vg.Points(720), vg.Points(720))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadTop: vg.Points(8), PadBottom: vg.Points(8), PadLeft: vg.Points(8),
		PadRight: vg.Points(16), PadY: vg.Points(24)}
	canvases := plot.Align([][]*plot.Plot{{running}, {final}}, tiles, dc)
	running.Draw(canvases[0][0])
	final.Draw(canvases[1][0])
	file, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(file); err != nil {
		_ = file.Close()
		return err
	}
	return file.Close()
}
