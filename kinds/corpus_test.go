package kinds

import (
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/engine"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// The webhook alone refuses every spec of the admission corpus, whichever layer the corpus says
// refuses it on a cluster, naming what the corpus expects: the webhook is a complete backstop
// (for a cluster whose CRDs are older than the operator), and a rule that lives in both layers
// names the same field in both. Every registered kind's admission (Kind.Admit: its defaulting
// and validation) is run on its specs; test/admission and test/integration check the layers on
// a real API server. The engine refuses each spec too, as stored without the webhook, with the
// same words: the kind's adapter runs the webhook's validation function (controllers.admitted).
func TestWebhookRefusesTheCorpus(t *testing.T) {
	cases, err := testutil.LoadAdmissionCases(filepath.Join("..", "test", "testdata", "admission", "bad"))
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]Kind{}
	for _, k := range All() {
		byName[k.Name] = k
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			k, ok := byName[c.Object.GetKind()]
			if !ok {
				t.Fatalf("unknown kind %q", c.Object.GetKind())
			}
			job := k.NewObject()
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(c.Object.Object, job); err != nil {
				t.Fatalf("%s: %v", c.Name, err)
			}
			stored := job.DeepCopyObject().(engine.Object)
			errs := k.Admit(job, fuzzWebhookOptions)
			switch {
			case len(errs) == 0:
				t.Errorf("admitted by the webhook (%s)", c.Why)
			case !strings.Contains(errs.ToAggregate().Error(), c.Expect):
				t.Errorf("refused by the webhook without naming %q: %v", c.Expect, errs.ToAggregate())
			}
			// Stored while the webhook was down, the job is not run either: the engine reports
			// the same refusal (InvalidSpec), its adapter running the same validation function.
			_, err := engine.Describe(k.Adapter(fuzzAdapterOptions), troupev1.GroupVersion.WithKind(k.Name), stored)
			if err == nil || !strings.Contains(err.Error(), c.Expect) {
				t.Errorf("described by the engine as stored (err %v), want a refusal naming %q", err, c.Expect)
			}
		})
	}
}
