package integration

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// With no webhook registered (this suite's API server has none), the CRDs' OpenAPI bounds and
// CEL rules alone refuse every corpus spec marked "refused-by: crd", naming what the header
// expects, and admit every spec marked "refused-by: webhook", so the corpus's account of where
// each rule lives stays true both ways. test/admission checks the same specs with the webhooks.
func TestCRDRulesWithoutWebhook(t *testing.T) {
	cases, err := testutil.LoadAdmissionCases(filepath.Join("..", "testdata", "admission", "bad"))
	if err != nil {
		t.Fatal(err)
	}
	ns := newNamespace(t)
	byCRD := 0
	for _, c := range cases {
		if c.RefusedBy == testutil.LayerCRD {
			byCRD++
		}
		t.Run(c.Name, func(t *testing.T) {
			obj := c.Object.DeepCopy()
			obj.SetNamespace(ns)
			if !strings.Contains(c.Name, "name") {
				// A name of its own, so that a spec admitted by mistake cannot make the next
				// one's create fail for the wrong reason; a case about the name keeps it.
				obj.SetName(obj.GetName() + "-" + c.Name)
			}
			err := k8s.Create(context.Background(), obj)
			t.Logf("without the webhook: %v", err) // the refusal as a user reads it, with -v
			if err == nil {
				defer func() { _ = k8s.Delete(context.Background(), obj) }()
			}
			switch {
			case c.RefusedBy == testutil.LayerCRD && err == nil:
				t.Errorf("admitted without the webhook, but the corpus says the CRD refuses it (%s)", c.Why)
			case c.RefusedBy == testutil.LayerCRD && !strings.Contains(err.Error(), c.Expect):
				t.Errorf("refused without naming %q: %v", c.Expect, err)
			case c.RefusedBy == testutil.LayerWebhook && err != nil:
				t.Errorf("refused without the webhook, but the corpus says only the webhook does: %v", err)
			}
		})
	}
	t.Logf("%d of %d bad specs are refused by the CRD alone", byCRD, len(cases))
}

// The CRD's rules hold on the scale subresource too, which the validating webhook does not see:
// `kubectl scale` cannot leave a job with fewer pods than its gang's minAvailable, which no
// PodGroup could then ever admit.
func TestScaleBelowMinAvailableIsRefused(t *testing.T) {
	ns := newNamespace(t)
	job := &troupev1.MPIJob{
		ObjectMeta: metav1.ObjectMeta{Name: "scaled", Namespace: ns},
		Spec: troupev1.MPIJobSpec{MPIProgramSpec: troupev1.MPIProgramSpec{
			Worker: troupev1.MPIWorker{Replicas: ptr.To[int32](3), Cmd: []string{"./app"}, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: troupev1.MPIWorkerContainer, Image: "mpi:test"}}}}},
			SchedulingPolicy: troupev1.SchedulingPolicy{MinAvailable: ptr.To[int32](3)},
		}},
	}
	if err := k8s.Create(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 2}}
	if err := k8s.SubResource("scale").Update(context.Background(), job, client.WithSubResourceBody(scale)); err != nil {
		t.Fatalf("scale to 2 workers (3 pods, minAvailable 3): %v", err)
	}
	scale.Spec.Replicas = 1
	err := k8s.SubResource("scale").Update(context.Background(), job, client.WithSubResourceBody(scale))
	if err == nil || !strings.Contains(err.Error(), "spec.schedulingPolicy.minAvailable") || !strings.Contains(err.Error(), "the job's 2 pods") {
		t.Errorf("scale to 1 worker (2 pods, minAvailable 3): %v, want the minAvailable refusal", err)
	}
}

