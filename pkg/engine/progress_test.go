package engine

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

var pt0 = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

func TestFoldProgress(t *testing.T) {
	first := foldProgress(nil, &ProgressReport{Current: 10, Total: 100, Unit: "steps", Received: pt0,
		Metrics: []troupev1.ProgressMetric{{Name: "loss", Value: "2.3"}}})
	if *first.Percent != 10 || first.LastProgressTime.Time != pt0 || first.Remaining != "" {
		t.Fatalf("first report: percent %d, moved %v, remaining %q; want 10, %v and no ETA without a rate", *first.Percent, first.LastProgressTime, first.Remaining, pt0)
	}
	// 40 steps in 20 s: 2 a second, 50 left: 25 s.
	second := foldProgress(first, &ProgressReport{Current: 50, Total: 100, Rate: 2, Received: pt0.Add(20 * time.Second)})
	if *second.Percent != 50 || second.Remaining != "25s" || !second.EstimatedCompletionTime.Time.Equal(pt0.Add(45*time.Second)) {
		t.Errorf("second report: percent %d, remaining %q, ETA %v; want 50, 25s, %v", *second.Percent, second.Remaining, second.EstimatedCompletionTime, pt0.Add(45*time.Second))
	}
	if len(second.Metrics) != 1 || second.Metrics[0].Value != "2.3" {
		t.Errorf("a report without metrics keeps the last ones, got %v", second.Metrics)
	}
	// The same step reported again later: reported, not moved.
	same := foldProgress(second, &ProgressReport{Current: 50, Total: 100, Received: pt0.Add(90 * time.Second)})
	if !same.LastProgressTime.Time.Equal(pt0.Add(20*time.Second)) || !same.LastReportTime.Time.Equal(pt0.Add(90*time.Second)) {
		t.Errorf("a report that does not move: last moved %v, last report %v; want %v and %v", same.LastProgressTime, same.LastReportTime, pt0.Add(20*time.Second), pt0.Add(90*time.Second))
	}
	if same.Rate != "2" {
		t.Errorf("a report without a rate keeps the last one, got %q", same.Rate)
	}
	done := foldProgress(same, &ProgressReport{Current: 120, Total: 100, Received: pt0.Add(100 * time.Second)})
	if *done.Percent != 100 || done.Remaining != "0s" {
		t.Errorf("past total: percent %d remaining %q, want 100 and 0s", *done.Percent, done.Remaining)
	}
	// The report the status already holds, handed again (the next pass): no change.
	again := foldProgress(done, &ProgressReport{Current: 120, Total: 100, Received: pt0.Add(100*time.Second + 300*time.Millisecond)})
	if again.LastProgressTime.Time != done.LastProgressTime.Time || !sameReport(again, done) {
		t.Errorf("the same report folded twice changed the status: %+v -> %+v", done, again)
	}
	if got := foldProgress(done, nil); got.Current != 120 {
		t.Errorf("no report: want the previous progress, got %+v", got)
	}
}

func TestStalledCondition(t *testing.T) {
	running := metav1.Condition{Type: troupev1.ConditionRunning, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(pt0)}
	reported := func(moved time.Time) *troupev1.ProgressStatus {
		return &troupev1.ProgressStatus{Current: 5, Total: 10, LastProgressTime: ptr.To(metav1.NewTime(moved)), LastReportTime: ptr.To(metav1.NewTime(moved))}
	}
	st := func(phase troupev1.JobPhase, p *troupev1.ProgressStatus, conds ...metav1.Condition) *troupev1.JobStatus {
		return &troupev1.JobStatus{Phase: phase, Progress: p, Conditions: append([]metav1.Condition{running}, conds...)}
	}
	stalledTrue := metav1.Condition{Type: troupev1.ConditionStalled, Status: metav1.ConditionTrue, Reason: troupev1.ReasonProgressStalled}
	deadline := ptr.To[int32](60)
	for _, tc := range []struct {
		name     string
		deadline *int32
		st       *troupev1.JobStatus
		now      time.Time
		want     string // reason, "" for no condition
	}{
		{"no deadline", nil, st(troupev1.JobRunning, reported(pt0)), pt0.Add(time.Hour), ""},
		{"never reported", deadline, st(troupev1.JobRunning, nil), pt0.Add(time.Hour), ""},
		{"moved within the deadline", deadline, st(troupev1.JobRunning, reported(pt0.Add(30*time.Second))), pt0.Add(89 * time.Second), troupev1.ReasonProgressing},
		{"not moved for the deadline", deadline, st(troupev1.JobRunning, reported(pt0.Add(30*time.Second))), pt0.Add(90 * time.Second), troupev1.ReasonProgressStalled},
		// Running again (a restart, a resume) since after the last move: counted from then.
		{"running again since", deadline, st(troupev1.JobRunning, reported(pt0.Add(-time.Hour))), pt0.Add(59 * time.Second), troupev1.ReasonProgressing},
		{"not running: the last word stays", deadline, st(troupev1.JobRestarting, reported(pt0.Add(-time.Hour)), stalledTrue), pt0.Add(time.Hour), troupev1.ReasonProgressStalled},
		{"not running, never stalled", deadline, st(troupev1.JobSuspended, reported(pt0.Add(-time.Hour))), pt0.Add(time.Hour), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := stalledCondition(tc.deadline, tc.st, tc.now)
			if got := map[bool]string{true: c.Reason}[ok]; got != tc.want {
				t.Fatalf("reason %q (%s), want %q", got, c.Message, tc.want)
			}
			if tc.want == troupev1.ReasonProgressStalled && tc.st.Phase == troupev1.JobRunning && !strings.Contains(c.Message, "since 2026-11-28T12:00:30Z (5/10 steps") {
				t.Errorf("message %q does not say when it last moved and how far", c.Message)
			}
		})
	}
}

