package protocol

import (
	"strings"
	"testing"
)

func TestParseSnapshotHandles(t *testing.T) {
	vols := []string{"vol-a", "vol-b"}
	got, err := ParseSnapshotHandles("vol-b snap-b 1Gi\n\n  vol-a\tsnap-a\n", vols)
	if err != nil {
		t.Fatal(err)
	}
	want := []MemberSnapshot{{"vol-a", "snap-a", ""}, {"vol-b", "snap-b", "1Gi"}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("got %+v, want %+v", got, want)
	}
	for raw, msg := range map[string]string{
		"vol-a snap-a\n":                               `no line names volume "vol-b"`,
		"vol-a snap-a\nvol-b snap-b\nvol-c s\n":        `names volume "vol-c", which is not in the group`,
		"vol-a snap-a\nvol-a snap-b\n":                 `names volume "vol-a" a second time`,
		"vol-a\nvol-b snap-b\n":                        "line 1 has 1 fields",
		"vol-a snap-a 1 2\nvol-b snap-b\n":             "line 1 has 4 fields",
		"vol-a $(reboot)\nvol-b snap-b\n":              "line 1: snapshot handle",
		strings.Repeat("x", MaxSnapshotHandlesBytes+1): "longer than",
	} {
		if _, err := ParseSnapshotHandles(raw, vols); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: error %v, want one with %q", raw, err, msg)
		}
	}
}
