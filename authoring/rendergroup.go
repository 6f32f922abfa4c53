package authoring

import (
	"errors"
	"fmt"

	groupsnapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/templating"
)

// groupSnapshot renders spec.groupSnapshotCreation or -Deletion.
func (r *renderer) groupSnapshot(phase protocol.Phase) (*rendered, error) {
	req, err := r.groupSnapshotRequest(phase)
	if err != nil {
		return nil, err
	}
	var cfg *templating.PodConfig
	if phase == protocol.PhaseGroupSnapshotCreation {
		var ok bool
		if cfg, ok, err = r.compiled.GroupSnapshotCreation(r.ctx, req, r.getPVC); err == nil && !ok {
			return nil, fmt.Errorf("PavProvisioner %s has no spec.groupSnapshotCreation", r.prov.Name)
		}
	} else {
		cfg, err = r.compiled.GroupSnapshotDeletion(r.ctx, req, r.getPVC)
	}
	if err != nil {
		return nil, errors.New(r.problems(err))
	}
	pod := func(b protocol.PodBase) (*corev1.Pod, error) {
		return protocol.GroupSnapshotPod(b.Template, b.Provisioner, b.Root, phase, req.Content.Name, string(req.Content.UID)), nil
	}
	return &rendered{section: cfg.Evaluated, podTemplate: cfg.PodTemplate, pod: pod}, nil
}

// groupSnapshotRequest is the group content of --objects (for creation, by
// default one of every volume of this provisioner in --pv and --objects),
// with its VolumeGroupSnapshot, class parameters and volumes from --objects.
func (r *renderer) groupSnapshotRequest(phase protocol.Phase) (templating.GroupSnapshotRequest, error) {
	var req templating.GroupSnapshotRequest
	switch n := len(r.w.groupContents); {
	case n == 1:
		req.Content = r.w.groupContents[0]
	case n > 1:
		return req, fmt.Errorf("phase %s: want at most one VolumeGroupSnapshotContent in --objects, found %d", phase, n)
	case phase == protocol.PhaseGroupSnapshotDeletion:
		return req, fmt.Errorf("phase %s needs a VolumeGroupSnapshotContent (with its group snapshot handle) in --objects", phase)
	default:
		handles := r.groupVolumeHandles()
		if len(handles) == 0 {
			return req, fmt.Errorf("phase %s needs a VolumeGroupSnapshotContent in --objects, or the group's PersistentVolumes of driver %s (--pv, --objects)", phase, r.prov.Name)
		}
		req.Content = defaultGroupContent(handles, r.prov.Name)
	}
	if phase == protocol.PhaseGroupSnapshotDeletion && templating.GroupHandle(req.Content) == "" {
		return req, fmt.Errorf("phase %s: VolumeGroupSnapshotContent %s has no group snapshot handle (status.volumeGroupSnapshotHandle or spec.source.groupSnapshotHandles)", phase, req.Content.Name)
	}
	req.GroupSnapshot, req.ClassParameters = r.w.groupSnapshotOf(req.Content)
	for _, h := range templating.GroupVolumeHandles(req.Content) {
		pv := r.w.volumeWithHandle(h)
		if pv == nil && r.pv != nil && r.pv.Spec.CSI != nil && r.pv.Spec.CSI.VolumeHandle == h {
			pv = r.pv
		}
		req.PVs = append(req.PVs, pv)
	}
	return req, nil
}

// groupVolumeHandles are the handles of the volumes of this provisioner in
// --pv and --objects, in that order, each once.
func (r *renderer) groupVolumeHandles() []string {
	var handles []string
	seen := map[string]bool{}
	for _, pv := range append([]*corev1.PersistentVolume{r.pv}, r.w.pvs...) {
		if pv == nil || pv.Spec.CSI == nil || pv.Spec.CSI.Driver != r.prov.Name || seen[pv.Spec.CSI.VolumeHandle] {
			continue
		}
		seen[pv.Spec.CSI.VolumeHandle] = true
		handles = append(handles, pv.Spec.CSI.VolumeHandle)
	}
	return handles
}

// defaultGroupContent is the content the snapshot-controller makes for a
// VolumeGroupSnapshot "group-snapshot" of the volumes with handles.
func defaultGroupContent(handles []string, driver string) *groupsnapshotv1.VolumeGroupSnapshotContent {
	return &groupsnapshotv1.VolumeGroupSnapshotContent{
		TypeMeta:   metav1.TypeMeta{APIVersion: groupsnapshotv1.SchemeGroupVersion.String(), Kind: "VolumeGroupSnapshotContent"},
		ObjectMeta: metav1.ObjectMeta{Name: "groupsnapcontent-" + string(fakeUID("VolumeGroupSnapshot/group-snapshot")), UID: fakeUID("VolumeGroupSnapshotContent/group-snapshot")},
		Spec: groupsnapshotv1.VolumeGroupSnapshotContentSpec{
			Driver: driver, DeletionPolicy: snapshotv1.VolumeSnapshotContentDelete,
			Source: groupsnapshotv1.VolumeGroupSnapshotContentSource{VolumeHandles: handles},
			VolumeGroupSnapshotRef: corev1.ObjectReference{Namespace: metav1.NamespaceDefault, Name: "group-snapshot",
				UID: fakeUID("VolumeGroupSnapshot/group-snapshot")},
		},
	}
}

// groupSnapshotOf is the VolumeGroupSnapshot and the class parameters of
// content, from --objects.
func (w *renderWorld) groupSnapshotOf(content *groupsnapshotv1.VolumeGroupSnapshotContent) (*groupsnapshotv1.VolumeGroupSnapshot, map[string]string) {
	var group *groupsnapshotv1.VolumeGroupSnapshot
	var params map[string]string
	ref := content.Spec.VolumeGroupSnapshotRef
	for _, g := range w.groupSnapshots {
		if g.Name == ref.Name && (g.Namespace == ref.Namespace || g.Namespace == "" && ref.Namespace == metav1.NamespaceDefault) {
			group = g
		}
	}
	if n := content.Spec.VolumeGroupSnapshotClassName; n != nil {
		for _, c := range w.groupClasses {
			if c.Name == *n {
				params = c.Parameters
			}
		}
	}
	return group, params
}
