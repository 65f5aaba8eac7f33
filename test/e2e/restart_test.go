package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// restartJob is the T9k example as a 1+3 MPIJob whose launcher runs for a while on the
// simulated cluster (the generated launcher copies the worker template's annotations).
func restartJob(t *testing.T, ns, launcherRuns string, fp *troupev1.FailurePolicy) {
	t.Helper()
	job := loadMPIJob(t, ns)
	job.Spec.Worker.Replicas = ptrInt32(3)
	job.Spec.Worker.Template.Annotations = map[string]string{simDurationAnnot: launcherRuns}
	job.Spec.RunPolicy.FailurePolicy = fp
	if err := k8s.Create(context.Background(), job); err != nil {
		t.Fatalf("create the MPIJob: %v", err)
	}
	waitForExampleMPIJob(t, ns, "Running with 3 ready workers", func(j *troupev1.MPIJob) bool {
		return j.Status.Phase == troupev1.JobRunning && j.Status.Workers == "3/3"
	})
}

// failPod makes a running worker pod fail, as the kubelet reports a pod whose node ran out of
// memory: phase Failed, reason Evicted.
func failPod(t *testing.T, ns, name string) {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pod); err != nil {
		t.Fatal(err)
	}
	before := pod.DeepCopy()
	pod.Status.Phase, pod.Status.Reason = corev1.PodFailed, "Evicted"
	pod.Status.Message = "The node was low on resource: memory."
	if err := k8s.Status().Patch(ctx, pod, client.MergeFrom(before)); err != nil {
		t.Fatalf("fail pod %s: %v", name, err)
	}
}

// evictPod evicts a pod through the Eviction API, as a drain does.
func evictPod(t *testing.T, ns, name string) {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := k8s.SubResource("eviction").Create(context.Background(), pod, &policyv1.Eviction{}); err != nil {
		t.Fatalf("evict pod %s: %v", name, err)
	}
}

// podHistory records, in the API server's order, every pod of a namespace created and deleted
// while it watches, with its restart attempt label.
type podHistory struct {
	mu     sync.Mutex
	events []string // "ADDED <name> <attempt>" or "DELETED <name> <attempt>"
}

func watchPods(t *testing.T, ns string) *podHistory {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: clientgoscheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := wc.Watch(ctx, &corev1.PodList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	h := &podHistory{}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok || (ev.Type != watch.Added && ev.Type != watch.Deleted) {
				continue
			}
			h.mu.Lock()
			h.events = append(h.events, fmt.Sprintf("%s %s %s", ev.Type, pod.Name, pod.Labels[troupev1.LabelRestartAttempt]))
			h.mu.Unlock()
		}
	}()
	return h
}

// overlapOfFirstRestart returns the first pod of attempt 1 created while a pod of attempt 0
// still existed, or "".
func (h *podHistory) overlapOfFirstRestart() string {
	const prev, next = "0", "1"
	h.mu.Lock()
	defer h.mu.Unlock()
	live := map[string]bool{}
	for _, e := range h.events {
		f := strings.Fields(e)
		if len(f) < 3 {
			continue
		}
		switch {
		case f[0] == string(watch.Added) && f[2] == prev:
			live[f[1]] = true
		case f[0] == string(watch.Deleted) && f[2] == prev:
			delete(live, f[1])
		case f[0] == string(watch.Added) && f[2] == next && len(live) > 0:
			return fmt.Sprintf("%s created while %d pods of attempt %s lived", f[1], len(live), prev)
		}
	}
	return ""
}

func wiringUIDs(t *testing.T, ns string, objs []client.Object) []string {
	t.Helper()
	var uids []string
	for _, o := range objs {
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: o.GetName()}, o); err != nil {
			t.Fatal(err)
		}
		uids = append(uids, string(o.GetUID()))
	}
	return uids
}

