package main

import (
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// line is the side's one printed line.
func (r *result) line() string {
	perJob := func(n int) float64 { return float64(n) / float64(r.jobs) }
	s := fmt.Sprintf("%-12s all %d pods Running %6.1fs, all %d jobs final %6.1fs (launchers released at %.1fs); "+
		"job to Running p50 %.2fs p99 %.2fs; status lag p50 %.2fs p99 %.2fs; writes/job %.1f (+%.1f events",
		r.side, r.pods, r.allRunning.Seconds(), r.jobs, r.allFinal.Seconds(), r.startedLaunchersAt.Seconds(),
		r.ttrP50.Seconds(), r.ttrP99.Seconds(), r.lagP50.Seconds(), r.lagP99.Seconds(),
		perJob(r.writes.writes), perJob(r.writes.events))
	if r.writes.conflicts > 0 {
		s += fmt.Sprintf(", %d refused as conflicts", r.writes.conflicts)
	}
	if r.writes.leases > 0 {
		s += fmt.Sprintf(", +%d lease renewals", r.writes.leases)
	}
	s += fmt.Sprintf("); reads/job %.1f", perJob(r.writes.reads))
	if r.side != "limit" { // the limit's status lag is its Job controller's
		s += fmt.Sprintf("; launcher Job Complete after p50 %.2fs p99 %.2fs", r.jcP50.Seconds(), r.jcP99.Seconds())
		if r.jcSeen < r.jobs {
			s += fmt.Sprintf(" (%d of %d Jobs)", r.jcSeen, r.jobs)
		}
	}
	if r.cpuSeconds >= 0 {
		s += fmt.Sprintf("; CPU %.1fs (%.3fs/job); peak RSS %.0f MiB", r.cpuSeconds, r.cpuSeconds/float64(r.jobs), float64(r.peakRSS)/(1<<20))
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

// writeResults writes summary.csv (one row per side), timeline.csv (pods Running and jobs final
// every 250 ms, per side) and timeline.png into dir.
func writeResults(dir string, results []*result) error {
	summary := [][]string{{"side", "jobs", "pods", "all_running_s", "all_final_s", "released_s",
		"job_running_p50_s", "job_running_p99_s", "status_lag_p50_s", "status_lag_p99_s",
		"launcher_job_complete_p50_s", "launcher_job_complete_p99_s", "writes", "events", "leases", "conflicts", "reads", "cpu_s", "peak_rss_bytes", "watch_floor_cpu_s", "watch_floor_peak_rss_bytes", "ended_early", "unfinished", "writes_detail", "reads_detail"}}
	timeline := [][]string{{"side", "seconds", "pods_running", "jobs_final"}}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
	for _, r := range results {
		summary = append(summary, []string{r.side, strconv.Itoa(r.jobs), strconv.Itoa(r.pods),
			f(r.allRunning.Seconds()), f(r.allFinal.Seconds()), f(r.startedLaunchersAt.Seconds()),
			f(r.ttrP50.Seconds()), f(r.ttrP99.Seconds()), f(r.lagP50.Seconds()), f(r.lagP99.Seconds()),
			f(r.jcP50.Seconds()), f(r.jcP99.Seconds()), strconv.Itoa(r.writes.writes), strconv.Itoa(r.writes.events), strconv.Itoa(r.writes.leases),
			strconv.Itoa(r.writes.conflicts), strconv.Itoa(r.writes.reads), f(r.cpuSeconds), strconv.FormatInt(r.peakRSS, 10),
			f(r.floorCPUSeconds), strconv.FormatInt(r.floorPeakRSS, 10), strconv.Itoa(r.endedEarly), strconv.Itoa(r.unfinished), r.writes.detail, r.writes.readDetail})
		for _, s := range r.timeline {
			timeline = append(timeline, []string{r.side, f(s.at.Seconds()), strconv.Itoa(s.running), strconv.Itoa(s.final)})
		}
	}
	for name, rows := range map[string][][]string{"summary.csv": summary, "timeline.csv": timeline} {
		if err := writeCSV(filepath.Join(dir, name), rows); err != nil {
			return err
		}
	}
	return plotTimeline(filepath.Join(dir, "timeline.png"), results)
}

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
// since each side's first create, a line per side.
func plotTimeline(path string, results []*result) error {
	running, final := plot.New(), plot.New()
	if len(results) > 0 {
		r := results[0]
		running.Title.Text = fmt.Sprintf("%d MPI jobs x (1 launcher + %d workers): pods Running", r.jobs, r.pods/r.jobs-1)
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
		runLines = append(runLines, r.side, rx)
		finalLines = append(finalLines, r.side, fx)
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
