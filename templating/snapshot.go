package templating

import (
	"context"
	"fmt"
	"strings"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
)

var (
	snapshotGVK = snapshotv1.SchemeGroupVersion.WithKind("VolumeSnapshot")
	contentGVK  = snapshotv1.SchemeGroupVersion.WithKind("VolumeSnapshotContent")
)

// SnapshotRequest is what the snapshot phases (PaV-Go additions) are
// evaluated for: one VolumeSnapshotContent whose driver is the provisioner.
type SnapshotRequest struct {
	Content *snapshotv1.VolumeSnapshotContent
	// Snapshot is the VolumeSnapshot the content is bound to, nil if it is
	// gone (templates see none).
	Snapshot *snapshotv1.VolumeSnapshot
	// ClassParameters are the VolumeSnapshotClass's parameters (nil if the
	// content names no class or it is gone); keys with external-snapshotter's
	// reserved prefix csi.storage.k8s.io/ are left out, as csi-snapshotter
	// leaves them out of CreateSnapshot.
	ClassParameters map[string]string
	// PV and PVC: the volume the snapshot is taken of, and its claim, for
	// creation (nil if gone: templates see none).
	PV  *corev1.PersistentVolume
	PVC *corev1.PersistentVolumeClaim
}

// reservedSnapshotParamPrefix begins the class parameters external-snapshotter
// reads itself (secrets' names).
const reservedSnapshotParamPrefix = "csi.storage.k8s.io/"

// snapshotParams are a snapshot or group snapshot class's parameters as
// templates see them: without the reserved ones.
func snapshotParams(class map[string]string) map[string]interface{} {
	params := map[string]interface{}{}
	for k, v := range class {
		if !strings.HasPrefix(k, reservedSnapshotParamPrefix) {
			params[k] = v
		}
	}
	return params
}

// snapshotVars is the context of both snapshot phases: snapshotContent,
// snapshot, snapshotParams, handle (the volume's handle, none for a
// pre-provisioned content) and snapshotHandle (none before creation).
func snapshotVars(r SnapshotRequest) (map[string]interface{}, error) {
	if r.Content == nil {
		return nil, fmt.Errorf("no VolumeSnapshotContent")
	}
	vars := map[string]interface{}{"snapshot": nil, "handle": nil, "snapshotHandle": nil, "pv": nil, "pvc": nil}
	var err error
	if vars["snapshotContent"], err = toMap(r.Content, contentGVK); err != nil {
		return nil, err
	}
	if r.Snapshot != nil {
		if vars["snapshot"], err = toMap(r.Snapshot, snapshotGVK); err != nil {
			return nil, err
		}
	}
	vars["snapshotParams"] = snapshotParams(r.ClassParameters)
	if h := r.Content.Spec.Source.VolumeHandle; h != nil {
		vars["handle"] = *h
	}
	if h := SnapshotHandle(r.Content); h != "" {
		vars["snapshotHandle"] = h
	}
	vars["params"] = map[string]interface{}{}
	if r.PV != nil {
		if vars["pv"], err = toMap(r.PV, pvGVK); err != nil {
			return nil, err
		}
		if csi := r.PV.Spec.CSI; csi != nil {
			vars["params"] = stringMap(csi.VolumeAttributes)
		}
	}
	if r.PVC != nil {
		if vars["pvc"], err = toMap(r.PVC, pvcGVK); err != nil {
			return nil, err
		}
	}
	return vars, nil
}

// SnapshotHandle is a content's snapshot handle: a pre-provisioned one's
// spec.source.snapshotHandle, else what its status recorded ("" if none).
func SnapshotHandle(c *snapshotv1.VolumeSnapshotContent) string {
	if h := c.Spec.Source.SnapshotHandle; h != nil {
		return *h
	}
	if c.Status != nil && c.Status.SnapshotHandle != nil {
		return *c.Status.SnapshotHandle
	}
	return ""
}

// SnapshotCreation evaluates spec.snapshotCreation for taking the snapshot
// of r.Content (a PaV-Go addition): ok is false if the provisioner has no
// snapshotCreation section (it cannot take snapshots).
func (c *Compiled) SnapshotCreation(ctx context.Context, r SnapshotRequest, get PVCGetter) (cfg *PodConfig, ok bool, err error) {
	return optionalContentPhase(ctx, c, c.snapshotCreation, snapshotVars, r, get)
}

// SnapshotDeletion evaluates spec.snapshotDeletion for deleting the
// snapshot of r.Content (a PaV-Go addition); PodTemplate nil: no pod.
func (c *Compiled) SnapshotDeletion(ctx context.Context, r SnapshotRequest, get PVCGetter) (*PodConfig, error) {
	return contentPhase(ctx, c, c.snapshotDeletion, snapshotVars, r, get)
}

// contentPhase evaluates section s of a snapshot or group snapshot phase
// for request r, whose context varsOf gives.
func contentPhase[R any](ctx context.Context, c *Compiled, s *section, varsOf func(R) (map[string]interface{}, error), r R, get PVCGetter) (*PodConfig, error) {
	vars, err := varsOf(r)
	if err != nil {
		return nil, err
	}
	raw, v, err := c.evaluate(ctx, s, vars, get)
	if err != nil {
		return nil, err
	}
	return &PodConfig{PodTemplate: v.PodTemplate, Evaluated: raw}, nil
}

// optionalContentPhase is contentPhase for a section the provisioner may
// leave out (nil): ok is false then.
func optionalContentPhase[R any](ctx context.Context, c *Compiled, s *section, varsOf func(R) (map[string]interface{}, error), r R, get PVCGetter) (cfg *PodConfig, ok bool, err error) {
	if s == nil {
		return nil, false, nil
	}
	cfg, err = contentPhase(ctx, c, s, varsOf, r, get)
	return cfg, true, err
}
