package engine

import (
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// rankBackend is envBackend that also tells each pod of a set that runs to completion its
// index (IndexedDecorator).
type rankBackend struct{ envBackend }

func (rankBackend) DecorateIndexedPod(_ *Spec, _ *WorkerSet, index int32, tmpl *corev1.PodTemplateSpec) {
	tmpl.Spec.Containers[0].Env = append(tmpl.Spec.Containers[0].Env, corev1.EnvVar{Name: "INDEX", Value: strconv.Itoa(int(index))})
}

// A worker set whose pods run to completion is a batch Job of one pod per index, named like
// the pod's hostname <set>-<index> under the job's Service, restarting Never unless the
// template says otherwise, retried backoffLimit times, its template told its index by the
// backend; released, each is suspended.
func TestBuildWorkerJobs(t *testing.T) {
	s := testSpec()
	s.Backend = rankBackend{}
	ws := &s.WorkerSets[0]
	ws.RunsToCompletion, ws.BackoffLimit = true, 4
	labels := map[string]string{
		testNameLabel: "train", troupev1.LabelJobName: "train", troupev1.LabelJobUID: "uid-1",
		troupev1.LabelRole: "worker", troupev1.LabelWorkerSet: "cpu",
	}
	podLabels := map[string]string{"team": "vision"}
	for k, v := range labels {
		podLabels[k] = v
	}
	want := func(index int, suspend bool) *batchv1.Job {
		name := "train-workerset-cpu-" + strconv.Itoa(index)
		return &batchv1.Job{
			TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
			ObjectMeta: metav1.ObjectMeta{
				Name: name, Namespace: "ml", Labels: labels,
				OwnerReferences: []metav1.OwnerReference{testOwner},
			},
			Spec: batchv1.JobSpec{
				Completions:          ptr.To[int32](1),
				Parallelism:          ptr.To[int32](1),
				BackoffLimit:         ptr.To[int32](4),
				Suspend:              ptr.To(suspend),
				PodReplacementPolicy: ptr.To(batchv1.Failed),
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
					Spec: corev1.PodSpec{
						Hostname:      name,
						Subdomain:     "train",
						RestartPolicy: corev1.RestartPolicyNever,
						Containers: []corev1.Container{{
							Name: "main", Image: "train:1", TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
							Env: []corev1.EnvVar{{Name: "SET", Value: "cpu"}, {Name: "INDEX", Value: strconv.Itoa(index)}},
						}},
					},
				},
			},
		}
	}
	for _, released := range []bool{false, true} {
		jobs := BuildWorkerJobs(s, ws, released)
		if len(jobs) != 2 {
			t.Fatalf("%d Jobs for 2 replicas", len(jobs))
		}
		for i, j := range jobs {
			if diff := cmp.Diff(want(i, released), noHash(j)); diff != "" {
				t.Errorf("released %t, index %d (-want +got):\n%s", released, i, diff)
			}
		}
	}
	if _, isJob := buildWorkerSet(s, ws, false, wholeJobs)[0].(*batchv1.Job); !isJob {
		t.Error("buildWorkerSet of a set that runs to completion is no Job")
	}
	if _, isSts := buildWorkerSet(s, &s.WorkerSets[1], false, wholeJobs)[0].(*appsv1.StatefulSet); !isSts {
		t.Error("buildWorkerSet of an MPI-style set is no StatefulSet")
	}
}

// completingAdapter is workersAdapter with its worker set run to completion, retried once.
type completingAdapter struct{ workersAdapter }

func (a completingAdapter) Describe(job Object, s *Spec) error {
	if err := a.workersAdapter.Describe(job, s); err != nil {
		return err
	}
	s.WorkerSets[0].RunsToCompletion, s.WorkerSets[0].BackoffLimit = true, 1
	return nil
}

func (h *restartHarness) workerJob(i int) *batchv1.Job {
	h.t.Helper()
	var j batchv1.Job
	if err := h.c.Get(h.ctx, client.ObjectKey{Namespace: "ml", Name: "train-workerset-ws-" + strconv.Itoa(i)}, &j); err != nil {
		h.t.Fatal(err)
	}
	return &j
}

