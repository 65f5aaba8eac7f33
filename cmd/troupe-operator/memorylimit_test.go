package main

import (
	"math"
	"runtime/debug"
	"strings"
	"testing"
)

func TestSetMemoryLimit(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	env := func(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }

	// The manifests' 512Mi: the runtime gets all but 64 MiB (the program's pages and the rest
	// the kernel charges); a limit of 164Mi gives the runtime 100 MiB; a limit too small to keep
	// 64 MiB aside gives it half.
	for limit, want := range map[string]int64{"536870912": 448 << 20, "171966464": 100 << 20, "100663296": 48 << 20} {
		got, err := setMemoryLimit(env(map[string]string{containerMemoryLimitEnv: limit}))
		if err != nil || got != want || debug.SetMemoryLimit(-1) != want {
			t.Errorf("limit %s bytes: %d, %v; want %d set", limit, got, err, want)
		}
	}
	// GOMEMLIMIT set by the user wins: the runtime read it at start, nothing is changed.
	debug.SetMemoryLimit(200 << 20)
	if got, err := setMemoryLimit(env(map[string]string{"GOMEMLIMIT": "200MiB", containerMemoryLimitEnv: "536870912"})); err != nil || got != 200<<20 {
		t.Errorf("with GOMEMLIMIT: %d, %v; want the limit it set, %d", got, err, 200<<20)
	}
	// Neither (a local process): no limit.
	debug.SetMemoryLimit(math.MaxInt64)
	if got, err := setMemoryLimit(env(nil)); err != nil || got != math.MaxInt64 {
		t.Errorf("no limit given: %d, %v", got, err)
	}
	// Not a number of bytes: refused, naming the variable.
	for _, bad := range []string{"512Mi", "0", "-1"} {
		if _, err := setMemoryLimit(env(map[string]string{containerMemoryLimitEnv: bad})); err == nil || !strings.Contains(err.Error(), containerMemoryLimitEnv) {
			t.Errorf("%q: %v, want an error naming %s", bad, err, containerMemoryLimitEnv)
		}
	}
}
