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
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/utils/ptr"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

func newDescribeCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:     "describe (NAME | KIND/NAME)",
		Short:   "Tell a job's story: its state, conditions, children, pods and events",
		Example: "  kubectl troupe describe pi\n  kubectl troupe describe mpijob/pi",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, j, err := o.findJob(cmd, args[0])
			if err != nil {
				return err
			}
			// What the user may not read (the built-in view role lists no Secrets) is shown as
			// such; the rest of the story is still told.
			c, err := s.children(cmd.Context(), j)
			if err != nil {
				return err
			}
			d, err := s.dispatchOf(cmd.Context(), j)
			if err != nil {
				return err
			}
			events, err := s.events(cmd.Context(), j)
			if err != nil {
				refused, err := forbidden("Events", err)
				if err != nil {
					return err
				}
				c.notShown = append(c.notShown, refused)
			}
			return writeStory(o.streams.Out, story{job: j, children: c, events: events, dispatch: d}, time.Now())
		},
	}
}

// findJob connects and finds the job arg names in the namespace of the flags.
func (o *options) findJob(cmd *cobra.Command, arg string) (*session, job, error) {
	a, err := parseJobArg(arg)
	if err != nil {
		return nil, job{}, err
	}
	s, err := o.session()
	if err != nil {
		return nil, job{}, err
	}
	j, err := s.find(cmd.Context(), s.namespace, a)
	return s, j, err
}

// story is everything describe shows of a job.
type story struct {
	job      job
	children children
	events   []corev1.Event
	// dispatch is where Kueue's MultiKueue sent the job; nil for a job that runs here.
	dispatch *dispatch
}

const none = "<none>"

// progressLine is what the training last reported: "120/1000 steps (12%), ETA 4m, reported 3s
// ago: epoch 2/10", or <none>.
func progressLine(st *troupev1.JobStatus, now time.Time) string {
	p := st.Progress
	if p == nil {
		return "<none>"
	}
	unit := cmp.Or(p.Unit, "steps")
	line := fmt.Sprintf("%d %s", p.Current, unit)
	if p.Total > 0 {
		line = fmt.Sprintf("%d/%d %s", p.Current, p.Total, unit)
	}
	if p.Percent != nil {
		line += fmt.Sprintf(" (%d%%)", *p.Percent)
	}
	if eta := etaCell(st, now); eta != "-" {
		line += ", ETA " + eta
	}
	if p.Rate != "" {
		line += fmt.Sprintf(", %s %s/s", p.Rate, unit)
	}
	if p.LastReportTime != nil {
		line += ", reported " + age(*p.LastReportTime, now) + " ago"
	}
	if p.Message != "" {
		line += ": " + oneLine(p.Message)
	}
	return line
}

func orNone(s string) string {
	if s == "" {
		return none
	}
	return s
}