// Without the webhook, the CRD still refuses the changes CEL can check on update, at the field
// and in the webhook's words: a ChainerJob's worker sets, an MPIJob's or HorovodJob's program
// (cmd, extraMPIArgs, mca, mpiHome, whether a launcher template exists) and form, and a
// HorovodJob's elastic bounds. The pod templates are the webhook's alone.
func TestCRDUpdateRulesWithoutWebhook(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	// The operator writes the jobs' status meanwhile: a conflict is retried on a fresh read.
	update := func(obj client.Object, mutate func()) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
				return err
			}
			mutate()
			return k8s.Update(ctx, obj)
		})
	}
	refuse := func(t *testing.T, obj client.Object, mutate func(), want string) {
		t.Helper()
		err := update(obj, mutate)
		// A 1.30 API server names the refused value's type after "Invalid value:" where a rule
		// of an object reports a field of it ("object"); 1.35 leaves it out.
		if err != nil && kubeVersion.LessThan(version.MajorMinor(1, 31)) {
			err = errors.New(strings.ReplaceAll(err.Error(), `Invalid value: "object": `, "Invalid value: "))
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("update: %v, want a refusal containing %q", err, want)
		}
	}

	chainer := testutil.MakeChainerJob("upd", ns).WorkerSet("ws0", 2).Obj()
	if err := k8s.Create(ctx, chainer); err != nil {
		t.Fatal(err)
	}
	t.Run("a worker set added", func(t *testing.T) {
		refuse(t, chainer, func() {
			chainer.Spec.WorkerSets["ws1"] = troupev1.ChainerWorkerSet{Replicas: ptr.To[int32](1), Template: testutil.ChainerTemplate("c:1")}
		}, "spec.workerSets: Forbidden: worker sets cannot be added, removed or renamed once the job exists; change their replicas instead")
	})
	t.Run("a worker set renamed", func(t *testing.T) {
		refuse(t, chainer, func() {
			chainer.Spec.WorkerSets["renamed"] = chainer.Spec.WorkerSets["ws0"]
			delete(chainer.Spec.WorkerSets, "ws0")
		}, "spec.workerSets: Forbidden")
	})
	// A changed template is the webhook's to refuse, naming the field that changed
	// (test/admission); the CRD has no rule on templates (docs/admission.md, "Updates").
	t.Run("replicas may change", func(t *testing.T) {
		if err := update(chainer, func() {
			testutil.EditWorkerSet(chainer, "ws0", func(ws *troupev1.ChainerWorkerSet) { ws.Replicas = ptr.To[int32](3) })
		}); err != nil {
			t.Errorf("scaling a worker set: %v", err)
		}
	})

	mpi := &troupev1.MPIJob{
		ObjectMeta: metav1.ObjectMeta{Name: "upd", Namespace: ns},
		Spec: troupev1.MPIJobSpec{MPIProgramSpec: troupev1.MPIProgramSpec{
			Worker: troupev1.MPIWorker{Cmd: []string{"./app"}, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: troupev1.MPIWorkerContainer, Image: "mpi:test"}}}}},
			MPIHome: "/opt/mpi",
		}},
	}
	if err := k8s.Create(ctx, mpi); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, want string
		mutate     func()
	}{
		{"cmd", "spec.worker.cmd: Forbidden: cannot change once the job exists", func() { mpi.Spec.Worker.Cmd = []string{"./other"} }},
		{"extraMPIArgs", "spec.worker.extraMPIArgs: Forbidden", func() { mpi.Spec.Worker.ExtraMPIArgs = []string{"-x", "A"} }},
		{"mca", "spec.mca: Forbidden", func() { mpi.Spec.MCA = map[string]string{"btl": "^openib"} }},
		{"mpiHome", `spec.mpiHome: Invalid value: cannot change once the job exists (was "/opt/mpi")`, func() { mpi.Spec.MPIHome = "/usr" }},
		{"failurePolicy added", "runPolicy.failurePolicy: cannot change once the job exists", func() {
			mpi.Spec.RunPolicy.FailurePolicy = &troupev1.FailurePolicy{MaxRestarts: 1}
		}},
		{"a launcher template added", "spec.launcher.template: Forbidden: cannot be added or removed once the job exists", func() {
			mpi.Spec.Launcher = &troupev1.MPILauncher{Template: mpi.Spec.Worker.Template.DeepCopy()}
			mpi.Spec.Launcher.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
		}},
		{"the form", "the job cannot change between the spec.worker form and the spec.workerTemplate form", func() {
			mpi.Spec.WorkerTemplate, mpi.Spec.LauncherTemplate = mpi.Spec.Worker.Template.DeepCopy(), mpi.Spec.Worker.Template.DeepCopy()
			mpi.Spec.LauncherTemplate.Spec.RestartPolicy = corev1.RestartPolicyNever
			mpi.Spec.Worker, mpi.Spec.MPIHome = troupev1.MPIWorker{}, ""
			mpi.Spec.Transport = troupev1.MPITransportKubeExec
		}},
	} {
		t.Run("MPIJob "+c.name, func(t *testing.T) { refuse(t, mpi, c.mutate, c.want) })
	}

	// While the job stays suspended the CRD lets templates change; the webhook narrows it to the
	// scheduling fields (test/admission).
	suspended := testutil.MakeChainerJob("upd-suspended", ns).WorkerSet("ws0", 1).Suspend(true).Obj()
	if err := k8s.Create(ctx, suspended); err != nil {
		t.Fatal(err)
	}
	t.Run("a suspended job's templates", func(t *testing.T) {
		if err := update(suspended, func() {
			suspended.Spec.Master.Template.Spec.NodeSelector = map[string]string{"pool": "a"}
			testutil.EditWorkerSet(suspended, "ws0", func(ws *troupev1.ChainerWorkerSet) {
				ws.Template.Spec.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}
			})
		}); err != nil {
			t.Errorf("placing a suspended job: %v", err)
		}
	})

	horovod := &troupev1.HorovodJob{
		ObjectMeta: metav1.ObjectMeta{Name: "upd", Namespace: ns},
		Spec: troupev1.HorovodJobSpec{
			MPIProgramSpec: troupev1.MPIProgramSpec{Worker: troupev1.MPIWorker{Replicas: ptr.To[int32](2), Cmd: []string{"./app"},
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: troupev1.HorovodMainContainer, Image: "hvd:test"}}}}}},
			Elastic: &troupev1.HorovodElastic{MinReplicas: 1, MaxReplicas: 4},
		},
	}
	if err := k8s.Create(ctx, horovod); err != nil {
		t.Fatal(err)
	}
	t.Run("HorovodJob elastic", func(t *testing.T) {
		refuse(t, horovod, func() { horovod.Spec.Elastic.MaxReplicas = 8 }, "spec.elastic: Forbidden: cannot change once the job exists")
	})
}

