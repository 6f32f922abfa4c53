package controller

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/templating"
)

// checkCapacity enforces the protocol: protocol.CheckCapacity, never
// smaller than requested, and not above the claim's limit when it has one.
func checkCapacity(capacity resource.Quantity, pvc *corev1.PersistentVolumeClaim) error {
	if err := protocol.CheckCapacity(capacity); err != nil {
		return err
	}
	if req, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; ok && capacity.Cmp(req) < 0 {
		return fmt.Errorf("the volume's capacity %s is less than the %s the claim requests", capacity.String(), req.String())
	}
	if lim, ok := pvc.Spec.Resources.Limits[corev1.ResourceStorage]; ok && capacity.Cmp(lim) > 0 {
		return fmt.Errorf("the volume's capacity %s exceeds the claim's limit of %s", capacity.String(), lim.String())
	}
	return nil
}

// restoreClass is a class read from a snapshot with the parameters its
// snapshot left out (protocol.RestoreReservedParameters), while it exists.
func (c *Controller) restoreClass(snap *storagev1.StorageClass) *storagev1.StorageClass {
	live, _ := c.classes.Get(snap.Name)
	return protocol.RestoreReservedParameters(snap, live)
}

// requestFromVolume rebuilds a deletion request from what the PV stored
// (the class without its reserved parameters: see Controller.restoreClass).
func requestFromVolume(pv *corev1.PersistentVolume) (templating.DynamicRequest, error) {
	var req templating.DynamicRequest
	pvcJSON, ok := pv.Annotations[protocol.AnnotationClaimSnapshot]
	if !ok {
		return req, fmt.Errorf("PersistentVolume %s has no %s annotation", pv.Name, protocol.AnnotationClaimSnapshot)
	}
	scJSON, ok := pv.Annotations[protocol.AnnotationClassSnapshot]
	if !ok {
		return req, fmt.Errorf("PersistentVolume %s has no %s annotation", pv.Name, protocol.AnnotationClassSnapshot)
	}
	req.PVC = &corev1.PersistentVolumeClaim{}
	if err := json.Unmarshal([]byte(pvcJSON), req.PVC); err != nil {
		return req, fmt.Errorf("decoding annotation %s of PersistentVolume %s: %w", protocol.AnnotationClaimSnapshot, pv.Name, err)
	}
	req.Class = &storagev1.StorageClass{}
	if err := json.Unmarshal([]byte(scJSON), req.Class); err != nil {
		return req, fmt.Errorf("decoding annotation %s of PersistentVolume %s: %w", protocol.AnnotationClassSnapshot, pv.Name, err)
	}
	req.SelectedNodeName = pv.Annotations[protocol.AnnotationSelectedNode]
	return req, nil
}
