package kinds

import (
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/troupe-dev/troupe/pkg/engine"
)

// Every example is a valid object of its registered kind, every field known (a typo is not
// silently dropped), and its kind's adapter can run it.
func TestExamplesDescribe(t *testing.T) {
	for _, ex := range examples(t) {
		data, err := os.ReadFile(ex.file)
		if err != nil {
			t.Fatal(err)
		}
		job := ex.kind.NewObject()
		if err := yaml.UnmarshalStrict(data, job); err != nil {
			t.Errorf("%s: does not fit %s: %v", filepath.Base(ex.file), ex.kind.Name, err)
			continue
		}
		if err := ex.kind.Adapter(fuzzAdapterOptions).Describe(job, &engine.Spec{Name: job.GetName(), Namespace: "ns"}); err != nil {
			t.Errorf("%s: %v", filepath.Base(ex.file), err)
		}
	}
}