// writeStory writes the story as kubectl describe lays an object out: fields, then one
// indented table per section.
func writeStory(out io.Writer, st story, now time.Time) error {
	tw := printers.GetNewTabWriter(out)
	w := &errWriter{w: tw}
	j, status := st.job, st.job.status()
	w.printf("Name:\t%s\n", j.obj.GetName())
	w.printf("Namespace:\t%s\n", j.obj.GetNamespace())
	w.printf("Kind:\t%s\n", j.kind.GVK.Kind)
	w.printf("API Version:\t%s\n", j.kind.GVK.GroupVersion())
	w.printf("Created:\t%s\n", timestamp(j.obj.GetCreationTimestamp(), now))
	w.printf("Phase:\t%s\n", orNone(string(status.Phase)))
	w.printf("Reason:\t%s\n", orNone(status.Reason))
	w.printf("Message:\t%s\n", orNone(oneLine(phaseMessage(status))))
	w.printf("Suspend:\t%t\n", suspended(j))
	if st.dispatch != nil {
		w.printf("Runs In:\t%s\n", st.dispatch.line())
	}
	w.printf("Workers:\t%s\n", orNone(status.Workers))
	restarts := strconv.Itoa(int(status.Restarts))
	if status.UncountedRestarts > 0 {
		restarts += fmt.Sprintf(" (%d not counted toward maxRestarts)", status.UncountedRestarts)
	}
	w.printf("Restarts:\t%s\n", restarts)
	w.printf("Started:\t%s\n", timestampPtr(status.StartTime, now))
	w.printf("Completed:\t%s\n", timestampPtr(status.CompletionTime, now))
	w.printf("Progress:\t%s\n", progressLine(status, now))
	if err := tw.Flush(); err != nil || w.err != nil {
		return cmp.Or(w.err, err)
	}

	sw := &errWriter{w: out}
	section(sw, "Conditions", []string{"Type", "Status", "Reason", "Last Transition", "Message"}, conditionRows(status.Conditions, now))
	section(sw, "Replicas", []string{"Name", "Replicas", "Ready", "Active", "Succeeded", "Failed", "Restarts"}, replicaRows(status.ReplicaStatuses))
	if len(status.Tasks) > 0 {
		section(sw, "Tasks", []string{"Type", "Restarts", "Pods"}, taskRows(status.Tasks))
	}
	if p := status.Progress; p != nil && len(p.Metrics) > 0 {
		var rows [][]string
		for _, m := range p.Metrics {
			rows = append(rows, []string{m.Name, m.Value})
		}
		section(sw, "Metrics", []string{"Name", "Value"}, rows)
	}
	if len(status.RestartsByReason) > 0 {
		var rows [][]string
		for _, r := range status.RestartsByReason {
			rows = append(rows, []string{string(r.Reason), strconv.Itoa(int(r.Count))})
		}
		section(sw, "Restarts By Reason", []string{"Reason", "Count"}, rows)
	}
	var childNotes []string
	for _, what := range []string{"Jobs", "StatefulSets", "Services", "ConfigMaps", "Secrets"} {
		if n, ok := notShownOf(st.children.notShown, what); ok {
			childNotes = append(childNotes, fmt.Sprintf("%s: not shown (%s)", n.what, oneLine(n.why)))
		}
	}
	sectionWithNotes(sw, "Children", []string{"Kind", "Name", "Status"}, childRows(st.children), childNotes)
	if n, ok := notShownOf(st.children.notShown, "Pods"); ok {
		sw.printf("Pods:  not shown (%s)\n", oneLine(n.why))
	} else {
		section(sw, "Pods", []string{"Name", "Role", "Phase", "Ready", "Restarts", "Node", "Age"}, podRows(st.children.pods, now))
	}
	if n, ok := notShownOf(st.children.notShown, "Events"); ok {
		sw.printf("Events:  not shown (%s)\n", oneLine(n.why))
	} else {
		section(sw, "Events", []string{"Type", "Reason", "Age", "From", "Message"}, eventRows(st.events, now))
	}
	return sw.err
}

// section writes "Title:" and an indented table of its own columns, or "Title: <none>" when it
// has no rows.
func section(out *errWriter, title string, header []string, rows [][]string) {
	sectionWithNotes(out, title, header, rows, nil)
}

// sectionWithNotes is section followed by indented lines of its own under the table, such as
// the kinds of children the user may not read.
func sectionWithNotes(out *errWriter, title string, header []string, rows [][]string, notes []string) {
	defer func() {
		for _, n := range notes {
			out.printf("  %s\n", n)
		}
	}()
	if len(rows) == 0 {
		if len(notes) > 0 {
			out.printf("%s:\n", title)
		} else {
			out.printf("%s:  %s\n", title, none)
		}
		return
	}
	tw := printers.GetNewTabWriter(out)
	defer func() {
		if err := tw.Flush(); err != nil && out.err == nil {
			out.err = err
		}
	}()
	w := &errWriter{w: tw}
	w.printf("%s:\n", title)
	dashes := make([]string, len(header))
	for i, h := range header {
		dashes[i] = strings.Repeat("-", len(h))
	}
	w.printf("  %s\n", strings.Join(header, "\t"))
	w.printf("  %s\n", strings.Join(dashes, "\t"))
	for _, r := range rows {
		w.printf("  %s\n", strings.Join(r, "\t"))
	}
}

// timestamp prints a time as kubectl describe does, with how long ago it was.
func timestamp(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return none
	}
	return fmt.Sprintf("%s (%s ago)", t.Format(time.RFC1123Z), duration.HumanDuration(now.Sub(t.Time)))
}

func timestampPtr(t *metav1.Time, now time.Time) string {
	if t == nil {
		return none
	}
	return timestamp(*t, now)
}

// suspended is the job's spec.runPolicy.suspend.
func suspended(j job) bool {
	q, ok := j.obj.(troupev1.QueuedJob)
	return ok && ptr.Deref(q.JobRunPolicy().Suspend, false)
}

// phaseMessage is the message of the condition that explains the job's phase: the condition of
// the phase's name when it is True (Failed, Succeeded, Suspended, Running, Restarting, ...),
// else, while the job waits, the first of Initialized, WorkersReady and Running that is not.
func phaseMessage(st *troupev1.JobStatus) string {
	if c := meta.FindStatusCondition(st.Conditions, string(st.Phase)); c != nil && c.Status == metav1.ConditionTrue {
		return c.Message
	}
	for _, t := range []string{troupev1.ConditionInitialized, troupev1.ConditionWorkersReady, troupev1.ConditionRunning} {
		if c := meta.FindStatusCondition(st.Conditions, t); c != nil && c.Status != metav1.ConditionTrue {
			return c.Message
		}
	}
	return ""
}

