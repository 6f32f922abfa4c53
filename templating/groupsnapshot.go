package templating

import (
	"context"
	"fmt"

	groupsnapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	corev1 "k8s.io/api/core/v1"
)

var (
	groupSnapshotGVK = groupsnapshotv1.SchemeGroupVersion.WithKind("VolumeGroupSnapshot")
	groupContentGVK  = groupsnapshotv1.SchemeGroupVersion.WithKind("VolumeGroupSnapshotContent")
)

// GroupSnapshotRequest is what the group snapshot phases (PaV-Go
// additions) are evaluated for: one VolumeGroupSnapshotContent whose driver
// is the provisioner.
type GroupSnapshotRequest struct {
	Content *groupsnapshotv1.VolumeGroupSnapshotContent
	// GroupSnapshot is the VolumeGroupSnapshot the content is bound to, nil
	// if it is gone.
	GroupSnapshot *groupsnapshotv1.VolumeGroupSnapshot
	// ClassParameters: the VolumeGroupSnapshotClass's (reserved keys left
	// out, as for snapshots).
	ClassParameters map[string]string
	// PVs: the PV of each of GroupVolumeHandles(Content), nil where gone.
	PVs []*corev1.PersistentVolume
}

// GroupVolumeHandles are the handles of a group content's volumes: for a
// dynamic content its spec, else those its status recorded.
func GroupVolumeHandles(c *groupsnapshotv1.VolumeGroupSnapshotContent) []string {
	if hs := c.Spec.Source.VolumeHandles; len(hs) > 0 {
		return hs
	}
	var out []string
	if c.Status != nil {
		for _, i := range c.Status.VolumeSnapshotInfoList {
			out = append(out, i.VolumeHandle)
		}
	}
	return out
}

// GroupSnapshotHandles are the handles of a group content's members'
// snapshots: those its status recorded, else a pre-provisioned content's.
func GroupSnapshotHandles(c *groupsnapshotv1.VolumeGroupSnapshotContent) []string {
	var out []string
	if c.Status != nil {
		for _, i := range c.Status.VolumeSnapshotInfoList {
			out = append(out, i.SnapshotHandle)
		}
	}
	if len(out) == 0 && c.Spec.Source.GroupSnapshotHandles != nil {
		out = append(out, c.Spec.Source.GroupSnapshotHandles.VolumeSnapshotHandles...)
	}
	return out
}

// GroupHandle is a group content's handle ("" if none yet).
func GroupHandle(c *groupsnapshotv1.VolumeGroupSnapshotContent) string {
	if c.Status != nil && c.Status.VolumeGroupSnapshotHandle != nil {
		return *c.Status.VolumeGroupSnapshotHandle
	}
	if h := c.Spec.Source.GroupSnapshotHandles; h != nil {
		return h.VolumeGroupSnapshotHandle
	}
	return ""
}

// groupSnapshotVars is the context of both group snapshot phases:
// groupSnapshotContent, groupSnapshot, snapshotParams, handles (the
// volumes' handles), pvs (their PVs, none where gone), groupSnapshotHandle
// and snapshotHandles (none and [] before creation).
func groupSnapshotVars(r GroupSnapshotRequest) (map[string]interface{}, error) {
	if r.Content == nil {
		return nil, fmt.Errorf("no VolumeGroupSnapshotContent")
	}
	vars := map[string]interface{}{"groupSnapshot": nil, "groupSnapshotHandle": nil}
	var err error
	if vars["groupSnapshotContent"], err = toMap(r.Content, groupContentGVK); err != nil {
		return nil, err
	}
	if r.GroupSnapshot != nil {
		if vars["groupSnapshot"], err = toMap(r.GroupSnapshot, groupSnapshotGVK); err != nil {
			return nil, err
		}
	}
	vars["snapshotParams"] = snapshotParams(r.ClassParameters)
	handles := []interface{}{}
	for _, h := range GroupVolumeHandles(r.Content) {
		handles = append(handles, h)
	}
	vars["handles"] = handles
	pvs := []interface{}{}
	for _, pv := range r.PVs {
		if pv == nil {
			pvs = append(pvs, nil)
			continue
		}
		m, err := toMap(pv, pvGVK)
		if err != nil {
			return nil, err
		}
		pvs = append(pvs, m)
	}
	vars["pvs"] = pvs
	if h := GroupHandle(r.Content); h != "" {
		vars["groupSnapshotHandle"] = h
	}
	snaps := []interface{}{}
	for _, h := range GroupSnapshotHandles(r.Content) {
		snaps = append(snaps, h)
	}
	vars["snapshotHandles"] = snaps
	return vars, nil
}

// GroupSnapshotCreation evaluates spec.groupSnapshotCreation (a PaV-Go
// addition): ok is false if the provisioner has none (it cannot take group
// snapshots).
func (c *Compiled) GroupSnapshotCreation(ctx context.Context, r GroupSnapshotRequest, get PVCGetter) (cfg *PodConfig, ok bool, err error) {
	return optionalContentPhase(ctx, c, c.groupSnapshotCreation, groupSnapshotVars, r, get)
}

// GroupSnapshotDeletion evaluates spec.groupSnapshotDeletion (a PaV-Go
// addition); PodTemplate nil: no pod.
func (c *Compiled) GroupSnapshotDeletion(ctx context.Context, r GroupSnapshotRequest, get PVCGetter) (*PodConfig, error) {
	return contentPhase(ctx, c, c.groupSnapshotDeletion, groupSnapshotVars, r, get)
}
