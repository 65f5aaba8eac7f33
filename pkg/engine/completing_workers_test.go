package engine

import (
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

// A worker set whose pods run to completion is an Indexed Job: one pod per index, all started
// together, under the job's Service (hostnames <job>-<index>), restarting Never unless the
// template says otherwise, retried backoffLimit times; released, it is suspended.
func TestBuildWorkerJob(t *testing.T) {
	s := testSpec()
	ws := &s.WorkerSets[0]
	ws.RunsToCompletion, ws.BackoffLimit = true, 4
	labels := map[string]string{
		testNameLabel: "train", troupev1.LabelJobUID: "uid-1",
		troupev1.LabelRole: "worker", troupev1.LabelWorkerSet: "cpu",
	}
	podLabels := map[string]string{"team": "vision"}
	for k, v := range labels {
		podLabels[k] = v
	}
	want := func(suspend bool) *batchv1.Job {
		return &batchv1.Job{
			TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
			ObjectMeta: metav1.ObjectMeta{
				Name: "train-workerset-cpu", Namespace: "ml", Labels: labels,
				OwnerReferences: []metav1.OwnerReference{testOwner},
			},
			Spec: batchv1.JobSpec{
				CompletionMode:       ptr.To(batchv1.IndexedCompletion),
				Completions:          ptr.To[int32](2),
				Parallelism:          ptr.To[int32](2),
				BackoffLimit:         ptr.To[int32](4),
				Suspend:              ptr.To(suspend),
				PodReplacementPolicy: ptr.To(batchv1.Failed),
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
					Spec: corev1.PodSpec{
						Subdomain:     "train",
						RestartPolicy: corev1.RestartPolicyNever,
						Containers:    []corev1.Container{{Name: "main", Image: "train:1", TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError}},
					},
				},
			},
		}
	}
	if diff := cmp.Diff(want(false), noHash(BuildWorkerJob(s, ws, false))); diff != "" {
		t.Errorf("running workers (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want(true), noHash(BuildWorkerJob(s, ws, true))); diff != "" {
		t.Errorf("released workers (-want +got):\n%s", diff)
	}
	if _, isJob := BuildWorkerSet(s, ws, false).(*batchv1.Job); !isJob {
		t.Error("BuildWorkerSet of a set that runs to completion is no Job")
	}
	if _, isSts := BuildWorkerSet(s, &s.WorkerSets[1], false).(*appsv1.StatefulSet); !isSts {
		t.Error("BuildWorkerSet of an MPI-style set is no StatefulSet")
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

func (h *restartHarness) workerJob() *batchv1.Job {
	h.t.Helper()
	var j batchv1.Job
	if err := h.c.Get(h.ctx, client.ObjectKey{Namespace: "ml", Name: "train-workerset-ws"}, &j); err != nil {
		h.t.Fatal(err)
	}
	return &j
}

// workerJobPodsRun plays the Job controller for the worker Job and the master Job: a pod per
// index with its hostname, Running and Ready.
func (h *restartHarness) workerJobPodsRun() {
	h.t.Helper()
	j := h.workerJob()
	for i := range ptr.Deref(j.Spec.Parallelism, 0) {
		tmpl := *j.Spec.Template.DeepCopy()
		tmpl.Spec.Hostname = podOrdinalName(j.Name, i)
		h.createPod(podOrdinalName(j.Name, i)+"-x7k2p", tmpl)
	}
	j.Status.Active, j.Status.Ready = ptr.Deref(j.Spec.Parallelism, 0), j.Spec.Parallelism
	if err := h.c.Status().Update(h.ctx, j); err != nil {
		h.t.Fatal(err)
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

// The engine runs a worker set that runs to completion as an Indexed Job (and no StatefulSet):
// a worker pod that succeeds is not a lost worker, the workers' count and readiness come from
// the Job, and a failed worker Job fails the job, saying which Job failed and why, and stops its
// master.
func TestWorkerSetThatRunsToCompletion(t *testing.T) {
	h := newRestartHarness(t, nil)
	h.r.adapter = completingAdapter{}
	h.reconcile()
	j := h.workerJob()
	if ptr.Deref(j.Spec.CompletionMode, "") != batchv1.IndexedCompletion || ptr.Deref(j.Spec.Completions, 0) != 2 {
		t.Fatalf("worker Job: completion mode %v, completions %v; want Indexed, 2", j.Spec.CompletionMode, j.Spec.Completions)
	}
	err := h.c.Get(h.ctx, client.ObjectKey{Namespace: "ml", Name: "train-workerset-ws"}, &appsv1.StatefulSet{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("a StatefulSet for a set that runs to completion: %v", err)
	}

	h.workerJobPodsRun()
	st := h.reconcile()
	if st.Phase != troupev1.JobRunning || st.Workers != "2/2" {
		t.Errorf("running: phase %s, workers %s; want Running, 2/2", st.Phase, st.Workers)
	}
	h.setPodPhase("train-workerset-ws-0-x7k2p", corev1.PodSucceeded)
	if st := h.reconcile(); st.Phase != troupev1.JobRunning {
		t.Errorf("a worker that succeeded: phase %s, want Running", st.Phase)
	}

	h.setPodPhase("train-workerset-ws-1-x7k2p", corev1.PodFailed)
	j = h.workerJob()
	finishedJob(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded, "Job has reached the specified backoff limit")(j)
	if err := h.c.Status().Update(h.ctx, j); err != nil {
		t.Fatal(err)
	}
	st = h.reconcile()
	c := meta.FindStatusCondition(st.Conditions, troupev1.ConditionFailed)
	if st.Phase != troupev1.JobFailed || c == nil || c.Reason != troupev1.ReasonWorkerFailed ||
		!strings.Contains(c.Message, "worker set ws: Job train-workerset-ws failed (BackoffLimitExceeded") {
		t.Fatalf("a failed worker Job: phase %s, Failed condition %+v", st.Phase, c)
	}
	h.reconcile()
	if !ptr.Deref(h.master().Spec.Suspend, false) {
		t.Error("the master Job of a job whose workers failed is not stopped")
	}
}

// A worker Job's pod template cannot change: once no pod of the job runs, a new template
// replaces the Job (deleted by UID, then created again); while pods run, the change waits and
// the job says so. A change of size is written into the Job (completions with parallelism).
func TestWorkerJobTemplateChangeAndScale(t *testing.T) {
	h := newRestartHarness(t, nil)
	h.r.adapter = completingAdapter{}
	h.reconcile()
	h.workerJobPodsRun()
	h.reconcile()
	old := h.workerJob()

	h.r.adapter = resizedAdapter{replicas: 3, image: "train:2"}
	st := h.reconcile()
	if c := meta.FindStatusCondition(st.Conditions, troupev1.ConditionTemplateDrift); c == nil || c.Status != metav1.ConditionTrue ||
		!strings.Contains(c.Message, "Job train-workerset-ws") {
		t.Errorf("a template change while pods run: TemplateDrift %+v", c)
	}
	if j := h.workerJob(); j.Spec.Template.Spec.Containers[0].Image != "train:1" {
		t.Errorf("the worker Job was replaced while its pods ran")
	}

	if err := h.c.DeleteAllOf(h.ctx, &corev1.Pod{}, client.InNamespace("ml")); err != nil {
		t.Fatal(err)
	}
	for _, j := range []*batchv1.Job{h.workerJob(), h.master()} {
		j.Status.Active, j.Status.Ready = 0, ptr.To[int32](0)
		if err := h.c.Status().Update(h.ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	h.reconcile()
	if err := h.c.Get(h.ctx, client.ObjectKeyFromObject(old), &batchv1.Job{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the worker Job with the old template was not deleted once no pod ran: %v", err)
	}
	h.reconcile()
	j := h.workerJob()
	if j.Spec.Template.Spec.Containers[0].Image != "train:2" || ptr.Deref(j.Spec.Completions, 0) != 3 {
		t.Errorf("the new worker Job: image %s, completions %d; want train:2 and 3",
			j.Spec.Template.Spec.Containers[0].Image, ptr.Deref(j.Spec.Completions, 0))
	}

	cur := h.workerJob()
	want := cur.DeepCopy()
	want.Spec.Completions, want.Spec.Parallelism = ptr.To[int32](5), ptr.To[int32](5)
	if !restoreJob(cur, want) || ptr.Deref(cur.Spec.Completions, 0) != 5 || ptr.Deref(cur.Spec.Parallelism, 0) != 5 {
		t.Errorf("restoreJob did not carry a new size: completions %v, parallelism %v", cur.Spec.Completions, cur.Spec.Parallelism)
	}
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
