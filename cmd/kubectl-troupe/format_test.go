package main

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/engine"
)

var now = time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }

// testJob wraps obj as the plugin finds it, with its registered kind.
func testJob(t *testing.T, obj engine.Object) job {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := troupev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	ks, err := registeredKinds(scheme)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range ks {
		if reflect.TypeOf(k.NewObject()) == reflect.TypeOf(obj) {
			return job{kind: k, obj: obj}
		}
	}
	t.Fatalf("no kind for %T", obj)
	return job{}
}

func TestGetTable(t *testing.T) {
	eta := ago(-250 * time.Second)
	mpi := &troupev1.MPIJob{ObjectMeta: metav1.ObjectMeta{Name: "pi", Namespace: "team-a", CreationTimestamp: ago(90 * time.Second)},
		Status: troupev1.JobStatus{Phase: troupev1.JobRunning, Workers: "2/2", Restarts: 1,
			Progress: &troupev1.ProgressStatus{Current: 42, Total: 100, Percent: ptr.To[int32](42), EstimatedCompletionTime: &eta}}}
	chainer := &troupev1.ChainerJob{ObjectMeta: metav1.ObjectMeta{Name: "mnist", Namespace: "team-a", CreationTimestamp: ago(26 * time.Hour)}}
	torch := &troupev1.PyTorchJob{ObjectMeta: metav1.ObjectMeta{Name: "bert", Namespace: "team-b", CreationTimestamp: ago(3 * time.Minute)},
		Status: troupev1.JobStatus{Phase: troupev1.JobSucceeded, Workers: "0/3"}}
	jobs := []job{testJob(t, torch), testJob(t, mpi), testJob(t, chainer)}
	sortJobs(jobs)

	var out bytes.Buffer
	if err := printTable(&out, getHeader(true), getRows(jobs, true, now, false)); err != nil {
		t.Fatal(err)
	}
	want := `NAMESPACE   KIND         NAME    PHASE       WORKERS   RESTARTS   PROGRESS   ETA     AGE
team-a      ChainerJob   mnist                         0          -          -       26h
team-a      MPIJob       pi      Running     2/2       1          42%        4m10s   90s
team-b      PyTorchJob   bert    Succeeded   0/3       0          -          -       3m
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("get -A (-want +got):\n%s", diff)
	}

	out.Reset()
	if err := printTable(&out, getHeader(false), getRows(jobs[1:2], false, now, true)); err != nil {
		t.Fatal(err)
	}
	want = "KIND     NAME   PHASE     WORKERS   RESTARTS   PROGRESS                      ETA     AGE\n" +
		"MPIJob   pi     Running   2/2       1          [########------------]  42%   4m10s   90s\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("get (-want +got):\n%s", diff)
	}
	if got := age(metav1.Time{}, now); got != "<unknown>" {
		t.Errorf("age of no time = %q", got)
	}
}

func runningMPIJob() *troupev1.MPIJob {
	return &troupev1.MPIJob{
		ObjectMeta: metav1.ObjectMeta{Name: "pi", Namespace: "team-a", UID: "u1", CreationTimestamp: ago(5 * time.Minute)},
		Status: troupev1.JobStatus{
			Phase: troupev1.JobRunning, Workers: "2/2", StartTime: ptr.To(ago(4 * time.Minute)),
			Restarts: 2, UncountedRestarts: 1,
			RestartsByReason: []troupev1.RestartCount{{Reason: "PodFailed", Count: 2}},
			Conditions: []metav1.Condition{
				{Type: troupev1.ConditionInitialized, Status: metav1.ConditionTrue, Reason: troupev1.ReasonChildrenCreated, LastTransitionTime: ago(5 * time.Minute), Message: "every child exists"},
				{Type: troupev1.ConditionRunning, Status: metav1.ConditionTrue, Reason: troupev1.ReasonMasterRunning, LastTransitionTime: ago(2 * time.Minute), Message: "the launcher Job pi-launcher\nis running"},
			},
			ReplicaStatuses: []troupev1.ReplicaStatus{{Name: "master", Replicas: 1, Ready: 1, Active: 1}, {Name: "worker", Replicas: 2, Ready: 2, Active: 2, Restarts: 3}},
			Progress: &troupev1.ProgressStatus{Current: 600, Total: 1000, Percent: ptr.To[int32](60), Unit: "steps", Rate: "5", Message: "epoch 6/10",
				EstimatedCompletionTime: ptr.To(ago(-80 * time.Second)), LastReportTime: ptr.To(ago(3 * time.Second)),
				Metrics: []troupev1.ProgressMetric{{Name: "accuracy", Value: "0.91"}, {Name: "loss", Value: "0.234"}}},
		},
	}
}

func TestWriteStory(t *testing.T) {
	pod := func(name, role string, phase corev1.PodPhase, node string, restarts int32) corev1.Pod {
		return corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: ago(3 * time.Minute), Labels: map[string]string{troupev1.LabelRole: role, troupev1.LabelWorkerSet: map[string]string{"worker": "worker"}[role]}},
			Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "mpi-worker"}}},
			Status:     corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{Name: "mpi-worker", Ready: phase == corev1.PodRunning, RestartCount: restarts}}},
		}
	}
	pods := []corev1.Pod{pod("pi-worker-10", "worker", corev1.PodRunning, "n2", 3), pod("pi-launcher-x7", "master", corev1.PodRunning, "n1", 0), pod("pi-worker-2", "worker", corev1.PodPending, "", 0)}
	sortPods(pods)
	events := []corev1.Event{
		// events.k8s.io/v1, as the operator writes them: eventTime, then a series.
		{Type: "Normal", Reason: "Running", EventTime: metav1.NewMicroTime(now.Add(-2 * time.Minute)), ReportingController: "troupe-MPIJob", Message: "the launcher runs"},
		{Type: "Normal", Reason: "Created", EventTime: metav1.NewMicroTime(now.Add(-5 * time.Minute)), ReportingController: "troupe-MPIJob", Message: "created Job pi-launcher",
			Series: &corev1.EventSeries{Count: 3, LastObservedTime: metav1.NewMicroTime(now.Add(-4 * time.Minute))}},
		// core/v1, as kubectl and older recorders write them.
		{Type: "Warning", Reason: "Restarting", FirstTimestamp: ago(3 * time.Minute), LastTimestamp: ago(3 * time.Minute), Count: 1, Source: corev1.EventSource{Component: "someone"}, Message: "attempt 1 of 3"},
	}
	sortEvents(events)
	st := story{
		job: testJob(t, runningMPIJob()),
		children: children{
			jobs:       []batchv1.Job{{ObjectMeta: metav1.ObjectMeta{Name: "pi-launcher"}, Status: batchv1.JobStatus{Active: 1, Ready: ptr.To[int32](1)}}},
			sets:       []appsv1.StatefulSet{{ObjectMeta: metav1.ObjectMeta{Name: "pi-worker"}, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2)}, Status: appsv1.StatefulSetStatus{ReadyReplicas: 1}}},
			services:   []corev1.Service{{ObjectMeta: metav1.ObjectMeta{Name: "pi"}}},
			configMaps: []corev1.ConfigMap{{ObjectMeta: metav1.ObjectMeta{Name: "pi-mpi"}, Data: map[string]string{"hostfile": "", "discover_hosts.sh": ""}}},
			secrets:    []metav1.PartialObjectMetadata{{ObjectMeta: metav1.ObjectMeta{Name: "pi-ssh"}}},
			pods:       pods,
		},
		events: events,
	}
	var out bytes.Buffer
	if err := writeStory(&out, st, now); err != nil {
		t.Fatal(err)
	}
	want := `Name:          pi
Namespace:     team-a
Kind:          MPIJob
API Version:   troupe.dev/v1alpha1
Created:       Mon, 04 May 2026 11:55:00 +0000 (5m ago)
Phase:         Running
Reason:        <none>
Message:       the launcher Job pi-launcher is running
Suspend:       false
Workers:       2/2
Restarts:      2 (1 not counted toward maxRestarts)
Started:       Mon, 04 May 2026 11:56:00 +0000 (4m ago)
Completed:     <none>
Progress:      600/1000 steps (60%), ETA 80s, 5 steps/s, reported 3s ago: epoch 6/10
Conditions:
  Type          Status   Reason            Last Transition   Message
  ----          ------   ------            ---------------   -------
  Initialized   True     ChildrenCreated   5m                every child exists
  Running       True     MasterRunning     2m                the launcher Job pi-launcher is running
Replicas:
  Name     Replicas   Ready   Active   Succeeded   Failed   Restarts
  ----     --------   -----   ------   ---------   ------   --------
  master   1          1       1        0           0        0
  worker   2          2       2        0           0        3
Metrics:
  Name       Value
  ----       -----
  accuracy   0.91
  loss       0.234
Restarts By Reason:
  Reason      Count
  ------      -----
  PodFailed   2
Children:
  Kind          Name          Status
  ----          ----          ------
  Job           pi-launcher   active 1, ready 1, succeeded 0, failed 0
  StatefulSet   pi-worker     ready 1/2
  Service       pi            -
  ConfigMap     pi-mpi        keys discover_hosts.sh, hostfile
  Secret        pi-ssh        -
Pods:
  Name             Role     Phase     Ready   Restarts   Node     Age
  ----             ----     -----     -----   --------   ----     ---
  pi-launcher-x7   master   Running   1/1     0          n1       3m
  pi-worker-2      worker   Pending   0/1     0          <none>   3m
  pi-worker-10     worker   Running   1/1     3          n2       3m
Events:
  Type      Reason       Age               From            Message
  ----      ------       ---               ----            -------
  Normal    Created      4m (x3 over 5m)   troupe-MPIJob   created Job pi-launcher
  Warning   Restarting   3m                someone         attempt 1 of 3
  Normal    Running      2m                troupe-MPIJob   the launcher runs
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("describe (-want +got):\n%s", diff)
	}
}

