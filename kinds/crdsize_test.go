package kinds

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"
)

// maxCRDBytes bounds each CRD as the API server stores it (compact JSON): etcd refuses a
// request over 1.5 MiB, and a second API version served beside v1alpha1 (a conversion) would
// carry a second schema of about the same size, so one version may use a little under half.
const maxCRDBytes = 700_000

// Every CRD fits its bound, and the chart ships the same CRDs as config/crds (Helm installs
// them from its crds/ directory). hack/crdtrim keeps the pod templates' share small: without it
// the MPIJob CRD was 1,254,135 bytes.
func TestCRDSizes(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "config", "crds", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in config/crds (%v)", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		compact, err := yaml.YAMLToJSON(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		t.Logf("%s: %d bytes as stored (bound %d)", filepath.Base(f), len(compact), maxCRDBytes)
		if len(compact) > maxCRDBytes {
			t.Errorf("%s is %d bytes as compact JSON, over %d: a second API version would not fit etcd's 1.5 MiB", f, len(compact), maxCRDBytes)
		}
		inChart, err := os.ReadFile(filepath.Join("..", "charts", "troupe", "crds", filepath.Base(f)))
		if err != nil || !bytes.Equal(inChart, data) {
			t.Errorf("charts/troupe/crds/%s is not config/crds' (%v): run make manifests", filepath.Base(f), err)
		}
	}
}
