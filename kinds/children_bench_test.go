package kinds

import (
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
			job := ex.admitted(b, "bench")
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
