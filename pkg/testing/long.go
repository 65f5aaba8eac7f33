package testing

import (
	"os"
	"testing"
)

// LongTestsEnv set to 1 runs the tests LongOnly marks (make test-long).
const LongTestsEnv = "TROUPE_LONG_TESTS"

// LongOnly skips a test that make test leaves out to keep a cold CI run within its time: a
// variant whose path another test in make test walks in all but one form (docs/testing.md
// lists them). make test-long runs them.
func LongOnly(t testing.TB) {
	t.Helper()
	if os.Getenv(LongTestsEnv) != "1" {
		t.Skipf("left out of make test for time: make test-long runs it (%s=1)", LongTestsEnv)
	}
}
