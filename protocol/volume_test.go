package protocol

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSnapshotsLeaveOutWhatIsNotTheObject(t *testing.T) {
	meta := metav1.ObjectMeta{
		Name:          "x",
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
		Annotations: map[string]string{
			corev1.LastAppliedConfigAnnotation: "{huge}",
			AnnotationClaimSnapshot:            "{claim}",
			"keep":                             "me",
		},
	}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: *meta.DeepCopy()}
	claim, err := ClaimSnapshot(pvc)
	if err != nil {
		t.Fatal(err)
	}
	pv := &corev1.PersistentVolume{ObjectMeta: *meta.DeepCopy()}
	volume, err := VolumeSnapshot(pv)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ snap, kind string }{{claim, `"kind":"PersistentVolumeClaim","apiVersion":"v1"`}, {volume, `"kind":"PersistentVolume","apiVersion":"v1"`}} {
		if !strings.Contains(c.snap, c.kind) || !strings.Contains(c.snap, `"keep":"me"`) || strings.Contains(c.snap, "kubectl") || strings.Contains(c.snap, "{huge}") {
			t.Errorf("snapshot %s", c.snap)
		}
	}
	if !strings.Contains(claim, "{claim}") || strings.Contains(volume, "{claim}") {
		t.Errorf("a claim keeps its annotations, a PV drops the snapshots it carries:\n%s\n%s", claim, volume)
	}
	if len(pvc.ManagedFields) != 1 || len(pv.Annotations) != 3 {
		t.Error("the object itself was changed")
	}
}
