package v1alpha1

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Plain-text transports are refused unless allowed, credentials in a URL always; what users
// write for public and private repositories passes.
func TestAppCodeURLErrors(t *testing.T) {
	for _, c := range []struct {
		repo     string
		insecure bool
		refused  bool
	}{
		{"https://github.com/chainer/chainermn.git", false, false},
		{"ssh://git@git.example.com/org/app.git", false, false},
		{"git@github.com:org/app.git", false, false},
		{"http://git.example.com/org/app.git", false, true},
		{"git://git.example.com/org/app.git", false, true},
		{"http://git.example.com/org/app.git", true, false},
		{"git://git.example.com/org/app.git", true, false},
		{"https://ghp_0123456789abcdef@github.com/org/app.git", false, true},
		{"https://user:secret@github.com/org/app.git", false, true},
		{"http://user@git.example.com/org/app.git", true, true},
		{"ssh://git:secret@git.example.com/org/app.git", false, true},
	} {
		errs := AppCodeURLErrors(field.NewPath("spec", "appCodesToSync"),
			[]AppCode{{Name: "app", GitRepo: c.repo, AllowInsecureTransport: c.insecure}})
		if got := len(errs) > 0; got != c.refused {
			t.Errorf("%s (allowInsecureTransport %t): refused %t, want %t: %v", c.repo, c.insecure, got, c.refused, errs)
		}
		for _, e := range errs {
			if e.Field != "spec.appCodesToSync[0].gitRepo" || strings.Contains(e.Error(), "secret") || strings.Contains(e.Error(), "ghp_") {
				t.Errorf("%s: error %q must name spec.appCodesToSync[0].gitRepo and no credential", c.repo, e.Error())
			}
		}
	}
}

// Messages name a repository without anything that could be a credential.
func TestRedactGitURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://github.com/org/app.git":                  "https://github.com/org/app.git",
		"https://ghp_abc@github.com/org/app.git":          "https://redacted@github.com/org/app.git",
		"https://u:p@github.com/org/app.git?token=x#frag": "https://redacted@github.com/org/app.git?redacted",
		"ssh://git@git.example.com/org/app.git":           "ssh://git@git.example.com/org/app.git",
		"ssh://git:pw@git.example.com/org/app.git":        "ssh://redacted@git.example.com/org/app.git",
		"git@github.com:org/app.git":                      "git@github.com:org/app.git",
	} {
		if got := RedactGitURL(in); got != want {
			t.Errorf("RedactGitURL(%q) = %q, want %q", in, got, want)
		}
	}
}