func TestPhaseMessage(t *testing.T) {
	cond := func(typ string, status metav1.ConditionStatus, msg string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Message: msg}
	}
	cases := []struct {
		name string
		st   troupev1.JobStatus
		want string
	}{
		{"failed: the Failed condition's", troupev1.JobStatus{Phase: troupev1.JobFailed, Conditions: []metav1.Condition{
			cond(troupev1.ConditionRunning, metav1.ConditionFalse, "launcher ended"), cond(troupev1.ConditionFailed, metav1.ConditionTrue, "BackoffLimitExceeded")}}, "BackoffLimitExceeded"},
		{"pending: what it waits for", troupev1.JobStatus{Phase: troupev1.JobPending, Conditions: []metav1.Condition{
			cond(troupev1.ConditionInitialized, metav1.ConditionTrue, "created"), cond(troupev1.ConditionWorkersReady, metav1.ConditionFalse, "1 of 2 worker pods ready")}}, "1 of 2 worker pods ready"},
		{"suspended", troupev1.JobStatus{Phase: troupev1.JobSuspended, Conditions: []metav1.Condition{
			cond(troupev1.ConditionSuspended, metav1.ConditionTrue, "runPolicy.suspend is set")}}, "runPolicy.suspend is set"},
		{"no status yet", troupev1.JobStatus{}, ""},
	}
	for _, c := range cases {
		if got := phaseMessage(&c.st); got != c.want {
			t.Errorf("%s: phaseMessage = %q, want %q", c.name, got, c.want)
		}
	}
}