// One worker of a 1+3 MPIJob fails while the launcher runs: with maxRestarts 1 the job is
// restarted once as a whole (no pod of the first attempt left when the second's are created,
// each new pod labelled attempt 1, one launcher) and Succeeds.
func TestWorkerFailureRestartsTheJob(t *testing.T) {
	t.Parallel() // the metric it checks is its own namespace's series
	ns := newNamespace(t)
	history := watchPods(t, ns)
	restartJob(t, ns, "8s", &troupev1.FailurePolicy{MaxRestarts: 1})
	// The wiring is the job's, not an attempt's: the same objects serve the next attempt.
	wiring := []client.Object{
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "mpi-example"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "mpi-example-mpi"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "mpi-example-ssh"}},
	}
	uids := wiringUIDs(t, ns, wiring)
	failPod(t, ns, "mpi-example-worker-1")

	var job troupev1.MPIJob
	waitForExampleMPIJob(t, ns, "restarting", func(j *troupev1.MPIJob) bool {
		j.DeepCopyInto(&job)
		return j.Status.Restarts == 1
	})
	c := meta.FindStatusCondition(job.Status.Conditions, troupev1.ConditionRestarting)
	// The StatefulSet controller replaces a failed pod at once: a pass that comes after that
	// (a loaded machine) no longer sees it failed, only that the pod it recorded is gone (and
	// the reason the watch saw when it went). An eviction is a disruption: not counted.
	said := []string{
		`restart 1, not counted toward maxRestarts (default rule "disruptions"): worker pod mpi-example-worker-1 failed (Evicted)`,
		`restart 1, not counted toward maxRestarts (default rule "disruptions"): worker pod mpi-example-worker-1 was deleted`,
	}
	if c == nil || !slices.Contains(said, c.Message) {
		t.Fatalf("Restarting condition %+v, want a message of %q", c, said)
	}
	restartMessage := c.Message
	waitForExampleMPIJob(t, ns, "Succeeded after one restart", func(j *troupev1.MPIJob) bool {
		j.DeepCopyInto(&job)
		return j.Status.Phase == troupev1.JobSucceeded
	})
	if job.Status.Restarts != 1 || job.Status.UncountedRestarts != 1 ||
		!slices.Equal(job.Status.RestartsByReason, []troupev1.RestartCount{{Reason: troupev1.FailureEvicted, Count: 1}}) {
		t.Errorf("restarts %d, uncounted %d, by reason %v; want 1 Evicted, not counted", job.Status.Restarts, job.Status.UncountedRestarts, job.Status.RestartsByReason)
	}
	// The operator counts the restart once on its metrics endpoint.
	waitForMetrics(t, []check{{name: "troupe_job_restarts_total", kind: "MPIJob", ns: ns, want: 1}})
	if c := meta.FindStatusCondition(job.Status.Conditions, troupev1.ConditionRestarting); c == nil || c.Reason != troupev1.ReasonAttemptRunning {
		t.Errorf("Restarting condition after the restart: %+v", c)
	}

	ctx := context.Background()
	var pods corev1.PodList
	if err := k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{troupev1.LabelRestartAttempt: "1"}); err != nil {
		t.Fatal(err)
	}
	launchers := 0
	for _, p := range pods.Items {
		if p.Labels[troupev1.LabelRole] == troupev1.RoleMaster {
			launchers++
		}
	}
	if launchers != 1 {
		t.Errorf("%d launcher pods of attempt 1, want 1", launchers)
	}
	if got := wiringUIDs(t, ns, wiring); !slices.Equal(got, uids) {
		t.Errorf("Service, hostfile ConfigMap and SSH Secret were recreated: UIDs %v, then %v", uids, got)
	}
	history.mu.Lock()
	t.Logf("pods created and deleted, with their attempt: %s", strings.Join(history.events, "; "))
	history.mu.Unlock()
	if why := history.overlapOfFirstRestart(); why != "" {
		t.Errorf("a rank of attempt 1 could meet one of attempt 0: %s", why)
	}
	history.mu.Lock()
	created := 0
	for _, e := range history.events {
		if strings.HasPrefix(e, "ADDED mpi-example-worker-") && strings.HasSuffix(e, " 1") {
			created++
		}
	}
	history.mu.Unlock()
	if created < 3 {
		t.Errorf("%d worker pods of attempt 1 were created, want the 3 workers", created)
	}
	waitForRestartingEvent(t, ns, restartMessage)
}

// With maxRestarts 0 and a rule that counts evictions (RestartJob), a worker evicted while the
// launcher runs fails the job with a message naming the pod and the rule, and the launcher is
// stopped.
func TestWorkerLostWithoutRestartFailsTheJob(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	// The launcher would run for an hour: only the operator can stop it within the test.
	restartJob(t, ns, "3600s", &troupev1.FailurePolicy{MaxRestarts: 0, Rules: []troupev1.FailureRule{
		{Name: "evictions-count", Action: troupev1.RestartJobAction, OnReasons: []troupev1.FailureReason{troupev1.FailureEvicted}},
	}})
	evictPod(t, ns, "mpi-example-worker-2")

	var job troupev1.MPIJob
	waitForExampleMPIJob(t, ns, "Failed", func(j *troupev1.MPIJob) bool {
		j.DeepCopyInto(&job)
		return j.Status.Phase == troupev1.JobFailed
	})
	c := meta.FindStatusCondition(job.Status.Conditions, troupev1.ConditionFailed)
	if c == nil || c.Reason != troupev1.ReasonWorkerFailed || !strings.HasPrefix(c.Message, "worker pod mpi-example-worker-2 ") ||
		!strings.HasSuffix(c.Message, ` in attempt 0; no restart left (runPolicy.failurePolicy.maxRestarts: 0); rule "evictions-count" (RestartJob)`) {
		t.Errorf("Failed condition %+v", c)
	}
	if job.Status.Restarts != 0 {
		t.Errorf("status.restarts = %d, want 0", job.Status.Restarts)
	}
	eventually(t, "the launcher Job suspended and its pod gone", func(ctx context.Context) (bool, error) {
		var launcher batchv1.Job
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "mpi-example-launcher"}, &launcher); err != nil {
			return false, err
		}
		pods, err := podsOf(ctx, ns, troupev1.RoleMaster)
		for _, p := range pods {
			if p.DeletionTimestamp == nil && (p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodPending) {
				return false, err
			}
		}
		return err == nil && launcher.Spec.Suspend != nil && *launcher.Spec.Suspend, err
	})
}

