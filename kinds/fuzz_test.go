package kinds

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/controllers"
	"github.com/troupe-dev/troupe/pkg/engine"
	"github.com/troupe-dev/troupe/webhooks"
)

// example is one manifest of examples/, parsed, with the registered kind it is of.
type example struct {
	file string
	kind Kind
	obj  map[string]any
}

// examples reads every manifest of examples/: each must be of a registered kind.
func examples(tb testing.TB) []example {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join("..", "examples", "*.yaml"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("no examples: %v", err)
	}
	slices.Sort(files)
	var exs []example
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		ex := example{file: f}
		if err := yaml.Unmarshal(data, &ex.obj); err != nil {
			tb.Fatalf("%s: %v", f, err)
		}
		i := slices.IndexFunc(All(), func(k Kind) bool { return k.Name == ex.obj["kind"] })
		if i < 0 {
			tb.Fatalf("%s: kind %v is not registered", f, ex.obj["kind"])
		}
		ex.kind = All()[i]
		exs = append(exs, ex)
	}
	return exs
}

var (
	fuzzWebhookOptions = webhooks.Options{DefaultGang: troupev1.GangNone}
	// Every gang provider is installed, so that a job naming one is described, not reported.
	fuzzAdapterOptions = controllers.Options{AgentImage: "troupe-agent:fuzz", DefaultGang: troupev1.GangNone,
		VolcanoScheduler: "volcano", CoschedulingScheduler: "coscheduler",
		AvailableGangs: map[troupev1.GangProvider]bool{troupev1.GangVolcano: true, troupev1.GangCoscheduling: true}}
)

// FuzzAdmittedJobsRun checks, for every registered kind, that what admission lets in the operator
// can run: a job the kind's defaulting and validation admit is described by its adapter without
// error, and every child the engine builds from it has a valid name and valid labels (a Job or
// StatefulSet the API server would refuse leaves an admitted job stuck). And the adapter builds
// the same children from the job as stored without its defaults (written while the webhook was
// down), so that the defaults the adapters assume never drift from the webhook's. The jobs are
// the examples, edited by the fuzz input: each pair of bytes picks a field (or a map key) of the
// manifest and a new value for it (or deletes it), with values near every limit.
func FuzzAdmittedJobsRun(f *testing.F) {
	exs := examples(f)
	for i := range exs {
		f.Add(uint8(i), []byte{})
		f.Add(uint8(i), []byte{0, 7, 3, 12, 9, 1})
	}
	f.Fuzz(func(t *testing.T, which uint8, edits []byte) {
		ex := exs[int(which)%len(exs)]
		obj := deepCopyJSON(ex.obj)
		for i := 0; i+1 < len(edits); i += 2 {
			edit(obj, edits[i], edits[i+1])
		}
		data, err := json.Marshal(obj)
		if err != nil {
			return
		}
		job := ex.kind.NewObject()
		if json.Unmarshal(data, job) != nil {
			return // not an object of the kind's schema: the API server refuses it
		}
		job.SetNamespace("fuzz")
		raw := job.DeepCopyObject().(engine.Object)
		if errs := ex.kind.Admit(job, fuzzWebhookOptions); len(errs) > 0 {
			return
		}
		defaulted := checkRuns(t, ex.kind, job)
		s := describeSpec(ex.kind, raw)
		if err := ex.kind.Adapter(fuzzAdapterOptions).Describe(raw, s); err != nil {
			t.Fatalf("admitted %s is refused by its adapter without its defaults: %v\n%s", ex.kind.Name, err, data)
		}
		if diff := cmp.Diff(defaulted, engine.Children(s, true)); diff != "" {
			t.Fatalf("the adapter builds other children for %s without its defaults (-defaulted +stored without defaults):\n%s\n%s", ex.kind.Name, diff, data)
		}
	})
}

// TestExamplesRun checks the fuzz property on every example as written.
func TestExamplesRun(t *testing.T) {
	for _, ex := range examples(t) {
		t.Run(filepath.Base(ex.file), func(t *testing.T) {
			checkRuns(t, ex.kind, ex.admitted(t, "fuzz"))
		})
	}
}

// admitted is the example as its kind, in namespace ns, as admission stores it (defaulted); an
// example admission refuses fails tb.
func (ex example) admitted(tb testing.TB, ns string) engine.Object {
	tb.Helper()
	data, _ := json.Marshal(ex.obj)
	job := ex.kind.NewObject()
	if err := json.Unmarshal(data, job); err != nil {
		tb.Fatal(err)
	}
	job.SetNamespace(ns)
	if errs := ex.kind.Admit(job, fuzzWebhookOptions); len(errs) > 0 {
		tb.Fatalf("the example is refused: %v", errs)
	}
	return job
}

// describeSpec is the Spec the engine hands a kind's adapter: the identity it owns.
func describeSpec(k Kind, job engine.Object) *engine.Spec {
	return &engine.Spec{
		Name: job.GetName(), Namespace: job.GetNamespace(), NameLabel: k.Adapter(fuzzAdapterOptions).NameLabel(),
		Owner: metav1.OwnerReference{APIVersion: troupev1.GroupVersion.String(), Kind: k.Name, Name: job.GetName(),
			UID: "fuzz", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)},
	}
}