// What a user may not read (the built-in view role lists no Secrets) takes one line where it
// would have been shown, naming the refusal; the rest of the story is told.
func TestWriteStoryNotShown(t *testing.T) {
	refusal := func(resource string) notShown {
		refused := apierrors.NewForbidden(schema.GroupResource{Resource: resource}, "",
			errors.New(`User "viewer" cannot list resource "`+resource+`" in API group "" in the namespace "team-a"`))
		n, err := forbidden(strings.ToUpper(resource[:1])+resource[1:], fmt.Errorf("list the children of pi: %w", refused))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	st := story{
		job: testJob(t, runningMPIJob()),
		children: children{
			services: []corev1.Service{{ObjectMeta: metav1.ObjectMeta{Name: "pi"}}},
			notShown: []notShown{refusal("secrets"), refusal("pods"), refusal("events")},
		},
	}
	var out bytes.Buffer
	if err := writeStory(&out, st, now); err != nil {
		t.Fatal(err)
	}
	_, got, _ := strings.Cut(out.String(), "Children:")
	want := `
  Kind      Name   Status
  ----      ----   ------
  Service   pi     -
  Secrets: not shown (forbidden: User "viewer" cannot list resource "secrets" in API group "" in the namespace "team-a")
Pods:  not shown (forbidden: User "viewer" cannot list resource "pods" in API group "" in the namespace "team-a")
Events:  not shown (forbidden: User "viewer" cannot list resource "events" in API group "" in the namespace "team-a")
`
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("describe from Children on (-want +got):\n%s", diff)
	}

	// No child readable at all: the section still names what it could not show.
	st.children = children{notShown: []notShown{refusal("secrets")}}
	out.Reset()
	if err := writeStory(&out, st, now); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "Children:\n  Secrets: not shown (forbidden: ") {
		t.Errorf("describe without readable children:\n%s", out.String())
	}

	// Any other failure is not a refusal: describe still fails on it.
	if _, err := forbidden("Secrets", apierrors.NewServiceUnavailable("etcd is down")); err == nil {
		t.Error("forbidden took a 503 for a refusal")
	}
}
