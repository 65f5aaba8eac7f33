package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/engine"
	"github.com/troupe-dev/troupe/pkg/metrics"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// A ChainerJob's whole life, told once per transition in its events and counted in the
// metrics of its namespace: created, gang-scheduled, workers ready, running, scaled,
// suspended, resumed, running again, succeeded.
func TestJobStoryEventsAndMetrics(t *testing.T) {
	ns := newNamespace(t)
	job := testutil.MakeChainerJob("story", ns).WorkerSet("ws0", 2).Obj()
	job.Spec.SchedulingPolicy.Gang = ptr.To(troupev1.GangCoscheduling)
	create(t, job)

	pg := waitFor(t, &schedv1alpha1.PodGroup{}, ns, "story")
	setStatus(t, pg, func() { pg.Status.Phase = schedv1alpha1.PodGroupRunning })
	waitForEvent(t, ns, "story", troupev1.EventGangScheduled, "admitted the gang")

	sts := waitFor(t, &appsv1.StatefulSet{}, ns, "story-workerset-ws0")
	setStatus(t, sts, func() { sts.Status.Replicas, sts.Status.ReadyReplicas = 2, 2 })
	waitForEvent(t, ns, "story", troupev1.EventWorkersReady, "all 2 worker pods are ready")

	// The launcher's pod ran its wait for 4 s before its main container started.
	master := waitFor(t, &batchv1.Job{}, ns, "story-master")
	waited := metav1.NewTime(time.Now().Add(-10 * time.Second).Truncate(time.Second))
	masterPod(t, job, "story-master-a", corev1.PodRunning, 0, waited, metav1.NewTime(waited.Add(4*time.Second)))
	setStatus(t, master, func() { master.Status.Active, master.Status.Ready = 1, ptr.To[int32](1) })
	waitForEvent(t, ns, "story", troupev1.EventRunning, "the master Job story-master is running")
	wantMetric(t, "troupe_jobs_running", ns, 1)
	wantMetric(t, "troupe_jobs_created_total", ns, 1)
	wantMetric(t, "troupe_job_startup_seconds", ns, 1)
	wantMetric(t, "troupe_launcher_wait_seconds", ns, 1)
	if sum := metricSum(t, "troupe_launcher_wait_seconds", ns); sum != 4 {
		t.Errorf("troupe_launcher_wait_seconds sum = %v, want the 4 s the launcher waited", sum)
	}

	updateJob(t, ns, "story", func(j *troupev1.ChainerJob) {
		testutil.EditWorkerSet(j, "ws0", func(ws *troupev1.ChainerWorkerSet) { ws.Replicas = ptr.To[int32](3) })
	})
	waitForEvent(t, ns, "story", troupev1.EventScaled, "worker set ws0 scaled from 2 to 3 replicas")

	updateJob(t, ns, "story", func(j *troupev1.ChainerJob) { j.Spec.RunPolicy.Suspend = ptr.To(true) })
	waitForEvent(t, ns, "story", troupev1.EventSuspended, "runPolicy.suspend is set")
	wantMetric(t, "troupe_jobs_running", ns, 0)
	// What the Job and StatefulSet controllers do to a suspended job's children.
	master = waitUntil(t, &batchv1.Job{}, ns, "story-master", "suspended", func(j *batchv1.Job) bool { return ptr.Deref(j.Spec.Suspend, false) })
	setFreshStatus(t, master, func() { master.Status.Active, master.Status.Ready = 0, ptr.To[int32](0) })
	setFreshStatus(t, sts, func() { sts.Status.Replicas, sts.Status.ReadyReplicas = 0, 0 })
	deletePods(t, ns)

	updateJob(t, ns, "story", func(j *troupev1.ChainerJob) { j.Spec.RunPolicy.Suspend = ptr.To(false) })
	waitForEvent(t, ns, "story", troupev1.EventResumed, "runPolicy.suspend was cleared")
	masterPod(t, job, "story-master-b", corev1.PodRunning, 0, metav1.Now(), metav1.Now())
	setFreshStatus(t, master, func() { master.Status.Active, master.Status.Ready = 1, ptr.To[int32](1) })
	setFreshStatus(t, sts, func() { sts.Status.Replicas, sts.Status.ReadyReplicas = 3, 3 })
	// Told again, as an event of its own (each names the job's resourceVersion).
	eventually(t, "WorkersReady told again", func(context.Context) (bool, error) {
		return eventCounts(t, ns, "story")[troupev1.EventWorkersReady] == 2, nil
	})
	wantMetric(t, "troupe_job_startup_seconds", ns, 2) // the start after the resume

	setFreshStatus(t, master, func() { master.Status.Active, master.Status.Ready = 0, ptr.To[int32](0) })
	finishMaster(t, ns, "story", batchv1.JobComplete, "CompletionsReached", "Reached expected number of succeeded pods")
	waitForEvent(t, ns, "story", troupev1.EventSucceeded, "the master completed successfully")
	wantMetric(t, "troupe_jobs_finished_total", ns, 1, metrics.LabelResult, metrics.ResultSucceeded)
	wantMetric(t, "troupe_jobs_finished_total", ns, 0, metrics.LabelResult, metrics.ResultFailed)
	wantMetric(t, "troupe_jobs_running", ns, 0)

	// Each transition told once, however many times the job was reconciled meanwhile; the
	// job's second start told its WorkersReady and Running again.
	got := eventCounts(t, ns, "story")
	want := map[string]int{
		troupev1.EventGangScheduled: 1, troupev1.EventWorkersReady: 2, troupev1.EventRunning: 2,
		troupev1.EventScaled: 1, troupev1.EventSuspended: 1, troupev1.EventResumed: 1, troupev1.EventSucceeded: 1,
	}
	for reason, n := range got {
		if reason == troupev1.EventCreated {
			continue // one per pass that created children (eventCounts checks that none repeats)
		}
		if want[reason] != n {
			t.Errorf("%d %s events, want %d (all: %v)", n, reason, want[reason], got)
		}
	}
	for reason, n := range want {
		if got[reason] != n {
			t.Errorf("%d %s events, want %d", got[reason], reason, n)
		}
	}
	wantMetric(t, "troupe_jobs_created_total", ns, 1)
}

