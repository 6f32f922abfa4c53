package controller

import (
	"context"
	"testing"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A failure repeated with the same message is not written again (only its
// time would change); a new message, or a status where there was none, is.
func TestWriteStatusIgnoresOnlyTheTimeOfAnError(t *testing.T) {
	h := newHarness(t, contentFixture(snapshotv1.VolumeSnapshotContentDelete))
	s := newPodContent(h.c, &snapshotContents, h.snap.SnapshotV1().VolumeSnapshotContents(), h.c.contentQueue, h.c.contentBackoff)
	s.content = contentFixture(snapshotv1.VolumeSnapshotContentDelete)
	writes := func(msg string, sec int64) int {
		t.Helper()
		h.snap.ClearActions()
		err := s.writeStatus(context.Background(), func(st *snapshotv1.VolumeSnapshotContentStatus) {
			snapshotContents.failed(st, &snapshotv1.VolumeSnapshotError{Time: ptrTo(metav1.Unix(sec, 0)), Message: ptrTo(msg)})
		})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, a := range h.snap.Actions() {
			if a.GetVerb() == "update" && a.GetSubresource() == "status" {
				n++
			}
		}
		return n
	}
	for _, step := range []struct {
		msg  string
		sec  int64
		want int
	}{
		{"pod failed", 1, 1}, // the content had no status
		{"pod failed", 2, 0}, // the same failure again
		{"pod failed again", 3, 1},
	} {
		if got := writes(step.msg, step.sec); got != step.want {
			t.Errorf("writing error %q: %d status updates, want %d", step.msg, got, step.want)
		}
	}
	if got := ptrString(s.content.Status.Error.Message); got != "pod failed again" {
		t.Errorf("status.error.message = %q, want the last one", got)
	}
}
