package admission

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/kinds"
	"github.com/troupe-dev/troupe/pkg/engine"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
	"github.com/troupe-dev/troupe/webhooks"
)

func newNamespace(t *testing.T) string { return testutil.NewNamespace(t, k8s, "adm-") }

// Every spec of the corpus is refused, with an error that names the field and the reason, by
// the layer its header names: the CRD's schema and CEL rules (checked before the validating
// webhook is called), or the webhook. test/integration checks the CRD layer without webhooks.
func TestBadSpecsAreRefused(t *testing.T) {
	cases, err := testutil.LoadAdmissionCases(filepath.Join("..", "testdata", "admission", "bad"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) < 40 {
		t.Fatalf("the corpus has %d specs, want at least 40", len(cases))
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
			err := k8s.Create(context.Background(), obj)
			if err == nil {
				_ = k8s.Delete(context.Background(), obj)
				t.Fatalf("admitted %s (%s)", c.Name, c.Why)
			}
			if !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
				t.Errorf("refused with %v, want an Invalid status", err)
			}
			if !strings.Contains(err.Error(), c.Expect) {
				t.Errorf("error does not name %q:\n%v", c.Expect, err)
			}
			byWebhook := strings.Contains(err.Error(), `admission webhook "v`) && strings.Contains(err.Error(), ".troupe.dev\" denied the request")
			if want := c.RefusedBy == testutil.LayerWebhook; byWebhook != want {
				t.Errorf("refused by the webhook: %v, but the corpus says refused-by: %s:\n%v", byWebhook, c.RefusedBy, err)
			}
		})
	}
	t.Logf("%d of %d bad specs are refused by the CRD alone", byCRD, len(cases))
}

// An elastic HorovodJob that gives no worker count is admitted and starts with elastic.minReplicas
// workers (the webhook's default; the CRD has none that would come first).
func TestElasticWorkersDefaultToTheMinimum(t *testing.T) {
	job := &troupev1.HorovodJob{ObjectMeta: metav1.ObjectMeta{Name: "elastic", Namespace: newNamespace(t)},
		Spec: troupev1.HorovodJobSpec{
			MPIProgramSpec: troupev1.MPIProgramSpec{Worker: troupev1.MPIWorker{Cmd: []string{"./train"},
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: troupev1.HorovodMainContainer, Image: "hvd:test"}}}}}},
			Elastic: &troupev1.HorovodElastic{MinReplicas: 2, MaxReplicas: 4},
		}}
	create(t, job)
	if got := ptr.Deref(job.Spec.Worker.Replicas, 0); got != 2 {
		t.Errorf("worker.replicas = %d, want elastic.minReplicas 2", got)
	}
}

