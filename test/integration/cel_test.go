package integration

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// With no webhook registered (this suite's API server has none), the CRDs' OpenAPI bounds and
// CEL rules alone refuse the corpus specs marked refused-without-webhook, with the same field
// path; the others are the webhook's to refuse, which this checks too, so the corpus's
// account of where each rule lives stays true.
func TestCRDRulesWithoutWebhook(t *testing.T) {
	cases, err := testutil.LoadAdmissionCases(filepath.Join("..", "testdata", "admission", "bad"))
	if err != nil {
		t.Fatal(err)
	}
	ns := newNamespace(t)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			obj := c.Object.DeepCopy()
			obj.SetNamespace(ns)
			obj.SetName(obj.GetName() + "-" + strings.ToLower(strings.ReplaceAll(c.Name, "_", "-")))
			if len(obj.GetName()) > 40 || c.Name == "chainer-name-dots" || c.Name == "chainer-name-starts-with-digit" {
				obj.SetName(c.Object.GetName()) // the name is what the case is about
			}
			err := k8s.Create(context.Background(), obj)
			if err == nil {
				defer func() { _ = k8s.Delete(context.Background(), obj) }()
			}
			switch {
			case c.RefusedWithoutWebhook && err == nil:
				t.Errorf("admitted without the webhook, but the corpus says the CRD refuses it (%s)", c.Why)
			case c.RefusedWithoutWebhook && !strings.Contains(err.Error(), c.Expect):
				t.Errorf("refused without naming %q: %v", c.Expect, err)
			case !c.RefusedWithoutWebhook && err != nil:
				t.Errorf("refused without the webhook, but the corpus says only the webhook does: %v", err)
			}
		})
	}
}
