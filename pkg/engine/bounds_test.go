package engine

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// A job past the bounds is refused before any child is built, however it got past admission;
// sums that would wrap an int32 are caught too.
func TestCheckBounds(t *testing.T) {
	sets := func(replicas ...int32) *Spec {
		s := &Spec{Master: Master{JobName: "j-launcher", Slots: 1}}
		for _, r := range replicas {
			s.WorkerSets = append(s.WorkerSets, WorkerSet{Name: "w", Replicas: r, Slots: 1})
		}
		return s
	}
	tests := map[string]struct {
		spec     *Spec
		tooLarge bool
	}{
		"the largest job": {spec: sets(troupev1.MaxWorkerReplicas)},
		"one pod more":    {spec: sets(troupev1.MaxWorkerReplicas, 1), tooLarge: true},
		"the largest job without a master": {spec: func() *Spec {
			s := sets(troupev1.MaxWorkerReplicas, 1)
			s.Master = Master{}
			return s
		}()},
		"replicas that wrap an int32 sum":    {spec: sets(math.MaxInt32, math.MaxInt32, 2), tooLarge: true},
		"a scale to the largest int32":       {spec: sets(math.MaxInt32), tooLarge: true},
		"slots past the bound on a worker":   {spec: func() *Spec { s := sets(2); s.WorkerSets[0].Slots = troupev1.MaxSlotsPerPod + 1; return s }(), tooLarge: true},
		"slots past the bound on the master": {spec: func() *Spec { s := sets(2); s.Master.Slots = troupev1.MaxSlotsPerPod + 1; return s }(), tooLarge: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := checkBounds(tc.spec)
			var se *SpecError
			if got := errors.As(err, &se) && se.Reason == troupev1.ReasonTooLarge; got != tc.tooLarge {
				t.Errorf("checkBounds = %v, want TooLarge %v", err, tc.tooLarge)
			}
		})
	}
}

// plainHTTPCodeAdapter is masterOnlyAdapter with a repository over plain http.
type plainHTTPCodeAdapter struct{ masterOnlyAdapter }

func (a plainHTTPCodeAdapter) Describe(job Object, s *Spec) error {
	if err := a.masterOnlyAdapter.Describe(job, s); err != nil {
		return err
	}
	s.CodeSync = CodeSync{Image: "agent:1", Repos: []troupev1.AppCode{{Name: "app", GitRepo: "http://git.example.com/app.git", MountPath: "/code"}}}
	return nil
}

// A job admitted without the webhook (or past a failurePolicy Ignore) that clones over plain
// http is not run: InvalidSpec naming the field, nothing created.
func TestPlainHTTPCodeRefusedWithoutWebhook(t *testing.T) {
	ctx := context.Background()
	job := &troupev1.ChainerJob{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ml", UID: "uid-1"}}
	c := fakeJobClient(t, job)
	r := &Reconciler{deferred: newDeferredWrites(0), podCreates: newPodCreatePace(), client: c, apiReader: c, recorder: events.NewFakeRecorder(10), adapter: plainHTTPCodeAdapter{}, gvk: chainerJobGVK,
		clock: clocktesting.NewFakePassiveClock(metav1.Now().Time)}
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(job)}); err != nil {
		t.Fatal(err)
	}
	var got troupev1.ChainerJob
	if err := c.Get(ctx, client.ObjectKeyFromObject(job), &got); err != nil {
		t.Fatal(err)
	}
	ini := meta.FindStatusCondition(got.Status.Conditions, troupev1.ConditionInitialized)
	if ini == nil || ini.Reason != troupev1.ReasonInvalidSpec || !strings.Contains(ini.Message, "spec.appCodesToSync[0].gitRepo") {
		t.Errorf("Initialized = %+v, want InvalidSpec naming spec.appCodesToSync[0].gitRepo", ini)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ml", Name: "train-master"}, &batchv1.Job{}); err == nil {
		t.Error("the master Job was created")
	}
}

// A set that runs to completion copies its template into one batch Job per worker: past
// troupev1.MaxChildTemplateBytes the job is TooLarge, named by its template's field, before any
// child is built.
func TestCheckBoundsOfCopiedTemplates(t *testing.T) {
	set := func(replicas int32, padding int) *Spec {
		return &Spec{WorkerSets: []WorkerSet{{Name: "worker", Replicas: replicas, Slots: 1, RunsToCompletion: true,
			TemplateField: "spec.pytorchReplicaSpecs.Worker.template",
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "pytorch", Env: []corev1.EnvVar{{Name: "PADDING", Value: strings.Repeat("x", padding)}}}}}}}}}
	}
	err := checkBounds(set(troupev1.MaxWorkerReplicas, 20<<10))
	var se *SpecError
	if !errors.As(err, &se) || se.Reason != troupev1.ReasonTooLarge || !strings.Contains(err.Error(), "spec.pytorchReplicaSpecs.Worker.template") {
		t.Errorf("4,095 workers of a 20 KiB template: %v, want TooLarge naming the template's field", err)
	}
	if err := checkBounds(set(500, 100<<10)); err != nil {
		t.Errorf("500 workers of a 100 KiB template: %v, want within the bound", err)
	}
	s := set(troupev1.MaxWorkerReplicas, 20<<10)
	s.WorkerSets[0].RunsToCompletion = false // a StatefulSet holds its template once
	if err := checkBounds(s); err != nil {
		t.Errorf("a StatefulSet of 4,095 workers: %v, want within the bound", err)
	}
}
