package kinds

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// Every CRD the install ships is a registered kind, and every registered kind has its CRD and
// names itself as its object's API kind: a kind whose file was forgotten would be served by the
// API server with no controller and no webhook behind it.
func TestEveryCRDIsARegisteredKind(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "config", "crds", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crdKinds []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd struct {
			Spec struct {
				Names struct{ Kind string } `json:"names"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(data, &crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		crdKinds = append(crdKinds, crd.Spec.Names.Kind)
	}
	scheme := runtime.NewScheme()
	if err := troupev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	var registered []string
	for _, k := range All() {
		registered = append(registered, k.Name)
		gvk, err := apiutil.GVKForObject(k.NewObject(), scheme)
		if err != nil || gvk.Kind != k.Name {
			t.Errorf("kind %s: its object is %v (%v)", k.Name, gvk, err)
		}
	}
	slices.Sort(crdKinds)
	if !slices.Equal(crdKinds, registered) {
		t.Errorf("config/crds has %v, the registry %v", crdKinds, registered)
	}
}

// The registry lists each kind once, sorted by name (the order the operator sets them up in).
func TestRegistryIsSortedAndUnique(t *testing.T) {
	var names []string
	for _, k := range All() {
		names = append(names, k.Name)
	}
	if !slices.IsSorted(names) || len(slices.Compact(slices.Clone(names))) != len(names) {
		t.Errorf("registry %v: want each kind once, sorted by name", names)
	}
}

// Kueue manages troupe's jobs through its external frameworks: the local cluster's Kueue
// configuration (and so docs/kueue.md's example) names every registered kind, and only those
// (make manifests writes the list: hack/kueueframeworks).
func TestKueueConfigNamesEveryKind(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "hack", "controlplane", "kueue-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Integrations struct {
			ExternalFrameworks []string `json:"externalFrameworks"`
		} `json:"integrations"`
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, k := range All() {
		want = append(want, k.Name+"."+troupev1.GroupVersion.Version+"."+troupev1.GroupVersion.Group)
	}
	got := slices.Sorted(slices.Values(cfg.Integrations.ExternalFrameworks))
	if !slices.Equal(got, want) {
		t.Errorf("kueue-config.yaml externalFrameworks %v, want %v: run make manifests", got, want)
	}
}
