package main

import (
	"fmt"
	"runtime/debug"
	"strconv"
)

// containerMemoryLimitEnv is the container's memory limit in bytes, which the install and the
// chart set from its limits.memory (resourceFieldRef).
const containerMemoryLimitEnv = "TROUPE_CONTAINER_MEMORY_LIMIT"

// outsideRuntime is the part of the container's memory limit kept from the Go runtime's soft
// limit. GOMEMLIMIT counts the memory the runtime maps, not the program's code (about 48 MiB of
// the operator's pages in memory) nor what the kernel charges the container besides; at the
// whole limit the kernel would kill the operator before the collector holds it back. A fixed
// amount rather than a share, so that a small limit still fits (docs/performance.md, "Memory").
const outsideRuntime = 64 << 20

// setMemoryLimit gives the Go runtime its soft memory limit and returns it: GOMEMLIMIT as the
// user set it (the runtime read it at start); else the container's limit less outsideRuntime
// (half of it when it is less than twice that), when the manifests give it; else none
// (math.MaxInt64).
func setMemoryLimit(getenv func(string) string) (int64, error) {
	if getenv("GOMEMLIMIT") != "" {
		return debug.SetMemoryLimit(-1), nil
	}
	v := getenv(containerMemoryLimitEnv)
	if v == "" {
		return debug.SetMemoryLimit(-1), nil
	}
	limit, err := strconv.ParseInt(v, 10, 64)
	if err != nil || limit <= 0 {
		return 0, fmt.Errorf("%s=%q: want the container's memory limit in bytes", containerMemoryLimitEnv, v)
	}
	soft := runtimeLimitOf(limit)
	debug.SetMemoryLimit(soft)
	return soft, nil
}

// runtimeLimitOf is the Go runtime's soft limit in a container limited to limit bytes.
func runtimeLimitOf(limit int64) int64 {
	if limit < 2*outsideRuntime {
		return limit / 2
	}
	return limit - outsideRuntime
}
