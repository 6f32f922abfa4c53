package controller

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/kubeclient"
	"github.com/albertofaria/pav/templating"
)

// annAllowVolumeModeChange on a VolumeSnapshotContent lets claims of another
// volume mode than the snapshot's source restore it. external-provisioner
// (--prevent-volume-mode-conversion, on by default) refuses them otherwise:
// a Filesystem snapshot restored as a Block volume hands its raw blocks to
// whoever may create claims, and the reverse makes the kernel mount blocks
// the user wrote.
const annAllowVolumeModeChange = "snapshot.storage.kubernetes.io/allow-volume-mode-change"

// SnapshotReader reads what a restore is made from: the API server's
// objects in the controller, those given to pav render offline.
type SnapshotReader interface {
	VolumeSnapshot(ctx context.Context, namespace, name string) (*snapshotv1.VolumeSnapshot, error)
	VolumeSnapshotContent(ctx context.Context, name string) (*snapshotv1.VolumeSnapshotContent, error)
}

// apiSnapshots is SnapshotReader over the API server (not a cache: a
// restore must not start from a snapshot that was just deleted).
type apiSnapshots struct{ api kubeclient.SnapshotInterface }

func (a apiSnapshots) VolumeSnapshot(ctx context.Context, namespace, name string) (*snapshotv1.VolumeSnapshot, error) {
	return a.api.SnapshotV1().VolumeSnapshots(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (a apiSnapshots) VolumeSnapshotContent(ctx context.Context, name string) (*snapshotv1.VolumeSnapshotContent, error) {
	return a.api.SnapshotV1().VolumeSnapshotContents().Get(ctx, name, metav1.GetOptions{})
}

// snapshotSource is the claim's data source if it names a VolumeSnapshot.
func snapshotSource(pvc *corev1.PersistentVolumeClaim) *corev1.TypedObjectReference {
	ref := dataSourceRef(pvc)
	if ref == nil || ref.APIGroup == nil || *ref.APIGroup != snapshotv1.GroupName || ref.Kind != "VolumeSnapshot" {
		return nil
	}
	return ref
}

// RestoreProblem says why a claim cannot be restored from its VolumeSnapshot
// now; Retry whether that may pass by itself (the snapshot is not ready yet,
// the content may get the annotation) rather than need a new claim.
type RestoreProblem struct {
	Message string
	Retry   bool
}

// Restore resolves the VolumeSnapshot a claim of provisioner p is restored
// from (its data source) into req.SourceSnapshot and req.SourceContent: the
// one rule of what validation and creation see when restoring, for the
// controller and for pav render. A claim whose data source is no
// VolumeSnapshot leaves req as it is; read nil means VolumeSnapshots cannot
// be read at all.
func Restore(ctx context.Context, p *v1alpha1.PavProvisioner, read SnapshotReader, req *templating.DynamicRequest) *RestoreProblem {
	ref := snapshotSource(req.PVC)
	if ref == nil {
		return nil
	}
	refuse := func(format string, args ...interface{}) *RestoreProblem {
		return &RestoreProblem{Message: fmt.Sprintf(format, args...)}
	}
	wait := func(format string, args ...interface{}) *RestoreProblem {
		return &RestoreProblem{Message: fmt.Sprintf(format, args...), Retry: true}
	}
	switch {
	case ref.Namespace != nil && *ref.Namespace != "" && *ref.Namespace != req.PVC.Namespace:
		return refuse("cannot restore VolumeSnapshot %s/%s: the snapshot must be in the claim's own namespace", *ref.Namespace, ref.Name)
	case p.Spec.VolumeCreation == nil || !p.Spec.VolumeCreation.Restoring:
		return refuse("PavProvisioner %q cannot restore snapshots (its spec.volumeCreation.restoring is not true)", p.Name)
	case read == nil:
		return refuse("this PaV controller does not handle VolumeSnapshots (it runs without the snapshot API)")
	}
	snap, err := read.VolumeSnapshot(ctx, req.PVC.Namespace, ref.Name)
	if err != nil {
		return wait("the VolumeSnapshot %q to restore: %v", ref.Name, err)
	}
	if snap.DeletionTimestamp != nil {
		return wait("the VolumeSnapshot %q to restore is being deleted", ref.Name)
	}
	st := snap.Status
	if st == nil || st.BoundVolumeSnapshotContentName == nil || st.ReadyToUse == nil || !*st.ReadyToUse {
		return wait("the VolumeSnapshot %q to restore is not ready to use yet", ref.Name)
	}
	content, err := read.VolumeSnapshotContent(ctx, *st.BoundVolumeSnapshotContentName)
	if err != nil {
		return wait("the VolumeSnapshotContent %q of VolumeSnapshot %q: %v", *st.BoundVolumeSnapshotContentName, ref.Name, err)
	}
	if problem := checkRestore(p.Name, req.PVC, snap, content); problem != nil {
		return problem
	}
	req.SourceSnapshot, req.SourceContent = snap, content
	return nil
}

// checkRestore is what external-provisioner checks of a ready snapshot and
// its content before it restores them into a claim (getSnapshotSource):
// they are bound to each other, the content is of this provisioner and has
// a handle, the claim is at least the snapshot's restore size where that is
// known, and the claim keeps the source's volume mode unless the content
// allows a change.
func checkRestore(provisioner string, pvc *corev1.PersistentVolumeClaim, snap *snapshotv1.VolumeSnapshot, content *snapshotv1.VolumeSnapshotContent) *RestoreProblem {
	ref := content.Spec.VolumeSnapshotRef
	switch {
	case ref.UID != snap.UID || ref.Name != snap.Name || ref.Namespace != snap.Namespace:
		return &RestoreProblem{Retry: true, Message: fmt.Sprintf("the VolumeSnapshotContent %q is not bound to VolumeSnapshot %q", content.Name, snap.Name)}
	case content.Spec.Driver != provisioner:
		return &RestoreProblem{Message: fmt.Sprintf("VolumeSnapshot %q is a snapshot of driver %q, not of PavProvisioner %q, so it cannot restore it", snap.Name, content.Spec.Driver, provisioner)}
	case templating.SnapshotHandle(content) == "":
		return &RestoreProblem{Retry: true, Message: fmt.Sprintf("the VolumeSnapshotContent %q of VolumeSnapshot %q has no snapshot handle yet", content.Name, snap.Name)}
	}
	requested := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if size := restoreSize(snap, content); requested.Value() < size {
		return &RestoreProblem{Message: fmt.Sprintf("the claim requests %s (%d bytes), less than the restore size of VolumeSnapshot %q (%d bytes): a volume restored from a snapshot must be at least as large as the snapshot",
			requested.String(), requested.Value(), snap.Name, size)}
	}
	from, to := content.Spec.SourceVolumeMode, pvc.Spec.VolumeMode
	if from == nil || to == nil || *from == *to {
		return nil
	}
	// The annotation can be added later: retry.
	raw, ok := content.Annotations[annAllowVolumeModeChange]
	allowed, err := strconv.ParseBool(raw)
	switch {
	case !ok:
		return &RestoreProblem{Retry: true, Message: fmt.Sprintf("the claim's volumeMode %s differs from volumeMode %s of the volume VolumeSnapshot %q was taken from; restoring it into another mode needs annotation %s: \"true\" on its VolumeSnapshotContent %q (set by a cluster administrator)",
			*to, *from, snap.Name, annAllowVolumeModeChange, content.Name)}
	case err != nil:
		return &RestoreProblem{Retry: true, Message: fmt.Sprintf("the claim's volumeMode %s differs from volumeMode %s of the volume VolumeSnapshot %q was taken from, and annotation %s of VolumeSnapshotContent %q is not a boolean: %q",
			*to, *from, snap.Name, annAllowVolumeModeChange, content.Name, raw)}
	case !allowed:
		return &RestoreProblem{Retry: true, Message: fmt.Sprintf("the claim's volumeMode %s differs from volumeMode %s of the volume VolumeSnapshot %q was taken from, and VolumeSnapshotContent %q forbids the change (annotation %s: %q)",
			*to, *from, snap.Name, content.Name, annAllowVolumeModeChange, raw)}
	}
	return nil
}

// restoreSize is the smallest volume a snapshot restores into, in bytes: the
// larger of its content's status.restoreSize (which PaV writes) and the
// VolumeSnapshot's (the snapshot-controller's copy, which external-provisioner
// reads); 0 when unknown, as for a pre-provisioned snapshot.
func restoreSize(snap *snapshotv1.VolumeSnapshot, content *snapshotv1.VolumeSnapshotContent) int64 {
	var size int64
	if st := content.Status; st != nil && st.RestoreSize != nil {
		size = *st.RestoreSize
	}
	if st := snap.Status; st != nil && st.RestoreSize != nil && st.RestoreSize.Value() > size {
		size = st.RestoreSize.Value()
	}
	return size
}

// restoreSource resolves the claim's VolumeSnapshot into s.sourceSnapshot
// and s.sourceContent (Restore); problem and retry as in resolveDataSource.
func (s *claimSync) restoreSource() (problem string, retry bool) {
	var read SnapshotReader
	if s.c.snapshots != nil {
		read = apiSnapshots{s.c.snapshots}
	}
	req := s.request()
	if p := Restore(s.ctx, s.p, read, &req); p != nil {
		return p.Message, p.Retry
	}
	s.sourceSnapshot, s.sourceContent = req.SourceSnapshot, req.SourceContent
	return "", false
}