// checkRuns describes an admitted job with its kind's adapter, as the engine does, checks the
// names and labels of every child built from it, and returns the children.
func checkRuns(t *testing.T, k Kind, job engine.Object) []client.Object {
	t.Helper()
	s := describeSpec(k, job)
	spec, _ := json.Marshal(job)
	if err := k.Adapter(fuzzAdapterOptions).Describe(job, s); err != nil {
		t.Fatalf("admitted %s is refused by its adapter: %v\n%s", k.Name, err, spec)
	}
	children := engine.Children(s, true)
	for _, c := range children {
		if errs := childErrors(c); len(errs) > 0 {
			t.Fatalf("admitted %s has an invalid child %T %q: %v\n%s", k.Name, c, c.GetName(), errs.ToAggregate(), spec)
		}
	}
	return children
}

// childErrors is what the API server would refuse of a child's name and labels, and of its pods'.
func childErrors(c client.Object) field.ErrorList {
	meta := field.NewPath("metadata")
	var errs field.ErrorList
	name := c.GetName()
	check := func(msgs []string) {
		for _, m := range msgs {
			errs = append(errs, field.Invalid(meta.Child("name"), name, m))
		}
	}
	check(validation.IsDNS1123Subdomain(name))
	errs = append(errs, metavalidation.ValidateLabels(c.GetLabels(), meta.Child("labels"))...)
	var pods *corev1.PodTemplateSpec
	switch o := c.(type) {
	case *corev1.Service:
		check(validation.IsDNS1035Label(name))
	case *batchv1.Job:
		// Its pods carry the label job-name=<name>.
		check(validation.IsValidLabelValue(name))
		pods = &o.Spec.Template
	case *appsv1.StatefulSet:
		// Its pods carry controller-revision-hash=<name>-<10-character hash> and are named
		// <name>-<ordinal>, their host names.
		check(validation.IsValidLabelValue(name + "-0123456789"))
		check(validation.IsDNS1123Label(name + "-" + strconv.Itoa(int(ptr.Deref(o.Spec.Replicas, 1)))))
		pods = &o.Spec.Template
	}
	if pods != nil {
		errs = append(errs, metavalidation.ValidateLabels(pods.Labels, field.NewPath("spec", "template", "metadata", "labels"))...)
	}
	return errs
}

// Values an edit sets: around every limit of names, counts and enumerations.
var (
	stringValues = func() []any {
		vs := []any{"", "a", "w", "ws0", "worker", "a-b", "A", "-a", "a.b", "1a", "SSH", "KubeExec", "OpenMPI", "IntelMPI",
			"MPICH", "Volcano", "Coscheduling", "None", "none", "mpi", "Running", "All", "Never", "Always", "OnFailure",
			"chainer", "mpi-worker", "horovod", "mpi-launcher", "/usr/sbin/sshd", "relative/path"}
		for _, n := range []int{10, 30, 38, 40, 41, 42, 44, 45, 46, 52, 53, 54, 55, 56, 57, 63, 64} {
			vs = append(vs, strings.Repeat("a", n))
		}
		return vs
	}()
	numberValues = []any{0, 1, 2, 3, -1, 7, 8, 63, 64, 1023, 1024, 1025, 4094, 4095, 4096, 65535, 65536, 2147483647}
)

// edit changes one field or map key of obj: site picks it, op what is done to it.
func edit(obj map[string]any, site, op byte) {
	var sites []func(op byte)
	walk(obj, &sites)
	if len(sites) > 0 {
		sites[int(site)%len(sites)](op)
	}
}

// walk lists, in a stable order, an editor of every map key and every scalar under v.
func walk(v any, sites *[]func(byte)) {
	switch x := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			*sites = append(*sites, func(op byte) {
				if op >= 240 {
					delete(x, k)
					return
				}
				if n, ok := stringValues[int(op)%len(stringValues)].(string); ok && n != k {
					x[n] = x[k]
					delete(x, k)
				}
			})
			switch val := x[k].(type) {
			case map[string]any, []any:
				walk(val, sites)
			default:
				*sites = append(*sites, func(op byte) { x[k] = newValue(val, op) })
			}
		}
	case []any:
		for i := range x {
			switch val := x[i].(type) {
			case map[string]any, []any:
				walk(val, sites)
			default:
				*sites = append(*sites, func(op byte) { x[i] = newValue(val, op) })
			}
		}
	}
}

// newValue is a value of the same type as old (or, for some ops, of another).
func newValue(old any, op byte) any {
	switch old.(type) {
	case bool:
		return op%2 == 0
	case float64, int, int64:
		return numberValues[int(op)%len(numberValues)]
	default:
		return stringValues[int(op)%len(stringValues)]
	}
}

// deepCopyJSON copies a decoded manifest.
func deepCopyJSON(m map[string]any) map[string]any {
	data, err := json.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("copy manifest: %v", err))
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		panic(err)
	}
	return out
}
