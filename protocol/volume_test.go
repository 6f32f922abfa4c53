package protocol

import (
	"strings"
	"testing"

	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
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

func TestClassSnapshotLeavesOutSecretReferences(t *testing.T) {
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "sc", UID: "u1"}, Provisioner: "p",
		Parameters: map[string]string{"path": "/data",
			"csi.storage.k8s.io/provisioner-secret-name":       "creds",
			"csi.storage.k8s.io/node-publish-secret-namespace": "vault"}}
	raw, err := ClassSnapshot(sc)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(raw, "csi.storage.k8s.io") || strings.Contains(raw, "creds") || !strings.Contains(raw, `"path":"/data"`) {
		t.Errorf("snapshot %s", raw)
	}
	if len(sc.Parameters) != 3 {
		t.Error("the class itself was changed")
	}
	snap := &storagev1.StorageClass{}
	if err := json.Unmarshal([]byte(raw), snap); err != nil {
		t.Fatal(err)
	}
	if got := RestoreReservedParameters(snap, sc); len(got.Parameters) != 3 || got.Parameters["csi.storage.k8s.io/provisioner-secret-name"] != "creds" {
		t.Errorf("restored from the same class: %v", got.Parameters)
	}
	other := sc.DeepCopy()
	other.UID = "u2"
	for name, live := range map[string]*storagev1.StorageClass{"class gone": nil, "another class of that name": other} {
		if got := RestoreReservedParameters(snap, live); len(got.Parameters) != 1 {
			t.Errorf("%s: %v", name, got.Parameters)
		}
	}
}

// A claim is for its class's provisioner, whatever the PV controller's
// annotations say; without a class, for the one they name (beta last).
func TestClaimProvisioner(t *testing.T) {
	annotated := func(ann map[string]string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Annotations: ann}}
	}
	class := &storagev1.StorageClass{Provisioner: "by-class"}
	for _, tc := range []struct {
		name  string
		pvc   *corev1.PersistentVolumeClaim
		class *storagev1.StorageClass
		want  string
	}{
		{"class first", annotated(map[string]string{AnnotationStorageProvisioner: "by-annotation"}), class, "by-class"},
		{"annotation without a class", annotated(map[string]string{AnnotationStorageProvisioner: "by-annotation", AnnotationBetaStorageProvisioner: "beta"}), nil, "by-annotation"},
		{"beta annotation", annotated(map[string]string{AnnotationBetaStorageProvisioner: "beta"}), nil, "beta"},
		{"none", annotated(nil), nil, ""},
	} {
		if got := ClaimProvisioner(tc.pvc, tc.class); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
