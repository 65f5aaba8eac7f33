package integration

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// With no webhook registered (this suite's API server has none), the CRDs' OpenAPI bounds and
// CEL rules alone refuse every corpus spec marked "refused-by: crd", naming what the header
// expects, and admit every spec marked "refused-by: webhook", so the corpus's account of where
// each rule lives stays true both ways. test/admission checks the same specs with the webhooks.
func TestCRDRulesWithoutWebhook(t *testing.T) {
	cases, err := testutil.LoadAdmissionCases(filepath.Join("..", "testdata", "admission", "bad"))
	if err != nil {
		t.Fatal(err)
	}
	ns := newNamespace(t)
	byCRD := 0
	for _, c := range cases {
		if c.RefusedBy == testutil.LayerCRD {
			byCRD++
		}
		t.Run(c.Name, func(t *testing.T) {
			obj := c.Object.DeepCopy()
			obj.SetNamespace(ns)
			if !strings.Contains(c.Name, "name") {
				// A name of its own, so that a spec admitted by mistake cannot make the next
				// one's create fail for the wrong reason; a case about the name keeps it.
				obj.SetName(obj.GetName() + "-" + c.Name)
			}
			err := k8s.Create(context.Background(), obj)
			t.Logf("without the webhook: %v", err) // the refusal as a user reads it, with -v
			if err == nil {
				defer func() { _ = k8s.Delete(context.Background(), obj) }()
			}
			switch {
			case c.RefusedBy == testutil.LayerCRD && err == nil:
				t.Errorf("admitted without the webhook, but the corpus says the CRD refuses it (%s)", c.Why)
			case c.RefusedBy == testutil.LayerCRD && !strings.Contains(err.Error(), c.Expect):
				t.Errorf("refused without naming %q: %v", c.Expect, err)
			case c.RefusedBy == testutil.LayerWebhook && err != nil:
				t.Errorf("refused without the webhook, but the corpus says only the webhook does: %v", err)
			}
		})
	}
	t.Logf("%d of %d bad specs are refused by the CRD alone", byCRD, len(cases))
}
