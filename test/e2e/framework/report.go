package framework

import (
	"cmp"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// NearestRank is the q-quantile (0 < q <= 1) of sorted samples by nearest
// rank, as the benchmarks and the soak report them.
func NearestRank[T cmp.Ordered](sorted []T, q float64) T {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// WriteOutput writes data to _output/<dir>/<name> of the repository and
// returns that path.
func WriteOutput(dir, name string, data []byte) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	dir = filepath.Join(root, "_output", dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	return path, nil
}

// Stopwatch logs how long each step of a test took, and the total.
type Stopwatch struct {
	t           testing.TB
	start, last time.Time
}

func NewStopwatch(t testing.TB) *Stopwatch {
	now := time.Now()
	return &Stopwatch{t: t, start: now, last: now}
}

// Lap logs the time since the last lap (or the start) as step's.
func (s *Stopwatch) Lap(step string) {
	now := time.Now()
	s.t.Logf("timing: %-40s %6.2fs (total %6.2fs)", step, now.Sub(s.last).Seconds(), now.Sub(s.start).Seconds())
	s.last = now
}