// workerJobPodsRun plays the Job controller for the worker Jobs (indexes below n) and the
// master Job: a pod each, Running and Ready.
func (h *restartHarness) workerJobPodsRun(n int) {
	h.t.Helper()
	for i := range n {
		j := h.workerJob(i)
		h.createPod(j.Name+"-x7k2p", j.Spec.Template)
		j.Status.Active, j.Status.Ready = 1, ptr.To[int32](1)
		if err := h.c.Status().Update(h.ctx, j); err != nil {
			h.t.Fatal(err)
		}
	}
	m := h.master()
	h.createPod("train-master-abc", m.Spec.Template)
	m.Status.Active, m.Status.Ready = 1, ptr.To[int32](1)
	if err := h.c.Status().Update(h.ctx, m); err != nil {
		h.t.Fatal(err)
	}
}

func (h *restartHarness) setPodPhase(name string, phase corev1.PodPhase) {
	h.t.Helper()
	var p corev1.Pod
	if err := h.c.Get(h.ctx, client.ObjectKey{Namespace: "ml", Name: name}, &p); err != nil {
		h.t.Fatal(err)
	}
	p.Status.Phase, p.Status.Conditions = phase, nil
	if err := h.c.Status().Update(h.ctx, &p); err != nil {
		h.t.Fatal(err)
	}
}

