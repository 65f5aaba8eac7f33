package version

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// The unstamped version is the one hack/versions.mk releases, so a binary built without the
// Makefile's stamp still names images that make images builds.
func TestVersionIsTheMakefiles(t *testing.T) {
	mk, err := os.ReadFile("../../hack/versions.mk")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^VERSION\s*\?=\s*(\S+)\s*$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("hack/versions.mk sets no VERSION")
	}
	if Version != string(m[1]) {
		t.Errorf("version.Version is %s; hack/versions.mk releases %s", Version, m[1])
	}
	if !regexp.MustCompile(`^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`).MatchString(Version) {
		t.Errorf("version %q is not vMAJOR.MINOR.PATCH", Version)
	}
}

func TestStringNamesProgramVersionAndRevision(t *testing.T) {
	old := Revision
	t.Cleanup(func() { Revision = old })
	Revision = "0123abcd"
	s := String("troupe-operator")
	if !strings.HasPrefix(s, "troupe-operator "+Version+" (revision 0123abcd, go") {
		t.Errorf("String = %q", s)
	}
}
