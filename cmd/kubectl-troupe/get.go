package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/printers"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

func newGetCommand(o *options) *cobra.Command {
	var allNamespaces, watch bool
	var output string
	cmd := &cobra.Command{
		Use:   "get [NAME | KIND/NAME]",
		Short: "List troupe jobs of every kind, or one job",
		Example: "  kubectl troupe get\n  kubectl troupe get -A\n  kubectl troupe get mpijob/pi\n" +
			"  kubectl troupe get -o name\n  kubectl troupe get -w   # a progress bar per job, redrawn as the jobs change",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains([]string{"", "name", "json", "yaml"}, output) {
				return fmt.Errorf("unknown output format %q: one of name, json, yaml", output)
			}
			if watch && output != "" {
				return fmt.Errorf("--watch prints a table: give no -o")
			}
			s, err := o.session()
			if err != nil {
				return err
			}
			ns := s.namespace
			if allNamespaces {
				ns = ""
			}
			if watch {
				return o.watchJobs(cmd, s, ns, args, allNamespaces)
			}
			var jobs []job
			if len(args) == 1 {
				arg, err := parseJobArg(args[0])
				if err != nil {
					return err
				}
				if allNamespaces {
					return fmt.Errorf("a job is named within one namespace: give -n, not -A")
				}
				j, err := s.find(cmd.Context(), ns, arg)
				if err != nil {
					return err
				}
				jobs = []job{j}
			} else if jobs, err = s.list(cmd.Context(), ns); err != nil {
				return err
			}
			sortJobs(jobs)
			switch output {
			case "name":
				for _, j := range jobs {
					if _, err := fmt.Fprintln(o.streams.Out, j.ref()); err != nil {
						return err
					}
				}
				return nil
			case "json", "yaml":
				return printObjects(o.streams.Out, output, jobs, len(args) == 1)
			}
			if len(jobs) == 0 {
				if allNamespaces {
					_, err = fmt.Fprintln(o.streams.ErrOut, "No troupe jobs found.")
				} else {
					_, err = fmt.Fprintf(o.streams.ErrOut, "No troupe jobs found in %s namespace.\n", ns)
				}
				return err
			}
			header, rows := getHeader(allNamespaces), getRows(jobs, allNamespaces, time.Now(), false)
			if header, rows, err = s.withRunsIn(cmd.Context(), jobs, header, rows); err != nil {
				return err
			}
			return printTable(o.streams.Out, header, rows)
		},
	}
	cmd.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "List the jobs of every namespace.")
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format: name, json or yaml (default: a table).")
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "After the table, print a job's row again, with a progress bar, each time it changes (until interrupted).")
	return cmd
}

// sortJobs orders jobs as kubectl lists objects: by namespace, then kind, then name.
func sortJobs(jobs []job) {
	slices.SortFunc(jobs, func(a, b job) int {
		return cmp.Or(cmp.Compare(a.obj.GetNamespace(), b.obj.GetNamespace()),
			cmp.Compare(a.kind.Name, b.kind.Name), cmp.Compare(a.obj.GetName(), b.obj.GetName()))
	})
}

func getHeader(allNamespaces bool) []string {
	h := []string{"KIND", "NAME", "PHASE", "WORKERS", "RESTARTS", "PROGRESS", "ETA", "AGE"}
	if allNamespaces {
		h = append([]string{"NAMESPACE"}, h...)
	}
	return h
}

// getRows are the table's rows: WORKERS is status.workers (ready/desired over every worker set),
// RESTARTS status.restarts (the times the job was restarted as a whole), PROGRESS and ETA what
// the training reported (status.progress: its percent, or a bar with bars set, and the time
// left at its rate, counted down from the last report).
func getRows(jobs []job, allNamespaces bool, now time.Time, bars bool) [][]string {
	rows := make([][]string, 0, len(jobs))
	for _, j := range jobs {
		st := j.status()
		row := []string{j.kind.Name, j.obj.GetName(), string(st.Phase), st.Workers,
			strconv.Itoa(int(st.Restarts)), progressCell(st.Progress, bars), etaCell(st, now), age(j.obj.GetCreationTimestamp(), now)}
		if allNamespaces {
			row = append([]string{j.obj.GetNamespace()}, row...)
		}
		rows = append(rows, row)
	}
	return rows
}