// Without a failure policy a lost worker changes nothing, as before: its StatefulSet replaces
// it, the launcher carries on and the job Succeeds with no restart and no attempt label.
func TestWorkerLostWithoutFailurePolicy(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	restartJob(t, ns, "8s", nil)
	failPod(t, ns, "mpi-example-worker-1")

	var job troupev1.MPIJob
	waitForExampleMPIJob(t, ns, "Succeeded", func(j *troupev1.MPIJob) bool {
		j.DeepCopyInto(&job)
		return j.Status.Phase == troupev1.JobSucceeded
	})
	if job.Status.Restarts != 0 || meta.FindStatusCondition(job.Status.Conditions, troupev1.ConditionRestarting) != nil {
		t.Errorf("restarts %d, conditions %+v: a job without a failure policy restarted", job.Status.Restarts, job.Status.Conditions)
	}
	pods, err := podsOf(context.Background(), ns, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if _, ok := p.Labels[troupev1.LabelRestartAttempt]; ok {
			t.Errorf("pod %s has the restart attempt label", p.Name)
		}
	}
}

// A ChainerJob whose master keeps failing: its master Job fails (backoffLimit 0), the job is
// restarted once as a whole, the second attempt's master Job fails too, and the job fails
// saying which attempt, with the master Job's reason.
func TestFailingMasterRestartsThenFails(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	history := watchPods(t, ns)
	job := testutil.MakeChainerJob("flaky", ns).WorkerSet("ws0", 2).BackoffLimit(0).Obj()
	job.Spec.Master.Template.Labels = map[string]string{simOutcomeLabel: simOutcomeFail}
	job.Spec.Master.Template.Annotations = map[string]string{simDurationAnnot: "1s"}
	job.Spec.RunPolicy.FailurePolicy = &troupev1.FailurePolicy{MaxRestarts: 1}
	create(t, job)
	got := waitForJob(t, ns, "flaky", "Failed", func(j *troupev1.ChainerJob) bool {
		return j.Status.Phase == troupev1.JobFailed
	})
	c := meta.FindStatusCondition(got.Status.Conditions, troupev1.ConditionFailed)
	if r := meta.FindStatusCondition(got.Status.Conditions, troupev1.ConditionRestarting); r == nil || r.Status != metav1.ConditionFalse {
		t.Errorf("a failed job still restarting: %+v", r)
	}
	if got.Status.Restarts != 1 || c == nil || c.Reason != batchv1.JobReasonBackoffLimitExceeded ||
		!strings.HasSuffix(c.Message, "in attempt 1; no restart left (runPolicy.failurePolicy.maxRestarts: 1)") {
		t.Errorf("restarts %d, Failed condition %+v", got.Status.Restarts, c)
	}
	waitForRestartingEvent(t, ns, "attempt 1 of 1: master Job flaky-master failed (BackoffLimitExceeded")
	history.mu.Lock()
	masters := map[string]int{}
	for _, e := range history.events {
		if f := strings.Fields(e); len(f) == 3 && f[0] == string(watch.Added) && strings.HasPrefix(f[1], "flaky-master-") {
			masters[f[2]]++
		}
	}
	history.mu.Unlock()
	if masters["0"] != 1 || masters["1"] != 1 || len(masters) != 2 {
		t.Errorf("master pods created per attempt: %v, want one of attempt 0 and one of attempt 1", masters)
	}
	if why := history.overlapOfFirstRestart(); why != "" {
		t.Errorf("a rank of attempt 1 could meet one of attempt 0: %s", why)
	}
}

