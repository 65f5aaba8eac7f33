package kinds

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/troupe-dev/troupe/pkg/engine"
)

// BenchmarkChildren is what a pass pays to build, and hash, the desired children of each
// example (engine.Children: every pass builds them again; docs/performance.md, the levers of
// issue 53).
func BenchmarkChildren(b *testing.B) {
	for _, ex := range examples(b) {
		b.Run(filepath.Base(ex.file), func(b *testing.B) {
			data, _ := json.Marshal(ex.obj)
			job := ex.kind.NewObject()
			if err := json.Unmarshal(data, job); err != nil {
				b.Fatal(err)
			}
			job.SetNamespace("bench")
			if errs := ex.kind.Admit(job, fuzzWebhookOptions); len(errs) > 0 {
				b.Fatalf("refused: %v", errs)
			}
			adapter := ex.kind.Adapter(fuzzAdapterOptions)
			b.ReportAllocs()
			for b.Loop() {
				s := describeSpec(ex.kind, job)
				if err := adapter.Describe(job, s); err != nil {
					b.Fatal(err)
				}
				engine.Children(s, false)
			}
		})
	}
}