// Every example is admitted, and comes back with the defaults the operator would assume,
// which a second defaulting leaves as they are.
func TestExamplesAreAdmittedAndDefaulted(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "examples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			// Each example in a namespace of its own, as a user applies one: two examples may
			// name their job alike (chainerjob-mn.yaml and its real-node variant do).
			ns := newNamespace(t)
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			opts := webhooks.Options{DefaultGang: defaultGang}
			var stored client.Object
			switch {
			case strings.Contains(string(data), "kind: ChainerJob"):
				job := createDefaulted(t, testutil.Load[*troupev1.ChainerJob](t, f, ns),
					func(j *troupev1.ChainerJob) any { return j.Spec }, func(j *troupev1.ChainerJob) { j.SetDefaults(opts.Defaults()) })
				if job.Spec.Transport != troupev1.MPITransportKubeExec || job.Spec.Master.MPIConfig.Slots == nil {
					t.Errorf("stored spec lacks its defaults: %+v", job.Spec)
				}
				for name, ws := range job.Spec.WorkerSets {
					if ws.MPIConfig == nil || ws.MPIConfig.Slots == nil || ws.Replicas == nil {
						t.Errorf("stored worker set %s lacks its defaults: %+v", name, ws)
					}
				}
				stored = job
			case strings.Contains(string(data), "kind: MPIJob"):
				job := createDefaulted(t, testutil.Load[*troupev1.MPIJob](t, f, ns),
					func(j *troupev1.MPIJob) any { return j.Spec }, func(j *troupev1.MPIJob) { j.SetDefaults(opts.Defaults()) })
				switch {
				case job.Spec.IsWorkerTemplateForm():
					// The FFFFFaraway form keeps its form and reaches its workers by exec.
					if job.Spec.Transport != troupev1.MPITransportKubeExec || job.Spec.NumWorkers == nil ||
						!equality.Semantic.DeepEqual(job.Spec.Worker, troupev1.MPIWorker{}) || job.Spec.Launcher != nil {
						t.Errorf("stored spec lacks its defaults or changed form: %+v", job.Spec)
					}
				case job.Spec.Transport != troupev1.MPITransportSSH || job.Spec.MPIImplementation != "OpenMPI" || ptr.Deref(job.Spec.SSH.Port, 0) != 2222:
					t.Errorf("stored spec lacks its defaults: %+v", job.Spec)
				}
				stored = job
			case strings.Contains(string(data), "kind: HorovodJob"):
				stored = createDefaulted(t, testutil.Load[*troupev1.HorovodJob](t, f, ns),
					func(j *troupev1.HorovodJob) any { return j.Spec }, func(j *troupev1.HorovodJob) { j.SetDefaults(opts.Defaults()) })
			default:
				// A kind with no checks of its own here: admitted, and defaulted idempotently.
				stored = createRegistered(t, f, ns, opts)
			}
			if ptr.Deref(gangOf(stored), "") != defaultGang {
				t.Errorf("gang = %v, want the operator's default %s", gangOf(stored), defaultGang)
			}
		})
	}
}

// createDefaulted creates job through the webhooks and checks that defaulting what was stored
// once more changes nothing (defaulting is idempotent on a real round trip).
func createDefaulted[T client.Object](t *testing.T, job T, spec func(T) any, def func(T)) T {
	t.Helper()
	create(t, job)
	again := job.DeepCopyObject().(T)
	def(again)
	if diff := cmp.Diff(spec(job), spec(again)); diff != "" {
		t.Errorf("defaulting the stored job changed it (-stored +again):\n%s", diff)
	}
	return job
}

// createRegistered creates the example in file f as the kind of the registry it names, and
// checks that defaulting what was stored once more changes nothing.
func createRegistered(t *testing.T, f, ns string, opts webhooks.Options) client.Object {
	t.Helper()
	data, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	var meta metav1.TypeMeta
	if err := yaml.Unmarshal(data, &meta); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(kinds.All(), func(k kinds.Kind) bool { return k.Name == meta.Kind })
	if i < 0 {
		t.Fatalf("%s: kind %q is not registered", f, meta.Kind)
	}
	k := kinds.All()[i]
	job := k.NewObject()
	if err := yaml.UnmarshalStrict(data, job); err != nil {
		t.Fatalf("%s: %v", f, err)
	}
	job.SetNamespace(ns)
	create(t, job)
	again := job.DeepCopyObject().(engine.Object)
	if errs := k.Admit(again, opts); len(errs) > 0 {
		t.Errorf("the stored job is refused: %v", errs)
	}
	if diff := cmp.Diff(specOf(t, job), specOf(t, again)); diff != "" {
		t.Errorf("defaulting the stored job changed it (-stored +again):\n%s", diff)
	}
	return job
}

// specOf is an object's spec, as JSON fields.
func specOf(t *testing.T, o client.Object) any {
	t.Helper()
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		t.Fatal(err)
	}
	return u["spec"]
}

// gangOf is the gang provider of a job of any kind (spec.schedulingPolicy.gang).
func gangOf(o client.Object) *troupev1.GangProvider {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		return nil
	}
	g, found, _ := unstructured.NestedString(u, "spec", "schedulingPolicy", "gang")
	if !found {
		return nil
	}
	return ptr.To(troupev1.GangProvider(g))
}

func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := k8s.Create(context.Background(), obj); err != nil {
		t.Fatalf("refused: %v", err)
	}
}