// A restart under a gang provider: the PodGroup stays and the next attempt's pods are admitted
// by it again, with the real Volcano and coscheduling schedulers. The master fails in every
// attempt, so the job fails only if attempt 1's pods were bound and its master ran.
func TestRestartUnderAGang(t *testing.T) {
	t.Parallel()
	for _, g := range []troupev1.GangProvider{troupev1.GangVolcano, troupev1.GangCoscheduling} {
		t.Run(string(g), func(t *testing.T) {
			t.Parallel() // each scheduler with a namespace (and a pool) of its own
			ns := newNamespace(t)
			gangPool(t, ns)
			job := gangChainerJob("gang-restart", ns, ns, g, "1s")
			job.Spec.Master.Template.Labels = map[string]string{simOutcomeLabel: simOutcomeFail}
			job.Spec.Master.BackoffLimit = ptrInt32(0)
			job.Spec.RunPolicy.FailurePolicy = &troupev1.FailurePolicy{MaxRestarts: 1}
			create(t, job)
			got := waitForJob(t, ns, "gang-restart", "Failed after one restart", func(j *troupev1.ChainerJob) bool {
				return j.Status.Phase == troupev1.JobFailed
			})
			c := meta.FindStatusCondition(got.Status.Conditions, troupev1.ConditionFailed)
			if got.Status.Restarts != 1 || c == nil || !strings.HasSuffix(c.Message, "in attempt 1; no restart left (runPolicy.failurePolicy.maxRestarts: 1)") {
				t.Errorf("restarts %d, Failed condition %+v", got.Status.Restarts, c)
			}
		})
	}
}

// The operator is stopped as soon as it has recorded a restart, wherever it was in it, and a new
// process carries on from what the API says: the job restarts once, with no pod of the next
// attempt created while one of the failed attempt lived, and Succeeds.
func TestRestartCarriesOnAcrossOperatorRestart(t *testing.T) {
	// Not parallel: stops and restarts the operator.
	ns := newNamespace(t)
	history := watchPods(t, ns)
	restartJob(t, ns, "8s", &troupev1.FailurePolicy{MaxRestarts: 1})
	failPod(t, ns, "mpi-example-worker-1")
	waitForExampleMPIJob(t, ns, "restart recorded", func(j *troupev1.MPIJob) bool { return j.Status.Restarts == 1 })
	operator.Stop()
	var frozen troupev1.MPIJob
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "mpi-example"}, &frozen); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(frozen.Status.Conditions, troupev1.ConditionRestarting); c != nil {
		t.Logf("operator stopped with the job %s, Restarting %s/%s", frozen.Status.Phase, c.Status, c.Reason)
	}
	restarted := time.Now()
	restartOperator(t)

	var job troupev1.MPIJob
	waitForExampleMPIJob(t, ns, "Succeeded", func(j *troupev1.MPIJob) bool {
		j.DeepCopyInto(&job)
		return j.Status.Phase == troupev1.JobSucceeded
	})
	if job.Status.Restarts != 1 {
		t.Errorf("status.restarts = %d, want 1", job.Status.Restarts)
	}
	if why := history.overlapOfFirstRestart(); why != "" {
		t.Errorf("a rank of attempt 1 could meet one of attempt 0: %s", why)
	}
	// The restart is the old process's to report. Its event may be lost: events are written
	// after the status, and one not written yet when controller-runtime cancels the pending
	// writes at shutdown is dropped (docs/operations.md, "Job events"). What must not happen
	// is the new process reporting it again.
	events, err := restartingEvents(context.Background(), ns)
	if err != nil {
		t.Fatalf("list events: %v", err)
	}
	for _, e := range events {
		if !eventTime(e).Before(restarted) {
			t.Errorf("the new operator process reported the restart again at %s: %q", eventTime(e), e.Note)
		}
	}
	if len(events) > 1 {
		t.Errorf("%d Restarting events, want at most the old process's one", len(events))
	}
	if len(events) == 0 {
		t.Log("the old process's Restarting event was still waiting for the API when it stopped")
	}
}

// restartingEvents lists the Restarting events of namespace ns.
func restartingEvents(ctx context.Context, ns string) ([]eventsv1.Event, error) {
	var list eventsv1.EventList
	if err := k8s.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	return slices.DeleteFunc(list.Items, func(e eventsv1.Event) bool { return e.Reason != troupev1.EventRestarting }), nil
}

// waitForRestartingEvent waits for a Restarting event whose note starts with want. Events
// come after the status they report, and later under load (they wait for the operator's
// other requests; docs/operations.md, "Job events"), so a job's final status does not mean
// its events are written.
func waitForRestartingEvent(t *testing.T, ns, want string) {
	t.Helper()
	eventually(t, "a Restarting event "+want, func(ctx context.Context) (bool, error) {
		events, err := restartingEvents(ctx, ns)
		return slices.ContainsFunc(events, func(e eventsv1.Event) bool { return strings.HasPrefix(e.Note, want) }), err
	})
}

// eventTime is when an event was first reported.
func eventTime(e eventsv1.Event) time.Time {
	if !e.EventTime.IsZero() {
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}
