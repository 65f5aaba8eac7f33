// Package version is the release troupe's binaries were built as. The build stamps both values
// (-ldflags -X, see Ldflags in the Makefile); a binary built without them (go run, go test)
// reports the version of the source, which names the release this source becomes, and the
// revision go build recorded, if any.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is the release, as `vMAJOR.MINOR.PATCH`; the default is VERSION of hack/versions.mk
// (a unit test keeps the two equal), so images named by it exist without a stamp.
var Version = "v0.2.0"

// Revision is the git commit the binary was built from, with "-dirty" when the checkout had
// changes; empty: unknown.
var Revision = ""

// Get returns the version and the revision, the latter from the Go build's own VCS record when
// the build did not stamp one.
func Get() (version, revision string) {
	revision = Revision
	if revision == "" {
		revision = vcsRevision()
	}
	if revision == "" {
		revision = "unknown"
	}
	return Version, revision
}

// String is what --version prints: `troupe-operator v0.2.0 (revision 1c3a172..., go1.26.8 linux/amd64)`.
func String(program string) string {
	v, r := Get()
	return fmt.Sprintf("%s %s (revision %s, %s %s/%s)", program, v, r, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

func vcsRevision() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if rev == "" {
		return ""
	}
	return rev + dirty
}