// A paused job and its resumption are told once each (the run modes of the seeds).
func TestPauseEvents(t *testing.T) {
	ns := newNamespace(t)
	job := testutil.MakeChainerJob("paused", ns).WorkerSet("ws0", 1).Obj()
	job.Spec.RunMode = &troupev1.RunMode{Pause: &troupev1.PauseMode{Enabled: true}}
	create(t, job)
	waitForEvent(t, ns, "paused", troupev1.EventPaused, "runMode.pause.enabled is set")
	updateJob(t, ns, "paused", func(j *troupev1.ChainerJob) { j.Spec.RunMode.Pause.Enabled = false })
	waitForEvent(t, ns, "paused", troupev1.EventResuming, "runMode.pause.enabled was cleared")
	waitFor(t, &batchv1.Job{}, ns, "paused-master")
	got := eventCounts(t, ns, "paused")
	if got[troupev1.EventPaused] != 1 || got[troupev1.EventResuming] != 1 {
		t.Errorf("events %v, want one Paused and one Resuming", got)
	}
}

// A launcher whose wait for its workers timed out is counted once, and the job's failure is
// counted by result.
func TestLauncherWaitTimeoutCounted(t *testing.T) {
	ns := newNamespace(t)
	job := create(t, testutil.MakeChainerJob("late", ns).WorkerSet("ws0", 1).Obj())
	master := waitFor(t, &batchv1.Job{}, ns, "late-master")
	masterPod(t, job, "late-master-a", corev1.PodFailed, troupev1.ExitCodeLauncherWaitTimeout, metav1.Now(), metav1.Now())
	setStatus(t, master, func() { master.Status.Failed = 1 })
	eventually(t, "the timeout counted", func(context.Context) (bool, error) {
		return metricValue(t, "troupe_launcher_wait_timeouts_total", ns) == 1, nil
	})
	finishMaster(t, ns, "late", batchv1.JobFailed, "PodFailurePolicy", "Container troupe-wait for pod late-master-a failed with exit code 3")
	waitForEvent(t, ns, "late", troupev1.EventFailed, "exit code 3")
	wantMetric(t, "troupe_jobs_finished_total", ns, 1, metrics.LabelResult, metrics.ResultFailed)
	wantMetric(t, "troupe_launcher_wait_timeouts_total", ns, 1)
}

// A child's name taken by someone else's object is counted once, however often the job looks
// again.
func TestNameConflictCounted(t *testing.T) {
	ns := newNamespace(t)
	foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "taken-mpi", Namespace: ns}}
	if err := k8s.Create(context.Background(), foreign); err != nil {
		t.Fatal(err)
	}
	create(t, testutil.MakeChainerJob("taken", ns).WorkerSet("ws0", 1).Obj())
	waitForEvent(t, ns, "taken", troupev1.EventChildConflict, "ConfigMap taken-mpi")
	wantMetric(t, "troupe_job_name_conflicts_total", ns, 1)
	// More reconciles: the job is changed, and looks again.
	updateJob(t, ns, "taken", func(j *troupev1.ChainerJob) { j.Annotations = map[string]string{"touched": "1"} })
	waitForJob(t, ns, "taken", "the change seen", func(j *troupev1.ChainerJob) bool { return j.Status.ObservedGeneration == j.Generation })
	if n := metricValue(t, "troupe_job_name_conflicts_total", ns); n != 1 {
		t.Errorf("troupe_job_name_conflicts_total = %v after more reconciles, want 1", n)
	}
}