// The engine runs a worker set that runs to completion as one Job per pod (and no
// StatefulSet): a worker pod that succeeds is not a lost worker, the workers' readiness comes
// from the Jobs, and a failed worker Job fails the job, saying which Job failed and why, and
// stops its master.
func TestWorkerSetThatRunsToCompletion(t *testing.T) {
	h := newRestartHarness(t, nil)
	h.r.adapter = completingAdapter{}
	h.reconcile()
	for i := range 2 {
		if j := h.workerJob(i); j.Spec.Template.Spec.Hostname != j.Name || ptr.Deref(j.Spec.BackoffLimit, 0) != 1 {
			t.Errorf("worker Job %s: hostname %q, backoffLimit %v", j.Name, j.Spec.Template.Spec.Hostname, j.Spec.BackoffLimit)
		}
	}
	err := h.c.Get(h.ctx, client.ObjectKey{Namespace: "ml", Name: "train-workerset-ws"}, &appsv1.StatefulSet{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("a StatefulSet for a set that runs to completion: %v", err)
	}

	h.workerJobPodsRun(2)
	st := h.reconcile()
	if st.Phase != troupev1.JobRunning || st.Workers != "2/2" {
		t.Errorf("running: phase %s, workers %s; want Running, 2/2", st.Phase, st.Workers)
	}
	h.setPodPhase("train-workerset-ws-0-x7k2p", corev1.PodSucceeded)
	done := h.workerJob(0)
	finishedJob(batchv1.JobComplete, "CompletionsReached", "")(done)
	done.Status.Active, done.Status.Ready, done.Status.Succeeded = 0, ptr.To[int32](0), 1 // as the Job controller counts it
	if err := h.c.Status().Update(h.ctx, done); err != nil {
		t.Fatal(err)
	}
	// A worker whose Job completed counts in the WORKERS column as the running one does.
	if st := h.reconcile(); st.Phase != troupev1.JobRunning || st.Workers != "2/2" {
		t.Errorf("a worker that succeeded: phase %s, workers %s; want Running, 2/2", st.Phase, st.Workers)
	}

	h.setPodPhase("train-workerset-ws-1-x7k2p", corev1.PodFailed)
	j := h.workerJob(1)
	finishedJob(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded, "Job has reached the specified backoff limit")(j)
	if err := h.c.Status().Update(h.ctx, j); err != nil {
		t.Fatal(err)
	}
	st = h.reconcile()
	c := meta.FindStatusCondition(st.Conditions, troupev1.ConditionFailed)
	if st.Phase != troupev1.JobFailed || c == nil || c.Reason != troupev1.ReasonWorkerFailed ||
		!strings.Contains(c.Message, "worker Job train-workerset-ws-1 failed (BackoffLimitExceeded") {
		t.Fatalf("a failed worker Job: phase %s, Failed condition %+v", st.Phase, c)
	}
	h.reconcile()
	if !ptr.Deref(h.master().Spec.Suspend, false) {
		t.Error("the master Job of a job whose workers failed is not stopped")
	}
}

// A worker Job's pod template cannot change: once no pod of the job runs, a new template
// replaces each Job (deleted by UID, then created again); while pods run, the change waits and
// the job says so. A scale up adds Jobs (at once if their template is their running peers', else
// with the change); a scale down deletes those of the indexes gone.
func TestWorkerJobTemplateChangeAndScale(t *testing.T) {
	h := newRestartHarness(t, nil)
	h.r.adapter = completingAdapter{}
	h.reconcile()
	h.workerJobPodsRun(2)
	h.reconcile()

	// A scale up that leaves the template as it is adds the Job at once (an elastic job's).
	h.r.adapter = resizedAdapter{replicas: 3, image: "train:1"}
	h.reconcile()
	h.workerJob(2)

	// A scale up with another template (a world size that moved with it) waits with the
	// template change, so that no pod joins peers started for another job.
	h.r.adapter = resizedAdapter{replicas: 4, image: "train:2"}
	st := h.reconcile()
	if c := meta.FindStatusCondition(st.Conditions, troupev1.ConditionTemplateDrift); c == nil || c.Status != metav1.ConditionTrue ||
		!strings.Contains(c.Message, "Job train-workerset-ws-0") || !strings.Contains(c.Message, "Job train-workerset-ws-3") {
		t.Errorf("a template change while pods run: TemplateDrift %+v", c)
	}
	if j := h.workerJob(0); j.Spec.Template.Spec.Containers[0].Image != "train:1" {
		t.Errorf("the worker Job was replaced while its pods ran")
	}
	if err := h.c.Get(h.ctx, client.ObjectKey{Namespace: "ml", Name: "train-workerset-ws-3"}, &batchv1.Job{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Job a scale up adds was created with another template than its running peers': %v", err)
	}

	if err := h.c.DeleteAllOf(h.ctx, &corev1.Pod{}, client.InNamespace("ml")); err != nil {
		t.Fatal(err)
	}
	for _, j := range []*batchv1.Job{h.workerJob(0), h.workerJob(1), h.workerJob(2), h.master()} {
		j.Status.Active, j.Status.Ready = 0, ptr.To[int32](0)
		if err := h.c.Status().Update(h.ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	h.reconcile()
	if err := h.c.Get(h.ctx, client.ObjectKey{Namespace: "ml", Name: "train-workerset-ws-0"}, &batchv1.Job{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the worker Job with the old template was not deleted once no pod ran: %v", err)
	}
	h.reconcile()
	for i := range 4 {
		if j := h.workerJob(i); j.Spec.Template.Spec.Containers[0].Image != "train:2" {
			t.Errorf("worker Job %d runs %s, want train:2", i, j.Spec.Template.Spec.Containers[0].Image)
		}
	}

	h.r.adapter = resizedAdapter{replicas: 1, image: "train:2"}
	h.reconcile()
	for _, name := range []string{"train-workerset-ws-1", "train-workerset-ws-2", "train-workerset-ws-3"} {
		if err := h.c.Get(h.ctx, client.ObjectKey{Namespace: "ml", Name: name}, &batchv1.Job{}); !apierrors.IsNotFound(err) {
			t.Errorf("scaled down to 1: Job %s remains (%v)", name, err)
		}
	}
	h.workerJob(0)
}

// resizedAdapter is completingAdapter with another worker count and image.
type resizedAdapter struct {
	replicas int32
	image    string
}

func (a resizedAdapter) NewObject() Object { return completingAdapter{}.NewObject() }
func (a resizedAdapter) NameLabel() string { return completingAdapter{}.NameLabel() }
func (a resizedAdapter) Describe(job Object, s *Spec) error {
	if err := (completingAdapter{}).Describe(job, s); err != nil {
		return err
	}
	s.WorkerSets[0].Replicas = a.replicas
	s.WorkerSets[0].Template.Spec.Containers[0].Image = a.image
	return nil
}

// workersOnlyAdapter is completingAdapter without a master (a PyTorchJob of workers only).
type workersOnlyAdapter struct{ completingAdapter }

func (a workersOnlyAdapter) Describe(job Object, s *Spec) error {
	if err := a.completingAdapter.Describe(job, s); err != nil {
		return err
	}
	s.Master = Master{}
	return nil
}

// A job without a master runs its workers alone: no master Job, no master in its replica
// statuses; it runs while its workers do, and succeeds once every worker Job has completed,
// saying so (WorkersSucceeded), at the last Job's completion time.
func TestJobWithoutMaster(t *testing.T) {
	h := newRestartHarness(t, nil)
	h.r.adapter = workersOnlyAdapter{}
	h.reconcile()
	if h.master() != nil {
		t.Fatal("a job without a master got a master Job")
	}
	for i := range 2 {
		j := h.workerJob(i)
		h.createPod(j.Name+"-x7k2p", j.Spec.Template)
		j.Status.Active, j.Status.Ready = 1, ptr.To[int32](1)
		if err := h.c.Status().Update(h.ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	st := h.reconcile()
	if st.Phase != troupev1.JobRunning || st.Workers != "2/2" || len(st.ReplicaStatuses) != 1 || st.ReplicaStatuses[0].Name != "ws" {
		t.Fatalf("running: phase %s, workers %s, replica statuses %+v", st.Phase, st.Workers, st.ReplicaStatuses)
	}
	if c := meta.FindStatusCondition(st.Conditions, troupev1.ConditionRunning); c == nil || c.Reason != troupev1.ReasonWorkersRunning {
		t.Errorf("Running condition %+v, want reason WorkersRunning", c)
	}
	complete := func(i int) {
		h.setPodPhase(h.workerJob(i).Name+"-x7k2p", corev1.PodSucceeded)
		j := h.workerJob(i)
		finishedJob(batchv1.JobComplete, "", "")(j)
		j.Status.Active, j.Status.Ready = 0, ptr.To[int32](0)
		if err := h.c.Status().Update(h.ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	complete(0)
	if st := h.reconcile(); st.Phase != troupev1.JobRunning {
		t.Errorf("one of two workers done: phase %s, want Running", st.Phase)
	}
	complete(1)
	st = h.reconcile()
	c := meta.FindStatusCondition(st.Conditions, troupev1.ConditionSucceeded)
	if st.Phase != troupev1.JobSucceeded || c == nil || c.Reason != troupev1.ReasonWorkersSucceeded || st.CompletionTime == nil {
		t.Errorf("every worker done: phase %s, Succeeded %+v, completion time %v", st.Phase, c, st.CompletionTime)
	}
	if h.event(troupev1.EventSucceeded) == "" {
		t.Error("no Succeeded event")
	}
}

// A gang counts out the pods of worker Jobs that completed in the current attempt, of indexes
// the set still asks for; a Job that failed, one of an earlier attempt, one of an index scaled
// away and a StatefulSet's pods are not counted.
func TestCompletedWorkers(t *testing.T) {
	s := &Spec{WorkerSets: []WorkerSet{
		{Name: "ws", ChildName: "train-ws", Replicas: 3, RunsToCompletion: true},
		{Name: "sts", ChildName: "train-sts", Replicas: 2},
	}}
	job := func(name string, attempt int, ended batchv1.JobConditionType) *batchv1.Job {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name}}
		j.Spec.Template.Labels = map[string]string{troupev1.LabelRestartAttempt: strconv.Itoa(attempt)}
		if ended != "" {
			j.Status.Conditions = []batchv1.JobCondition{{Type: ended, Status: corev1.ConditionTrue}}
		}
		return j
	}
	obs := &Observed{Attempt: 1, WorkerJobs: map[string][]*batchv1.Job{
		"ws": {
			job("train-ws-0", 1, batchv1.JobComplete),
			job("train-ws-1", 0, batchv1.JobComplete), // an earlier attempt's
			job("train-ws-2", 1, batchv1.JobFailed),
			job("train-ws-3", 1, batchv1.JobComplete), // an index scaled away
		},
		"sts": {job("train-sts-0", 1, batchv1.JobComplete)},
	}}
	if got := completedWorkers(s, obs); got != 1 {
		t.Errorf("completedWorkers = %d, want 1", got)
	}
	obs.WorkerJobs["ws"] = append(obs.WorkerJobs["ws"], job("train-ws-1", 1, batchv1.JobComplete))
	if got := completedWorkers(s, obs); got != 2 {
		t.Errorf("with train-ws-1 of this attempt complete too: completedWorkers = %d, want 2", got)
	}
}
