package protocol

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// MaxSnapshotHandlesBytes bounds /pav/snapshot-handles: it is copied into a
// pod annotation, and a group of 100 volumes with the longest handles fits.
const MaxSnapshotHandlesBytes = 32 << 10

// MemberSnapshot is one volume's part of a group snapshot, as a group
// snapshot creation pod wrote it to /pav/snapshot-handles.
type MemberSnapshot struct {
	VolumeHandle, SnapshotHandle string
	// RestoreSize is as written (bytes or a quantity), "" if none.
	RestoreSize string
}

// ParseSnapshotHandles reads /pav/snapshot-handles: one line per volume of
// volumes (the group's volume handles, each exactly once, in any order):
// "<volume handle> <snapshot handle> [<restore size>]". Blank lines are
// skipped. The result is in the order of volumes.
func ParseSnapshotHandles(raw string, volumes []string) ([]MemberSnapshot, error) {
	if len(raw) > MaxSnapshotHandlesBytes {
		return nil, fmt.Errorf("it is longer than %d bytes", MaxSnapshotHandlesBytes)
	}
	want := make(map[string]int, len(volumes))
	for i, v := range volumes {
		want[v] = i
	}
	out := make([]MemberSnapshot, len(volumes))
	seen := make([]bool, len(volumes))
	for n, line := range strings.Split(raw, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) > 3 || len(f) < 2 {
			return nil, fmt.Errorf("line %d has %d fields: write '<volume handle> <snapshot handle> [<restore size>]'", n+1, len(f))
		}
		i, ok := want[f[0]]
		switch {
		case !ok:
			return nil, fmt.Errorf("line %d names volume %q, which is not in the group", n+1, f[0])
		case seen[i]:
			return nil, fmt.Errorf("line %d names volume %q a second time", n+1, f[0])
		}
		if err := CheckHandle(f[1]); err != nil {
			return nil, fmt.Errorf("line %d: snapshot handle: %w", n+1, err)
		}
		seen[i] = true
		out[i] = MemberSnapshot{VolumeHandle: f[0], SnapshotHandle: f[1]}
		if len(f) == 3 {
			out[i].RestoreSize = f[2]
		}
	}
	for i, ok := range seen {
		if !ok {
			return nil, fmt.Errorf("no line names volume %q of the group", volumes[i])
		}
	}
	return out, nil
}

// GroupSnapshotPod is the group snapshot creation or deletion pod of the
// VolumeGroupSnapshotContent content (UID uid), built from tmpl, with the
// result finalizer the claim pods have.
func GroupSnapshotPod(tmpl *corev1.PodTemplateSpec, provisioner, root string, phase Phase, content, uid string) *corev1.Pod {
	return contentPod(tmpl, provisioner, root, phase, AnnotationGroupSnapshotContent, content, uid)
}