func updateJob(t *testing.T, ns, name string, mutate func(*troupev1.ChainerJob)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var j troupev1.ChainerJob
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &j); err != nil {
			return err
		}
		mutate(&j)
		return k8s.Update(context.Background(), &j)
	})
	if err != nil {
		t.Fatalf("update ChainerJob %s: %v", name, err)
	}
}

// masterPod creates a pod of the job's master, as the Job controller would, whose troupe-wait
// init container ended with code after running from start to end.
func masterPod(t *testing.T, job *troupev1.ChainerJob, name string, phase corev1.PodPhase, code int32, start, end metav1.Time) {
	t.Helper()
	pod := launcherPod(t, job, name)
	setStatus(t, pod, func() {
		pod.Status.Phase = phase
		pod.Status.InitContainerStatuses = []corev1.ContainerStatus{{
			Name: troupev1.ContainerLauncherWait, Image: testAgentImage,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, StartedAt: start, FinishedAt: end}},
		}}
	})
}

// setFreshStatus writes obj's status as mutate changes it on the latest version of obj (the
// operator changes the children's specs meanwhile).
func setFreshStatus(t *testing.T, obj client.Object, mutate func()) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		mutate()
		return k8s.Status().Update(context.Background(), obj)
	})
	if err != nil {
		t.Fatalf("update %s status: %v", obj.GetName(), err)
	}
}

func deletePods(t *testing.T, ns string) {
	t.Helper()
	if err := k8s.DeleteAllOf(context.Background(), &corev1.Pod{}, client.InNamespace(ns), client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
}

// eventCounts counts the job's events by reason: how many times each was emitted, as far as
// the events API tells (an event emitted again about the same objects, the job at the same
// resourceVersion, becomes a series of count 2 at once; higher counts are written later). A
// Created event, one per pass that created children and naming them, must never repeat.
func eventCounts(t *testing.T, ns, jobName string) map[string]int {
	t.Helper()
	var list eventsv1.EventList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, e := range list.Items {
		if e.Regarding.Name != jobName || !strings.HasSuffix(e.Regarding.APIVersion, "troupe.dev/v1alpha1") {
			continue
		}
		n := 1
		if e.Series != nil {
			n = int(e.Series.Count)
		}
		if e.Reason == troupev1.EventCreated && n > 1 {
			t.Errorf("event Created %q emitted %d times", e.Note, n)
		}
		counts[e.Reason] += n
	}
	return counts
}

// jobsKind is the kind of these tests' jobs, in their metrics' kind label.
const jobsKind = "ChainerJob"

// wantMetric waits until a troupe metric of ChainerJobs in the namespace (and more labels, as
// name, value pairs) has the value; for a histogram, its count of observations.
func wantMetric(t *testing.T, name, ns string, want float64, labels ...string) {
	t.Helper()
	var got float64
	eventually(t, name+" in "+ns, func(context.Context) (bool, error) {
		got = metricValue(t, name, ns, labels...)
		return got == want, nil
	})
	if got != want {
		t.Errorf("%s{kind=%s,job_namespace=%s} = %v, want %v", name, jobsKind, ns, got, want)
	}
}

func metricValue(t *testing.T, name, ns string, labels ...string) float64 {
	m := findMetric(t, name, ns, labels...)
	switch {
	case m == nil:
		return -1
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return -1
}

func metricSum(t *testing.T, name, ns string) float64 {
	if m := findMetric(t, name, ns); m != nil && m.Histogram != nil {
		return m.Histogram.GetSampleSum()
	}
	return -1
}

// findMetric reads troupe's metrics as the operator's endpoint serves them, from a registry
// of their own (the operator under test serves none).
func findMetric(t *testing.T, name, ns string, labels ...string) *dto.Metric {
	t.Helper()
	reg := prometheus.NewRegistry()
	if err := metrics.Register(reg); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{metrics.LabelKind: jobsKind, metrics.LabelNamespace: ns}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if cmp.Equal(got, want) {
				return m
			}
		}
	}
	return nil
}

// A failure message longer than the events API accepts (a launcher's traceback) still gives a
// Failed event: its note is cut to the limit, not refused and lost.
func TestFailedEventOfALongMessage(t *testing.T) {
	ns := newNamespace(t)
	job := testutil.MakeChainerJob("long", ns).Obj()
	create(t, job)
	traceback := "Traceback (most recent call last):\n" + strings.Repeat("  File \"/train.py\", line 42, in step\n", 110)
	finishMaster(t, ns, "long", batchv1.JobFailed, "BackoffLimitExceeded", traceback)
	note := waitForEvent(t, ns, "long", troupev1.EventFailed, "Traceback (most recent call last)")
	if len(note) > engine.NoteLimit {
		t.Errorf("the Failed event's note has %d bytes, more than the API server's %d", len(note), engine.NoteLimit)
	}
}
