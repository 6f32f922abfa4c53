package controller

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/templating"
)

// chooseHandle applies the spec's order: volumeCreation.handle, else the
// creation pod's /pav/handle, else pvc-<uid>.
func chooseHandle(field *string, file *string, defaultHandle string) (string, error) {
	if field != nil {
		if err := protocol.CheckHandle(*field); err != nil {
			return "", fmt.Errorf("spec.volumeCreation.handle: %w", err)
		}
		return *field, nil
	}
	if file != nil {
		h := strings.TrimSpace(*file)
		if err := protocol.CheckHandle(h); err != nil {
			return "", fmt.Errorf("the creation pod's /pav/%s: %w", protocol.FileHandle, err)
		}
		return h, nil
	}
	return defaultHandle, nil
}

// chooseCapacity applies the spec's order: volumeCreation.capacity, else the
// creation pod's /pav/capacity; one of them must be there.
func chooseCapacity(field *resource.Quantity, file *string, hadPod bool) (resource.Quantity, error) {
	if field != nil {
		return field.DeepCopy(), nil
	}
	if file != nil {
		s := strings.TrimSpace(*file)
		q, err := resource.ParseQuantity(s)
		if err != nil {
			return resource.Quantity{}, fmt.Errorf("the creation pod wrote %q to /pav/%s, which is not a capacity (e.g. 1073741824 or 1Gi): %v", s, protocol.FileCapacity, err)
		}
		return q, nil
	}
	if hadPod {
		return resource.Quantity{}, fmt.Errorf("the volume's capacity is unknown: spec.volumeCreation.capacity is not set and the creation pod did not write /pav/%s", protocol.FileCapacity)
	}
	return resource.Quantity{}, fmt.Errorf("the volume's capacity is unknown: spec.volumeCreation.capacity is not set and there is no creation pod to write /pav/%s", protocol.FileCapacity)
}

// chooseAttributes reads the creation pod's /pav/volume-attributes, if it
// wrote one, for the PV (nil if not). resultError, the pod's /pav/error,
// says why the node plugin may have refused to read the file.
func chooseAttributes(file *string, resultError string, class *storagev1.StorageClass) (map[string]string, error) {
	if file == nil {
		return nil, nil
	}
	attrs, err := protocol.ParseVolumeAttributes(*file, class)
	if err != nil {
		msg := fmt.Sprintf("its /pav/%s is refused: %v", protocol.FileVolumeAttributes, err)
		if e := strings.TrimSpace(resultError); e != "" {
			msg += " (its /pav/" + protocol.FileError + ": " + e + ")"
		}
		return nil, errors.New(msg)
	}
	return attrs, nil
}

// checkCapacity enforces the protocol: never smaller than requested, and not
// above the claim's limit when it has one.
func checkCapacity(capacity resource.Quantity, pvc *corev1.PersistentVolumeClaim) error {
	if capacity.Sign() <= 0 {
		return fmt.Errorf("the volume's capacity %s is not positive", capacity.String())
	}
	if capacity.Cmp(*resource.NewQuantity(math.MaxInt64, resource.BinarySI)) > 0 {
		return fmt.Errorf("the volume's capacity %s is too large: at most %d bytes", capacity.String(), int64(math.MaxInt64))
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
