package main

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// defaultGCPercent is the garbage collector's target (what GOGC sets) unless
// GOGC is set: PaV's processes are idle most of the time with a small heap,
// so a collection at half as much growth costs little CPU, and they keep
// less after a burst of claims (docs/benchmarks.md has the numbers).
const defaultGCPercent = 50

// tuneGarbageCollector sets the garbage collector's target (defaultGCPercent)
// unless GOGC is set, and gives the Go runtime a soft memory limit (what
// GOMEMLIMIT sets) of 80% of the container's memory limit, unless GOMEMLIMIT
// is set: near the limit the garbage collector works harder instead of
// letting the heap grow into an OOM kill, and the limit follows the
// manifest's resources.limits.memory without a second place to keep in step.
func tuneGarbageCollector() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	if limit, ok := cgroupMemoryLimit("/sys/fs/cgroup"); ok {
		debug.SetMemoryLimit(limit / 10 * 8)
	}
}

// cgroupMemoryLimit reads the memory limit of the cgroup mounted at root
// (a container's own, with a cgroup namespace): memory.max of cgroup v2, or
// memory.limit_in_bytes of cgroup v1. ok is false if there is none.
func cgroupMemoryLimit(root string) (limit int64, ok bool) {
	for _, f := range []string{"memory.max", "memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		// "max" (v2) and v1's page-rounded MaxInt64 mean no limit
		if err != nil || n <= 0 || n >= 1<<60 {
			return 0, false
		}
		return n, true
	}
	return 0, false
}
