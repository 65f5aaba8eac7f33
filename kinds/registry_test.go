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
	files, err := filepath.Glob(filepath.Join("..", "deploy", "crds", "*.yaml"))
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
		t.Errorf("deploy/crds has %v, the registry %v", crdKinds, registered)
	}
}
