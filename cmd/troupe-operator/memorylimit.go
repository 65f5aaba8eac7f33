package main

import (
	"fmt"
	"runtime/debug"
	"strconv"
)

// containerMemoryLimitEnv is the container's memory limit in bytes, which the install and the
// chart set from its limits.memory (resourceFieldRef).
const containerMemoryLimitEnv = "TROUPE_CONTAINER_MEMORY_LIMIT"

// runtimeShareOfLimit is the part of the container's memory limit given to the Go runtime as
// its soft limit. GOMEMLIMIT counts the memory the runtime maps, not the program's code nor
// what the kernel charges the container besides; at the whole limit the kernel would kill the
// operator before the collector holds it back (docs/performance.md, "Memory").
const runtimeShareOfLimit = 0.9

// setMemoryLimit gives the Go runtime its soft memory limit and returns it: GOMEMLIMIT as the
// user set it (the runtime read it at start); else runtimeShareOfLimit of the container's limit,
// when the manifests give it; else none (math.MaxInt64).
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
	soft := int64(float64(limit) * runtimeShareOfLimit)
	debug.SetMemoryLimit(soft)
	return soft, nil
}
