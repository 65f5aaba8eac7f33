package kinds

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	apiext "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	apivalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"

	"github.com/troupe-dev/troupe/pkg/engine"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
	"github.com/troupe-dev/troupe/webhooks"
)

// What the API server does to a job on create and on the update a second `kubectl apply` of the
// same manifest sends, with the kind's CRD (its schema defaults and CEL rules) and its webhooks:
//   - defaulting is idempotent: the job as stored, defaulted again, is the same;
//   - the manifest laid again over the stored job (the fields the user wrote replace the stored
//     ones, lists whole, as client-side apply's merge patch does) and defaulted is the stored job
//     again, and neither the CRD's CEL rules nor the validating webhook see a change to refuse.

// crdSchema is a kind's CRD as the API server evaluates it: its structural schema (for the
// schema's defaults) and a validator of its CEL rules.
type crdSchema struct {
	structural *structuralschema.Structural
	openAPI    apivalidation.SchemaValidator
	rules      *cel.Validator
}

func loadCRDSchemas(tb testing.TB) map[string]crdSchema {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join("..", "config", "crds", "*.yaml"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("no CRDs: %v", err)
	}
	out := map[string]crdSchema{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		var crd apiextv1.CustomResourceDefinition
		if err := yaml.Unmarshal(data, &crd); err != nil {
			tb.Fatalf("%s: %v", f, err)
		}
		apiextv1.SetObjectDefaults_CustomResourceDefinition(&crd)
		var internal apiext.CustomResourceDefinition
		if err := apiextv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(&crd, &internal, nil); err != nil {
			tb.Fatalf("%s: %v", f, err)
		}
		// The internal form keeps a schema that every version shares in Spec.Validation.
		validation := internal.Spec.Validation
		if v := internal.Spec.Versions[0].Schema; v != nil {
			validation = v
		}
		s, err := structuralschema.NewStructural(validation.OpenAPIV3Schema)
		if err != nil {
			tb.Fatalf("%s: %v", f, err)
		}
		openAPI, _, err := apivalidation.NewSchemaValidator(validation.OpenAPIV3Schema)
		if err != nil {
			tb.Fatalf("%s: %v", f, err)
		}
		out[internal.Spec.Names.Kind] = crdSchema{structural: s, openAPI: openAPI, rules: cel.NewValidator(s, true, celconfig.PerCallLimit)}
	}
	return out
}

// apiObject decodes JSON as the API server holds a custom resource (whole numbers as int64).
func apiObject(tb testing.TB, data []byte) map[string]any {
	tb.Helper()
	var obj map[string]any
	if err := json.Unmarshal(data, &obj); err != nil {
		tb.Fatal(err)
	}
	return obj
}

