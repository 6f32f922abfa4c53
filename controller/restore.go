package controller

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// restoreSource resolves the VolumeSnapshot a claim is restored from (its
// data source) into s.sourceSnapshot and s.sourceContent, with the checks
// external-provisioner makes before it restores: the snapshot is in the
// claim's namespace, ready, bound to a content of this provisioner, and its
// restore size fits the claim. problem and retry as in cloneSource.
func (s *claimSync) restoreSource(ref *corev1.TypedObjectReference) (problem string, retry bool) {
	switch {
	case ref.Namespace != nil && *ref.Namespace != "" && *ref.Namespace != s.pvc.Namespace:
		return fmt.Sprintf("cannot restore VolumeSnapshot %s/%s: the snapshot must be in the claim's own namespace", *ref.Namespace, ref.Name), false
	case s.p.Spec.VolumeCreation == nil || !s.p.Spec.VolumeCreation.Restoring:
		return fmt.Sprintf("PavProvisioner %q cannot restore snapshots (its spec.volumeCreation.restoring is not true)", s.p.Name), false
	case s.c.snapshots == nil:
		return "this PaV controller does not handle VolumeSnapshots (it runs without the snapshot API)", false
	}
	api := s.c.snapshots.SnapshotV1()
	snap, err := api.VolumeSnapshots(s.pvc.Namespace).Get(s.ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Sprintf("the VolumeSnapshot %q to restore: %v", ref.Name, err), true
	}
	if snap.DeletionTimestamp != nil {
		return fmt.Sprintf("the VolumeSnapshot %q to restore is being deleted", ref.Name), true
	}
	st := snap.Status
	if st == nil || st.BoundVolumeSnapshotContentName == nil || st.ReadyToUse == nil || !*st.ReadyToUse {
		return fmt.Sprintf("the VolumeSnapshot %q to restore is not ready to use yet", ref.Name), true
	}
	content, err := api.VolumeSnapshotContents().Get(s.ctx, *st.BoundVolumeSnapshotContentName, metav1.GetOptions{})
	if err != nil {
		return fmt.Sprintf("the VolumeSnapshotContent %q of VolumeSnapshot %q: %v", *st.BoundVolumeSnapshotContentName, ref.Name, err), true
	}
	if content.Spec.VolumeSnapshotRef.UID != snap.UID || content.Spec.VolumeSnapshotRef.Name != snap.Name || content.Spec.VolumeSnapshotRef.Namespace != snap.Namespace {
		return fmt.Sprintf("the VolumeSnapshotContent %q is not bound to VolumeSnapshot %q", content.Name, ref.Name), true
	}
	if content.Spec.Driver != s.p.Name {
		return fmt.Sprintf("VolumeSnapshot %q is a snapshot of driver %q, not of PavProvisioner %q, so it cannot restore it", ref.Name, content.Spec.Driver, s.p.Name), false
	}
	if rs := content.Status; rs != nil && rs.RestoreSize != nil {
		requested := s.pvc.Spec.Resources.Requests[corev1.ResourceStorage]
		if requested.Value() < *rs.RestoreSize {
			return fmt.Sprintf("the claim requests %s, less than the restore size of VolumeSnapshot %q (%d bytes)", requested.String(), ref.Name, *rs.RestoreSize), false
		}
	}
	s.sourceSnapshot, s.sourceContent = snap, content
	return "", false
}
