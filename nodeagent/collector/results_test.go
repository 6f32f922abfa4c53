package collector

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/albertofaria/pav/protocol"
)

// A group snapshot creation pod's /pav/snapshot-handles reaches its
// annotation (trimmed, as every result), and an empty one still yields the annotation (the
// controller then names the volumes it lacks).
func TestReadResultsCollectsSnapshotHandles(t *testing.T) {
	for content, want := range map[string]string{"vol-1 snap-1\nvol-2 snap-2 1Gi\n": "vol-1 snap-1\nvol-2 snap-2 1Gi", "": ""} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, protocol.FileSnapshotHandles), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := readResults(dir)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := out[protocol.AnnotationResultSnapshotHandles]; !ok || got != want {
			t.Errorf("%q: annotation %q (present %v), want %q", content, got, ok, want)
		}
	}
}
