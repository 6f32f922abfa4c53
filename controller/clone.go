package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/albertofaria/pav/protocol"
)

// Cloning protection, as external-provisioner's: while PaV provisions a
// clone, its source claim carries the clone's finalizer
// (protocol.CloneFinalizer), so that neither the source nor its volume goes
// while a pod may be copying it. The clone adds it, after its own
// FinalizerClaim, before its first pod; the source's own sync removes it
// once the clone no longer holds FinalizerClaim (provisioned, given up,
// deleted, gone), and the clone removes it when it cannot start an attempt.
// Seeing the finalizer in the cache means seeing the clone's FinalizerClaim
// too (both are claims, written in that order, on one watch), so the
// source's sync never takes a clone that has just begun for one that is done.

// dataSourceRef is the claim's data source (dataSourceRef, else dataSource).
func dataSourceRef(pvc *corev1.PersistentVolumeClaim) *corev1.TypedObjectReference {
	if ref := pvc.Spec.DataSourceRef; ref != nil {
		return ref
	}
	if ds := pvc.Spec.DataSource; ds != nil {
		return &corev1.TypedObjectReference{APIGroup: ds.APIGroup, Kind: ds.Kind, Name: ds.Name}
	}
	return nil
}

// populatorSource is the claim's data source if it is neither a claim
// (cloning) nor a VolumeSnapshot (restoring): a volume populator's.
func populatorSource(pvc *corev1.PersistentVolumeClaim) *corev1.TypedObjectReference {
	ref := dataSourceRef(pvc)
	if ref == nil || snapshotSource(pvc) != nil || ((ref.APIGroup == nil || *ref.APIGroup == "") && ref.Kind == "PersistentVolumeClaim") {
		return nil
	}
	return ref
}

// cloneSourceName is the name of the claim, in its own namespace, that pvc
// is a clone of; "" if none.
func cloneSourceName(pvc *corev1.PersistentVolumeClaim) string {
	ref := dataSourceRef(pvc)
	if ref == nil || (ref.APIGroup != nil && *ref.APIGroup != "") || ref.Kind != "PersistentVolumeClaim" ||
		(ref.Namespace != nil && *ref.Namespace != "" && *ref.Namespace != pvc.Namespace) {
		return ""
	}
	return ref.Name
}

// protectSource puts the clone's finalizer on its source claim (s.source),
// after making sure the clone holds FinalizerClaim.
func (s *claimSync) protectSource(ctx context.Context) error {
	if err := s.addFinalizer(ctx); err != nil {
		return err
	}
	updated, err := protocol.AddFinalizer(ctx, s.c.kube.CoreV1().PersistentVolumeClaims(s.source.Namespace).Patch, s.source, protocol.CloneFinalizer(string(s.pvc.UID)))
	if err != nil {
		return fmt.Errorf("protecting the claim to clone from deletion: %w", err)
	}
	if updated != nil {
		s.source = updated
	}
	return nil
}

// releaseSource removes the clone's finalizer from its source claim, if
// there: the clone cannot start an attempt now, and the source must not
// wait for it (e.g. the source is being deleted).
func (s *claimSync) releaseSource(ctx context.Context) error {
	name := cloneSourceName(s.pvc)
	if name == "" {
		return nil
	}
	src, err := s.c.claims.PersistentVolumeClaims(s.pvc.Namespace).Get(name)
	if err != nil {
		return nil // gone, or never there
	}
	_, err = protocol.RemoveFinalizer(ctx, s.c.kube.CoreV1().PersistentVolumeClaims(src.Namespace).Patch, src, protocol.CloneFinalizer(string(s.pvc.UID)))
	return err
}