// progressBarWidth is the width of a progress bar, in characters.
const progressBarWidth = 20

// progressCell is a job's percent ("42%"), or a bar ("[########------------] 42%") with bars;
// "-" when it reported no total.
func progressCell(p *troupev1.ProgressStatus, bars bool) string {
	if p == nil || p.Percent == nil {
		return "-"
	}
	pct := int(*p.Percent)
	if !bars {
		return fmt.Sprintf("%d%%", pct)
	}
	done := pct * progressBarWidth / 100
	return fmt.Sprintf("[%s%s] %3d%%", strings.Repeat("#", done), strings.Repeat("-", progressBarWidth-done), pct)
}

// etaCell is the time left of a running job at its reported rate, counted down from its last
// report to now; "-" when unknown or the job does not run.
func etaCell(st *troupev1.JobStatus, now time.Time) string {
	p := st.Progress
	if p == nil || p.EstimatedCompletionTime == nil || st.Phase != troupev1.JobRunning {
		return "-"
	}
	left := p.EstimatedCompletionTime.Sub(now)
	if left < 0 {
		left = 0
	}
	return duration.HumanDuration(left)
}

// watchInterval is how often --watch reads the jobs again.
const watchInterval = 2 * time.Second

// watchJobs prints the table of the jobs, with progress bars, then each job's row again when it
// changed, reading them every watchInterval (the jobs of four kinds: one list each), until the
// command is interrupted.
func (o *options) watchJobs(cmd *cobra.Command, s *session, ns string, args []string, allNamespaces bool) error {
	var arg *jobArg
	if len(args) == 1 {
		a, err := parseJobArg(args[0])
		if err != nil {
			return err
		}
		arg = &a
	}
	printed := map[string]string{}
	header := getHeader(allNamespaces)
	tick := time.NewTicker(watchInterval)
	defer tick.Stop()
	for {
		var jobs []job
		var err error
		if arg != nil {
			var j job
			if j, err = s.find(cmd.Context(), ns, *arg); err == nil {
				jobs = []job{j}
			}
		} else {
			jobs, err = s.list(cmd.Context(), ns)
		}
		if cmd.Context().Err() != nil {
			return nil // interrupted (Ctrl-C)
		}
		if err != nil {
			return err
		}
		sortJobs(jobs)
		var changed [][]string
		for i, row := range getRows(jobs, allNamespaces, time.Now(), true) {
			key, line := jobs[i].obj.GetNamespace()+"/"+jobs[i].ref(), strings.Join(row, "\t")
			if printed[key] != line {
				printed[key] = line
				changed = append(changed, row)
			}
		}
		if len(changed) > 0 {
			if err := printTable(o.streams.Out, header, changed); err != nil {
				return err
			}
			header = nil
		}
		select {
		case <-cmd.Context().Done():
			return nil
		case <-tick.C:
		}
	}
}

// age is how long ago t was, as kubectl prints an AGE column.
func age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

// printTable writes header and rows in kubectl's column layout.
func printTable(out io.Writer, header []string, rows [][]string) error {
	tw := printers.GetNewTabWriter(out)
	w := &errWriter{w: tw}
	if header != nil {
		w.printf("%s\n", strings.Join(header, "\t"))
	}
	for _, r := range rows {
		w.printf("%s\n", strings.Join(r, "\t"))
	}
	return cmp.Or(w.err, tw.Flush())
}

// printObjects writes the jobs as JSON or YAML: one object as itself, several as a v1 List, as
// kubectl get does.
func printObjects(out io.Writer, format string, jobs []job, single bool) error {
	var p printers.ResourcePrinter = &printers.JSONPrinter{}
	if format == "yaml" {
		p = &printers.YAMLPrinter{}
	}
	objs := make([]runtime.Object, 0, len(jobs))
	for _, j := range jobs {
		obj := j.obj.DeepCopyObject()
		obj.GetObjectKind().SetGroupVersionKind(j.kind.GVK)
		objs = append(objs, obj)
	}
	if single && len(objs) == 1 {
		return p.PrintObj(objs[0], out)
	}
	list := &corev1.List{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "List"}}
	for _, obj := range objs {
		list.Items = append(list.Items, runtime.RawExtension{Object: obj})
	}
	return p.PrintObj(list, out)
}
