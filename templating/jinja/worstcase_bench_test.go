package jinja

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// worstCase is one of the costliest templates per byte for gonja's parser
// and PaV's check: a left-deep chain of binary operators, size bytes long.
func worstCase(kind string, size int) string {
	switch kind {
	case "plus":
		return "{{ 1" + strings.Repeat("+1", (size-8)/2) + " }}"
	case "tilde":
		return "{{ 'a'" + strings.Repeat("~'a'", (size-10)/4) + " }}"
	}
	panic(kind)
}

// BenchmarkCompileWorstCase reports the time and heap a worst-case template
// costs to compile (allocated, and retained by the compiled template, if it
// compiles: past maxTokens it is refused as the lexer reaches the limit), and
// the largest such template that compiles.
func BenchmarkCompileWorstCase(b *testing.B) {
	// Per kind: the largest that compiles (just under maxTokens), then larger.
	sizes := map[string][]int{
		"plus":  {maxTokens, 16 << 10, 64 << 10, maxSourceBytes},
		"tilde": {2 * maxTokens, 64 << 10, maxSourceBytes},
	}
	for _, kind := range []string{"plus", "tilde"} {
		for _, size := range sizes[kind] {
			src := worstCase(kind, size)
			b.Run(fmt.Sprintf("%s/%dB", kind, size), func(b *testing.B) {
				b.ReportAllocs()
				var before, after runtime.MemStats
				var keep *Template
				var err error
				for b.Loop() {
					b.StopTimer()
					runtime.GC()
					runtime.ReadMemStats(&before)
					b.StartTimer()
					keep, err = Compile(src)
					b.StopTimer()
					runtime.GC()
					runtime.ReadMemStats(&after)
					b.StartTimer()
				}
				b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/(1<<20), "retained-MiB")
				if err != nil {
					b.Logf("refused: %v", err)
				}
				runtime.KeepAlive(keep)
			})
		}
	}
}