// releaseClones removes from a source claim the finalizers of clones that
// are no longer provisioned; wrote says whether it changed the claim.
func (c *Controller) releaseClones(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (wrote bool, err error) {
	for _, f := range pvc.Finalizers {
		uid, ok := protocol.CloneOf(f)
		if !ok || c.cloning(pvc, uid) {
			continue
		}
		updated, err := protocol.RemoveFinalizer(ctx, c.kube.CoreV1().PersistentVolumeClaims(pvc.Namespace).Patch, pvc, f)
		if err != nil {
			return wrote, err
		}
		klog.V(2).InfoS("Clone no longer holds its source", "claim", klog.KObj(pvc), "clone", uid)
		wrote = true
		if updated == nil {
			return wrote, nil // the claim is gone
		}
		pvc = updated
	}
	return wrote, nil
}

// cloning reports whether the claim of UID uid is a clone of source that
// PaV is still provisioning (it holds FinalizerClaim).
func (c *Controller) cloning(source *corev1.PersistentVolumeClaim, uid string) bool {
	claims, err := c.claims.PersistentVolumeClaims(source.Namespace).List(everything)
	if err != nil {
		return true // keep it; the next sync looks again
	}
	for _, pvc := range claims {
		if string(pvc.UID) == uid {
			return protocol.HasFinalizer(pvc, protocol.FinalizerClaim) && cloneSourceName(pvc) == source.Name
		}
	}
	return false
}

// checkClone is what external-provisioner checks of a clone's bound source
// claim and its volume before it clones them (getPVCSource): the volume is
// bound to that claim, both claims are of one StorageClass, the clone is at
// least the source's size, and both have the same volume mode. problem says
// why not; retry whether that may pass by itself.
func checkClone(pvc, src *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) (problem string, retry bool) {
	if ref := pv.Spec.ClaimRef; ref == nil || ref.UID != src.UID || ref.Namespace != src.Namespace || ref.Name != src.Name {
		return fmt.Sprintf("the volume %q of the claim %q to clone is not bound to that claim", pv.Name, src.Name), true
	}
	if from, to := ptrString(src.Spec.StorageClassName), ptrString(pvc.Spec.StorageClassName); from != to {
		return fmt.Sprintf("the claim %q to clone is of StorageClass %q, the clone of %q: a clone must be of its source's StorageClass", src.Name, from, to), false
	}
	requested := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	size := src.Status.Capacity[corev1.ResourceStorage]
	if requested.Value() < size.Value() {
		return fmt.Sprintf("the claim requests %s (%d bytes), less than the size of the claim %q to clone (%s, %d bytes): a clone must be at least as large as its source",
			requested.String(), requested.Value(), src.Name, size.String(), size.Value()), false
	}
	mode := func(m *corev1.PersistentVolumeMode) corev1.PersistentVolumeMode {
		if m == nil {
			return corev1.PersistentVolumeFilesystem
		}
		return *m
	}
	if from, to := mode(pv.Spec.VolumeMode), mode(pvc.Spec.VolumeMode); from != to {
		return fmt.Sprintf("the claim's volumeMode %s differs from volumeMode %s of the claim %q to clone: a clone must have its source's volume mode", to, from, src.Name), false
	}
	return "", false
}

// resolveDataSource resolves the claim's data source: the claim a clone is
// made from into s.source and s.sourcePV, a VolumeSnapshot to restore with
// restoreSource. problem says why the claim cannot be provisioned now, and
// retry whether that may pass by itself (the source is not bound yet)
// rather than need a change of the claim or provisioner.
func (s *claimSync) resolveDataSource() (problem string, retry bool) {
	ref := dataSourceRef(s.pvc)
	switch {
	case ref == nil:
		return "", false
	case snapshotSource(s.pvc) != nil:
		return s.restoreSource()
	case populatorSource(s.pvc) != nil:
		return "", false // not a clone: decideProvision leaves it to its populator
	case ref.Namespace != nil && *ref.Namespace != "" && *ref.Namespace != s.pvc.Namespace:
		return fmt.Sprintf("cannot clone claim %s/%s: a clone's source must be in the claim's own namespace", *ref.Namespace, ref.Name), false
	case s.p.Spec.VolumeCreation == nil || !s.p.Spec.VolumeCreation.Cloning:
		return fmt.Sprintf("PavProvisioner %q cannot clone volumes (its spec.volumeCreation.cloning is not true)", s.p.Name), false
	}
	src, err := s.c.claims.PersistentVolumeClaims(s.pvc.Namespace).Get(ref.Name)
	if err != nil {
		return fmt.Sprintf("the claim %q to clone: %v", ref.Name, err), true
	}
	if src.Status.Phase != corev1.ClaimBound || src.Spec.VolumeName == "" {
		return fmt.Sprintf("the claim %q to clone is not bound to a volume yet", ref.Name), true
	}
	pv, err := s.c.volumes.Get(src.Spec.VolumeName)
	if err != nil {
		return fmt.Sprintf("the volume %q of the claim %q to clone: %v", src.Spec.VolumeName, ref.Name, err), true
	}
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != s.p.Name {
		return fmt.Sprintf("claim %q is not a volume of PavProvisioner %q, so it cannot clone it", ref.Name, s.p.Name), false
	}
	if problem, retry := checkClone(s.pvc, src, pv); problem != "" {
		return problem, retry
	}
	s.source, s.sourcePV = src, pv
	if src.DeletionTimestamp != nil {
		// An attempt in progress keeps it (it holds the clone's finalizer); a new one may not start.
		return fmt.Sprintf("the claim %q to clone is being deleted", ref.Name), true
	}
	return "", false
}
