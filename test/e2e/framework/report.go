package framework

import (
	"cmp"
	"fmt"
	"math"
	"os"
	"path/filepath"
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
