package webhooks

import (
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// The webhook alone refuses every spec of the admission corpus, whichever layer the corpus says
// refuses it on a cluster, naming what the corpus expects: the webhook is a complete backstop
// (for a cluster whose CRDs are older than the operator), and a rule that lives in both layers
// names the same field in both. test/admission and test/integration check the layers on a real
// API server.
func TestWebhookRefusesTheCorpus(t *testing.T) {
	cases, err := testutil.LoadAdmissionCases(filepath.Join("..", "test", "testdata", "admission", "bad"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			var err error
			switch kind := c.Object.GetKind(); kind {
			case "ChainerJob":
				job := fromCorpus[troupev1.ChainerJob](t, c)
				DefaultChainerJob(job, fuzzOptions)
				err = invalid(kind, job.Name, ValidateChainerJob(job))
			case "MPIJob":
				job := fromCorpus[troupev1.MPIJob](t, c)
				DefaultMPIJob(job, fuzzOptions)
				err = invalid(kind, job.Name, ValidateMPIJob(job))
			case "HorovodJob":
				job := fromCorpus[troupev1.HorovodJob](t, c)
				DefaultHorovodJob(job, fuzzOptions)
				err = invalid(kind, job.Name, ValidateHorovodJob(job))
			default:
				t.Fatalf("unknown kind %q", kind)
			}
			switch {
			case err == nil:
				t.Errorf("admitted by the webhook (%s)", c.Why)
			case !strings.Contains(err.Error(), c.Expect):
				t.Errorf("refused by the webhook without naming %q: %v", c.Expect, err)
			}
		})
	}
}

func fromCorpus[T any](t *testing.T, c testutil.AdmissionCase) *T {
	t.Helper()
	job := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(c.Object.Object, job); err != nil {
		t.Fatalf("%s: %v", c.Name, err)
	}
	return job
}
