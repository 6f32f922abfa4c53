package main

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
)

func TestTuneGarbageCollector(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	for _, c := range []struct {
		gogc string
		want int
	}{{"", defaultGCPercent}, {"200", 100}} { // a GOGC of its own was read by the runtime at start: untouched
		t.Setenv("GOGC", c.gogc)
		t.Setenv("GOMEMLIMIT", "1GiB") // not the test machine's cgroup
		debug.SetGCPercent(100)
		tuneGarbageCollector()
		if got := debug.SetGCPercent(100); got != c.want {
			t.Errorf("GOGC=%q: GC percent %d, want %d", c.gogc, got, c.want)
		}
	}
}

func TestCgroupMemoryLimit(t *testing.T) {
	for _, c := range []struct {
		file, content string
		want          int64
		ok            bool
	}{
		{"memory.max", "268435456\n", 268435456, true},
		{"memory.max", "max\n", 0, false},
		{"memory/memory.limit_in_bytes", "33554432\n", 33554432, true},
		{"memory/memory.limit_in_bytes", "9223372036854771712\n", 0, false},
		{"", "", 0, false}, // no cgroup files
	} {
		root := t.TempDir()
		if c.file != "" {
			p := filepath.Join(root, c.file)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(c.content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if got, ok := cgroupMemoryLimit(root); got != c.want || ok != c.ok {
			t.Errorf("%s = %q: got %d, %v, want %d, %v", c.file, c.content, got, ok, c.want, c.ok)
		}
	}
}