// A stall is a failure of reason Stalled that the failure policy's rules decide, once the
// status says the job stalled.
func TestStalledFailure(t *testing.T) {
	deadline := ptr.To[int32](60)
	prev := &troupev1.JobStatus{Phase: troupev1.JobRunning, Progress: &troupev1.ProgressStatus{Current: 5, LastProgressTime: ptr.To(metav1.NewTime(pt0))},
		Conditions: []metav1.Condition{{Type: troupev1.ConditionRunning, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(pt0)}}}
	if why, _ := stalledFailure(deadline, prev, pt0.Add(time.Hour)); why != "" {
		t.Fatalf("no failure before the Stalled condition is written, got %q", why)
	}
	meta.SetStatusCondition(&prev.Conditions, metav1.Condition{Type: troupev1.ConditionStalled, Status: metav1.ConditionTrue, Reason: troupev1.ReasonProgressStalled})
	why, f := stalledFailure(deadline, prev, pt0.Add(time.Hour))
	if why == "" || f.Reason != troupev1.FailureStalled {
		t.Fatalf("stalled: want a failure of reason Stalled, got %q %+v", why, f)
	}
	fp := &troupev1.FailurePolicy{MaxRestarts: 3, Rules: []troupev1.FailureRule{
		{Name: "oom", Action: troupev1.FailJobAction, OnReasons: []troupev1.FailureReason{troupev1.FailureOOMKilled}},
		{Name: "stalled", Action: troupev1.RestartJobAction, OnReasons: []troupev1.FailureReason{troupev1.FailureStalled}},
	}}
	if d := decideFailure(fp, f, "main"); d.Rule != "stalled" || d.Action != troupev1.RestartJobAction {
		t.Errorf("decision %+v, want the rule stalled", d)
	}
	if d := decideFailure(&troupev1.FailurePolicy{MaxRestarts: 1}, f, "main"); d.Action != troupev1.RestartJobAction {
		t.Errorf("without a rule: %+v, want RestartJob (counted)", d)
	}
	prev.Phase = troupev1.JobRestarting
	if why, _ := stalledFailure(deadline, prev, pt0.Add(time.Hour)); why != "" {
		t.Errorf("a restarting job's stall is not a failure again: %q", why)
	}
}

func TestStallWakeup(t *testing.T) {
	st := &troupev1.JobStatus{Phase: troupev1.JobRunning, Progress: &troupev1.ProgressStatus{LastProgressTime: ptr.To(metav1.NewTime(pt0))}}
	if got := stallWakeup(ptr.To[int32](60), st, pt0.Add(10*time.Second)); got != 51*time.Second {
		t.Errorf("wake-up %v, want 51s (a second after the deadline)", got)
	}
	if got := stallWakeup(nil, st, pt0); got != 0 {
		t.Errorf("without a deadline: %v, want none", got)
	}
}

func TestProgressWiring(t *testing.T) {
	w := &ProgressWiring{URL: "https://op/progress/v1/namespaces/ns/mpijob/j", CA: "PEM"}
	tmpl := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Name: "main"}, {Name: "sidecar", Env: []corev1.EnvVar{{Name: troupev1.EnvProgressURL, Value: "mine"}}},
	}}}
	w.decoratePod(&tmpl)
	w.decoratePod(&tmpl) // idempotent
	if n := len(tmpl.Spec.Volumes); n != 1 || tmpl.Spec.Volumes[0].Projected.Sources[0].ServiceAccountToken.Audience != troupev1.ProgressAudience {
		t.Fatalf("volumes %+v, want one projected token for %s", tmpl.Spec.Volumes, troupev1.ProgressAudience)
	}
	env := func(c corev1.Container, name string) string {
		for _, e := range c.Env {
			if e.Name == name {
				return e.Value
			}
		}
		return ""
	}
	main, side := tmpl.Spec.Containers[0], tmpl.Spec.Containers[1]
	if env(main, troupev1.EnvProgressURL) != w.URL || env(main, troupev1.EnvProgressCA) != "PEM" || env(main, troupev1.EnvProgressTokenFile) != ProgressTokenDir+"/token" || len(main.Env) != 3 {
		t.Errorf("main container env %+v", main.Env)
	}
	if env(side, troupev1.EnvProgressURL) != "mine" || len(side.VolumeMounts) != 1 {
		t.Errorf("a container's own value wins: %+v %+v", side.Env, side.VolumeMounts)
	}
	var none *ProgressWiring
	plain := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main"}}}}
	none.decoratePod(&plain)
	if len(plain.Spec.Volumes)+len(plain.Spec.Containers[0].Env) != 0 {
		t.Errorf("no endpoint: the pod is not wired, got %+v", plain.Spec)
	}
}

// A job whose pods were made without the wiring (by an older release) keeps them so: wiring
// them now would change a running job's templates.
func TestProgressWiringKeptForNewJobsOnly(t *testing.T) {
	w := &ProgressWiring{URL: "u", CA: "c"}
	wired := &batchv1.Job{}
	w.mark(wired)
	svc := &corev1.Service{}
	w.mark(svc)
	if wired.Annotations[AnnotationProgressWired] != "true" || svc.Annotations != nil {
		t.Fatalf("mark: Job %v, Service %v; want the Job alone marked", wired.Annotations, svc.Annotations)
	}
	unwired := &appsv1.StatefulSet{}
	for _, tc := range []struct {
		name string
		held []client.Object
		want *ProgressWiring
	}{
		{"a new job", nil, w},
		{"its children wired", []client.Object{unwired, wired}, w},
		{"made before the endpoint", []client.Object{unwired}, nil},
	} {
		if got := w.keptFor(tc.held); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
