package controller

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/templating"
)

// volumeName is the PV name for a claim; the UID makes a second PV for the
// same claim impossible (the API server rejects the duplicate name).
func volumeName(pvc *corev1.PersistentVolumeClaim) string { return "pvc-" + string(pvc.UID) }

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

const reservedParameterPrefix = "csi.storage.k8s.io/"

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

// snapshot is the JSON of an object as the API returns it, minus managed fields.
func snapshot(obj interface{}) (string, error) {
	b, err := json.Marshal(obj)
	return string(b), err
}

// annLastApplied is kubectl's copy of the whole object: the deletion
// context has the object itself, so the copy is dropped from snapshots.
const annLastApplied = corev1.LastAppliedConfigAnnotation

// maxSnapshotBytes bounds the claim and class snapshots a PV carries
// together: the API server refuses objects whose annotations exceed
// 256 KiB, and the PV's own annotations need room too.
const maxSnapshotBytes = 192 << 10

func claimSnapshot(pvc *corev1.PersistentVolumeClaim) (string, error) {
	c := pvc.DeepCopy()
	c.ManagedFields = nil
	delete(c.Annotations, annLastApplied)
	c.APIVersion, c.Kind = "v1", "PersistentVolumeClaim"
	return snapshot(c)
}

func classSnapshot(sc *storagev1.StorageClass) (string, error) {
	c := sc.DeepCopy()
	c.ManagedFields = nil
	delete(c.Annotations, annLastApplied)
	c.APIVersion, c.Kind = "storage.k8s.io/v1", "StorageClass"
	return snapshot(c)
}

// snapshots returns the claim and class snapshots a PV records for its
// deletion, or an error saying why they do not fit on a PV.
func snapshots(pvc *corev1.PersistentVolumeClaim, sc *storagev1.StorageClass) (claim, class string, err error) {
	if claim, err = claimSnapshot(pvc); err != nil {
		return "", "", err
	}
	if class, err = classSnapshot(sc); err != nil {
		return "", "", err
	}
	if n := len(claim) + len(class); n > maxSnapshotBytes {
		return "", "", fmt.Errorf("the claim and its StorageClass take %d KiB as JSON (without managed fields and %s), more than the %d KiB a PersistentVolume can record for the volume's deletion: shorten the claim's annotations or labels",
			n>>10, annLastApplied, maxSnapshotBytes>>10)
	}
	return claim, class, nil
}

// volumeSpec is everything buildVolume needs.
type volumeSpec struct {
	Provisioner  string
	PVC          *corev1.PersistentVolumeClaim
	Class        *storagev1.StorageClass
	Handle       string
	Capacity     resource.Quantity
	NodeAffinity *corev1.VolumeNodeAffinity
	SelectedNode string
}

// buildVolume makes the PV for a provisioned claim, bound to it, following
// the external-provisioner protocol, plus what deletion will need later
// (snapshots of claim and class, selected node) since both may be gone then.
func buildVolume(s volumeSpec) (*corev1.PersistentVolume, error) {
	pvcJSON, scJSON, err := snapshots(s.PVC, s.Class)
	if err != nil {
		return nil, err
	}
	reclaim := corev1.PersistentVolumeReclaimDelete
	if s.Class.ReclaimPolicy != nil {
		reclaim = *s.Class.ReclaimPolicy
	}
	mode := corev1.PersistentVolumeFilesystem
	if s.PVC.Spec.VolumeMode != nil {
		mode = *s.PVC.Spec.VolumeMode
	}
	ann := map[string]string{
		annProvisionedBy:                 s.Provisioner,
		protocol.AnnotationClaimSnapshot: pvcJSON,
		protocol.AnnotationClassSnapshot: scJSON,
	}
	if s.SelectedNode != "" {
		ann[protocol.AnnotationSelectedNode] = s.SelectedNode
	}
	var attrs map[string]string
	for k, v := range s.Class.Parameters {
		// Keys under csi.storage.k8s.io/ are for the provisioner (secret
		// references, fstype) and must never reach the PV (as in
		// external-provisioner).
		if strings.HasPrefix(k, reservedParameterPrefix) {
			continue
		}
		if attrs == nil {
			attrs = make(map[string]string, len(s.Class.Parameters))
		}
		attrs[k] = v
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name:        volumeName(s.PVC),
			Annotations: ann,
			Finalizers:  []string{protocol.FinalizerVolume},
		},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:    corev1.ResourceList{corev1.ResourceStorage: s.Capacity},
			AccessModes: append([]corev1.PersistentVolumeAccessMode(nil), s.PVC.Spec.AccessModes...),
			ClaimRef: &corev1.ObjectReference{
				Kind:       "PersistentVolumeClaim",
				APIVersion: "v1",
				Namespace:  s.PVC.Namespace,
				Name:       s.PVC.Name,
				UID:        s.PVC.UID,
			},
			PersistentVolumeReclaimPolicy: reclaim,
			StorageClassName:              s.Class.Name,
			MountOptions:                  append([]string(nil), s.Class.MountOptions...),
			VolumeMode:                    &mode,
			NodeAffinity:                  s.NodeAffinity.DeepCopy(),
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver:           s.Provisioner,
				VolumeHandle:     s.Handle,
				VolumeAttributes: attrs,
			}},
		},
	}
	return pv, nil
}

// requestFromVolume rebuilds a deletion request from what the PV stored.
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