func conditionRows(conds []metav1.Condition, now time.Time) [][]string {
	var rows [][]string
	for _, c := range conds {
		rows = append(rows, []string{c.Type, string(c.Status), orNone(c.Reason), age(c.LastTransitionTime, now), oneLine(c.Message)})
	}
	return rows
}

func replicaRows(rs []troupev1.ReplicaStatus) [][]string {
	var rows [][]string
	for _, r := range rs {
		rows = append(rows, []string{r.Name, itoa(r.Replicas), itoa(r.Ready), itoa(r.Active), itoa(r.Succeeded), itoa(r.Failed), itoa(r.Restarts)})
	}
	return rows
}

func taskRows(tasks []troupev1.TaskStatus) [][]string {
	var rows [][]string
	for _, t := range tasks {
		var pods []string
		for _, p := range t.Status {
			pods = append(pods, fmt.Sprintf("%s (%s)", p.Name, p.Phase))
		}
		if t.Unlisted > 0 {
			pods = append(pods, fmt.Sprintf("and %d more", t.Unlisted))
		}
		rows = append(rows, []string{string(t.Type), itoa(t.RestartCount), orNone(strings.Join(pods, ", "))})
	}
	return rows
}

func childRows(c children) [][]string {
	var rows [][]string
	for _, j := range c.jobs {
		st := fmt.Sprintf("active %d, ready %d, succeeded %d, failed %d", j.Status.Active, ptr.Deref(j.Status.Ready, 0), j.Status.Succeeded, j.Status.Failed)
		if ptr.Deref(j.Spec.Suspend, false) {
			st += ", suspended"
		}
		for _, cond := range j.Status.Conditions {
			if (cond.Type == "Complete" || cond.Type == "Failed") && cond.Status == corev1.ConditionTrue {
				st += ", " + string(cond.Type)
				if cond.Reason != "" {
					st += " (" + cond.Reason + ")"
				}
			}
		}
		rows = append(rows, []string{"Job", j.Name, st})
	}
	for _, s := range c.sets {
		rows = append(rows, []string{"StatefulSet", s.Name, fmt.Sprintf("ready %d/%d", s.Status.ReadyReplicas, ptr.Deref(s.Spec.Replicas, 1))})
	}
	for _, s := range c.services {
		rows = append(rows, []string{"Service", s.Name, "-"})
	}
	for _, cm := range c.configMaps {
		keys := make([]string, 0, len(cm.Data))
		for k := range cm.Data {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		rows = append(rows, []string{"ConfigMap", cm.Name, "keys " + strings.Join(keys, ", ")})
	}
	for _, s := range c.secrets {
		rows = append(rows, []string{"Secret", s.Name, "-"})
	}
	return rows
}

func podRows(pods []corev1.Pod, now time.Time) [][]string {
	var rows [][]string
	for i := range pods {
		p := &pods[i]
		ready, restarts := 0, int32(0)
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Ready {
				ready++
			}
			restarts += cs.RestartCount
		}
		role := p.Labels[troupev1.LabelRole]
		// MPIJob's and HorovodJob's one worker set needs no name; ChainerJob's sets do.
		if set := p.Labels[troupev1.LabelWorkerSet]; set != "" && set != troupev1.MPIWorkerSetName && role == troupev1.RoleWorker {
			role += " (" + set + ")"
		}
		rows = append(rows, []string{p.Name, orNone(role), podPhase(p), fmt.Sprintf("%d/%d", ready, len(p.Spec.Containers)),
			itoa(restarts), orNone(p.Spec.NodeName), age(p.CreationTimestamp, now)})
	}
	return rows
}

// podPhase is the pod's phase, or Terminating while it is being deleted.
func podPhase(p *corev1.Pod) string {
	if p.DeletionTimestamp != nil {
		return "Terminating"
	}
	return orNone(string(p.Status.Phase))
}

func eventRows(events []corev1.Event, now time.Time) [][]string {
	var rows [][]string
	for i := range events {
		e := &events[i]
		last, first, count := eventTimes(e)
		when := duration.HumanDuration(now.Sub(last))
		if count > 1 {
			when = fmt.Sprintf("%s (x%d over %s)", when, count, duration.HumanDuration(now.Sub(first)))
		}
		from := e.Source.Component
		if from == "" {
			from = e.ReportingController
		}
		rows = append(rows, []string{e.Type, e.Reason, when, orNone(from), oneLine(e.Message)})
	}
	return rows
}

// errWriter writes until a write fails and keeps that error, so a table is written without a
// check after each line.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

func (e *errWriter) printf(format string, args ...any) { _, _ = fmt.Fprintf(e, format, args...) }

// oneLine keeps a message on its table row.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func itoa(n int32) string { return strconv.Itoa(int(n)) }
