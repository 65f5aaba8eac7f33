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
)

func newGetCommand(o *options) *cobra.Command {
	var allNamespaces bool
	var output string
	cmd := &cobra.Command{
		Use:   "get [NAME | KIND/NAME]",
		Short: "List troupe jobs of every kind, or one job",
		Example: "  kubectl troupe get\n  kubectl troupe get -A\n  kubectl troupe get mpijob/pi\n" +
			"  kubectl troupe get -o name",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains([]string{"", "name", "json", "yaml"}, output) {
				return fmt.Errorf("unknown output format %q: one of name, json, yaml", output)
			}
			s, err := o.session()
			if err != nil {
				return err
			}
			ns := s.namespace
			if allNamespaces {
				ns = ""
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
			return printTable(o.streams.Out, getHeader(allNamespaces), getRows(jobs, allNamespaces, time.Now()))
		},
	}
	cmd.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "List the jobs of every namespace.")
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format: name, json or yaml (default: a table).")
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
	h := []string{"KIND", "NAME", "PHASE", "WORKERS", "RESTARTS", "AGE"}
	if allNamespaces {
		h = append([]string{"NAMESPACE"}, h...)
	}
	return h
}

// getRows are the table's rows: WORKERS is status.workers (ready/desired over every worker set)
// and RESTARTS status.restarts (the times the job was restarted as a whole).
func getRows(jobs []job, allNamespaces bool, now time.Time) [][]string {
	rows := make([][]string, 0, len(jobs))
	for _, j := range jobs {
		st := j.status()
		row := []string{j.kind.Name, j.obj.GetName(), string(st.Phase), st.Workers,
			strconv.Itoa(int(st.Restarts)), age(j.obj.GetCreationTimestamp(), now)}
		if allNamespaces {
			row = append([]string{j.obj.GetNamespace()}, row...)
		}
		rows = append(rows, row)
	}
	return rows
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
	w.printf("%s\n", strings.Join(header, "\t"))
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
