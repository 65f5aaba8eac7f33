package webhooks

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// A repository read over SSH gets a warning at create: its host key is checked only when the
// Secret holds known_hosts, which the webhook cannot see. A public https repository gets none.
func TestGitHostKeyWarning(t *testing.T) {
	p := field.NewPath("spec", "appCodesToSync")
	got := gitHostKeyWarnings(p, []troupev1.AppCode{
		{Name: "public", GitRepo: "https://git.example.com/a.git"},
		{Name: "private", GitRepo: "git@git.example.com:org/b.git", GitSecretName: "deploy-key"},
	})
	if len(got) != 1 || !strings.Contains(got[0], "spec.appCodesToSync[1].gitSecretName") || !strings.Contains(got[0], `"known_hosts"`) {
		t.Errorf("warnings = %q, want one naming spec.appCodesToSync[1].gitSecretName and known_hosts", got)
	}
}