// An elastic HorovodJob that gives no worker count starts with elastic.minReplicas workers, with
// the webhook or without it: the CRD has no default for worker.replicas (the API server would
// apply it before the defaulting webhook, which could then not tell it from a count the user
// wrote, and the elastic bounds would refuse it), and the operator starts a job stored without
// the webhook's defaults at its minimum.
func TestElasticWorkersStartAtTheMinimumWithoutWebhook(t *testing.T) {
	ns := newNamespace(t)
	job := &troupev1.HorovodJob{ObjectMeta: metav1.ObjectMeta{Name: "elastic", Namespace: ns},
		Spec: troupev1.HorovodJobSpec{
			MPIProgramSpec: troupev1.MPIProgramSpec{Worker: troupev1.MPIWorker{Cmd: []string{"./train"},
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: troupev1.HorovodMainContainer, Image: "hvd:test"}}}}}},
			Elastic: &troupev1.HorovodElastic{MinReplicas: 2, MaxReplicas: 4},
		}}
	if err := k8s.Create(context.Background(), job); err != nil {
		t.Fatalf("elastic job without worker.replicas: %v", err)
	}
	sts := waitFor(t, &appsv1.StatefulSet{}, ns, "elastic-worker")
	if got := ptr.Deref(sts.Spec.Replicas, 0); got != 2 {
		t.Errorf("worker StatefulSet replicas = %d, want elastic.minReplicas 2", got)
	}
}