func encodeJSON(tb testing.TB, v any) []byte {
	tb.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// admitted is a manifest through the API server's create: the schema's defaults, then the
// defaulting webhook; ok is false when validation (the webhook's, the CRD schema's or its CEL
// rules) refuses it, as the API server then stores nothing.
func admitted(tb testing.TB, k Kind, crd crdSchema, manifest []byte) (stored []byte, ok bool) {
	tb.Helper()
	obj := apiObject(tb, manifest)
	structuraldefaulting.Default(obj, crd.structural)
	raw := encodeJSON(tb, obj)
	job := k.NewObject()
	if json.Unmarshal(raw, job) != nil {
		return nil, false
	}
	var refused field.ErrorList
	defaulted, err := webhooks.DefaultedJSON(context.Background(), raw, job, func(_ context.Context, j engine.Object) error {
		refused = k.Admit(j, fuzzWebhookOptions)
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	if len(refused) > 0 {
		return defaulted, false
	}
	created := apiObject(tb, defaulted)
	if errs := apivalidation.ValidateCustomResource(nil, created, crd.openAPI); len(errs) > 0 {
		return defaulted, false
	}
	if errs, _ := crd.rules.Validate(context.Background(), nil, crd.structural, created, nil, celconfig.RuntimeCELCostBudget); len(errs) > 0 {
		return defaulted, false
	}
	return defaulted, true
}

// checkReapply checks the properties above for one manifest of kind k.
func checkReapply(t *testing.T, k Kind, crd crdSchema, manifest []byte) {
	stored, ok := admitted(t, k, crd, manifest)
	if !ok {
		return
	}
	again, _ := admitted(t, k, crd, stored)
	if !reflect.DeepEqual(apiObject(t, again), apiObject(t, stored)) {
		t.Fatalf("defaulting a defaulted %s changed it:\nonce:  %s\ntwice: %s", k.Name, stored, again)
	}
	reapplied, err := jsonpatch.MergePatch(stored, manifest)
	if err != nil {
		t.Fatal(err)
	}
	updated, _ := admitted(t, k, crd, reapplied)
	oldObj, newObj := apiObject(t, stored), apiObject(t, updated)
	if !reflect.DeepEqual(oldObj, newObj) {
		t.Fatalf("the %s applied again is not the stored one:\nstored:  %s\nupdated: %s", k.Name, stored, updated)
	}
	if errs, _ := crd.rules.Validate(context.Background(), nil, crd.structural, newObj, oldObj, celconfig.RuntimeCELCostBudget); len(errs) > 0 {
		t.Fatalf("the CRD's rules refuse %s applied again unchanged: %v\n%s", k.Name, errs.ToAggregate(), manifest)
	}
	oldJob, newJob := k.NewObject(), k.NewObject()
	if json.Unmarshal(stored, oldJob) != nil || json.Unmarshal(updated, newJob) != nil {
		t.Fatalf("the stored %s does not decode", k.Name)
	}
	if err := k.ValidateUpdate(oldJob, newJob, fuzzWebhookOptions); err != nil {
		t.Fatalf("the webhook refuses %s applied again unchanged: %v\n%s", k.Name, err, manifest)
	}
}

// TestDefaultingIsIdempotent checks the properties on every example and every manifest of the
// admission corpus (the refused ones are skipped where validation refuses them).
func TestDefaultingIsIdempotent(t *testing.T) {
	crds := loadCRDSchemas(t)
	for _, ex := range examples(t) {
		t.Run(filepath.Base(ex.file), func(t *testing.T) {
			checkReapply(t, ex.kind, crds[ex.kind.Name], encodeJSON(t, ex.obj))
		})
	}
	cases, err := testutil.LoadAdmissionCases(filepath.Join("..", "test", "testdata", "admission", "bad"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			for _, k := range All() {
				if k.Name == c.Object.GetKind() {
					checkReapply(t, k, crds[k.Name], encodeJSON(t, c.Object.Object))
				}
			}
		})
	}
}

// TestCreateRefusedByTheCRDIsNotStored: a manifest the CRD's own rules refuse at create is never
// stored, so there is nothing to apply again (the fuzz input CI found: an empty gitBranch, which
// the webhook leaves to the CRD's pattern rule).
func TestCreateRefusedByTheCRDIsNotStored(t *testing.T) {
	crds := loadCRDSchemas(t)
	manifest := []byte(`{"apiVersion":"troupe.dev/v1alpha1","kind":"MPIJob","metadata":{"name":"chainermn-mnist","namespace":"fuzz"},` +
		`"spec":{"appCodesToSync":[{"gitBranch":"","gitRepo":"https://github.com/chainer/chainermn.git","mountPath":"/chainermn-examples","name":"chainermn"}],` +
		`"worker":{"replicas":2,"template":{"spec":{"containers":[{"image":"mpi:1","name":"mpi-worker"}]}}}}}`)
	for _, k := range All() {
		if k.Name != "MPIJob" {
			continue
		}
		if _, ok := admitted(t, k, crds[k.Name], manifest); ok {
			t.Fatal("an MPIJob with an empty gitBranch is admitted; the CRD refuses it at create")
		}
		checkReapply(t, k, crds[k.Name], manifest)
	}
}

// FuzzDefaultingIsIdempotent checks the properties on the examples edited by the fuzz input, as
// FuzzAdmittedJobsRun edits them.
func FuzzDefaultingIsIdempotent(f *testing.F) {
	exs := examples(f)
	crds := loadCRDSchemas(f)
	for i := range exs {
		f.Add(uint8(i), []byte{})
		f.Add(uint8(i), []byte{3, 200, 11, 5})
	}
	f.Fuzz(func(t *testing.T, which uint8, edits []byte) {
		ex := exs[int(which)%len(exs)]
		obj := deepCopyJSON(ex.obj)
		for i := 0; i+1 < len(edits); i += 2 {
			edit(obj, edits[i], edits[i+1])
		}
		if obj["kind"] != ex.kind.Name || obj["apiVersion"] != ex.obj["apiVersion"] {
			return // another resource: the API server would not send it to this kind's webhooks
		}
		obj["metadata"] = map[string]any{"name": fmt.Sprint(ex.obj["metadata"].(map[string]any)["name"]), "namespace": "fuzz"}
		checkReapply(t, ex.kind, crds[ex.kind.Name], encodeJSON(t, obj))
	})
}
