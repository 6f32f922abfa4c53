package protocol

import (
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// AnnotationProvisionedBy is the external-provisioner protocol's record of
// which provisioner created a PV; PaV's PVs carry their PavProvisioner's name.
const AnnotationProvisionedBy = "pv.kubernetes.io/provisioned-by"

// The PV controller's annotations on a claim it found no PV for, naming the
// provisioner it hands the claim over to (and the beta one older releases
// wrote).
const (
	AnnotationStorageProvisioner     = "volume.kubernetes.io/storage-provisioner"
	AnnotationBetaStorageProvisioner = "volume.beta.kubernetes.io/storage-provisioner"
)

// ClaimProvisioner is the provisioner a claim is for: its class's (class
// nil when the claim names none or it does not exist), else the provisioner
// the PV controller handed it over to. The controller provisions by it,
// `pav describe` and `pav render` show it.
func ClaimProvisioner(pvc *corev1.PersistentVolumeClaim, class *storagev1.StorageClass) string {
	if class != nil {
		return class.Provisioner
	}
	if v := pvc.Annotations[AnnotationStorageProvisioner]; v != "" {
		return v
	}
	return pvc.Annotations[AnnotationBetaStorageProvisioner]
}

// VolumeName is the name of the PV PaV creates for a claim, and the default
// handle of its volume (defaultHandle in templates); the UID makes a second
// PV for the same claim impossible (the API server rejects the duplicate name).
func VolumeName(pvc *corev1.PersistentVolumeClaim) string { return "pvc-" + string(pvc.UID) }

// reservedParameterPrefix: StorageClass parameters under it are for the
// provisioner (secret references, fstype) and never reach the PV, as in
// external-provisioner.
const reservedParameterPrefix = "csi.storage.k8s.io/"

// ParameterFSType: the StorageClass parameter external-provisioner puts in
// a Filesystem PV's spec.csi.fsType (kubelet then passes it to the node
// plugin, and the CSIDriver's fsGroupPolicy ReadWriteOnceWithFSType applies
// fsGroup only to volumes that have one).
const ParameterFSType = reservedParameterPrefix + "fstype"

// annLastApplied is kubectl's copy of the whole object: a snapshot has the
// object itself, so the copy is dropped.
const annLastApplied = corev1.LastAppliedConfigAnnotation

// MaxSnapshotBytes bounds the claim and class snapshots a PV carries
// together: the API server refuses objects whose annotations exceed
// 256 KiB, and the PV's own annotations need room too.
const MaxSnapshotBytes = 192 << 10

// ClaimSnapshot is the JSON of a claim as the API returns it, without
// managed fields and kubectl's last-applied copy: what PaV records of a claim
// on its PVs and pods, for phases that run when the claim may be gone.
func ClaimSnapshot(pvc *corev1.PersistentVolumeClaim) (string, error) {
	return snapshot(pvc, corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim"))
}

// ClassSnapshot is ClaimSnapshot for a StorageClass, without its parameters
// under csi.storage.k8s.io/ (which Secrets hold the provisioner's and nodes'
// credentials, and where): snapshots sit on PVs and on pods that tenants may
// be able to read. RestoreReservedParameters gives them back while the class
// exists.
func ClassSnapshot(sc *storagev1.StorageClass) (string, error) {
	c := sc.DeepCopy()
	c.Parameters = unreservedParameters(sc.Parameters)
	return snapshot(c, storagev1.SchemeGroupVersion.WithKind("StorageClass"))
}

// RestoreReservedParameters is snap, a class read from a snapshot, with the
// parameters ClassSnapshot left out taken from live (the class the API has
// now, nil if none) if it is the same class: the API server keeps a
// StorageClass's parameters as they were created, and a class of the same
// name with another UID is another class. Otherwise it is snap.
func RestoreReservedParameters(snap, live *storagev1.StorageClass) *storagev1.StorageClass {
	if live == nil || live.UID != snap.UID || snap.UID == "" {
		return snap
	}
	out := snap.DeepCopy()
	for k, v := range live.Parameters {
		if strings.HasPrefix(k, reservedParameterPrefix) {
			if out.Parameters == nil {
				out.Parameters = map[string]string{}
			}
			out.Parameters[k] = v
		}
	}
	return out
}

// unreservedParameters are a class's parameters but those under
// csi.storage.k8s.io/ (nil if none is left).
func unreservedParameters(params map[string]string) map[string]string {
	var out map[string]string
	for k, v := range params {
		if strings.HasPrefix(k, reservedParameterPrefix) {
			continue
		}
		if out == nil {
			out = make(map[string]string, len(params))
		}
		out[k] = v
	}
	return out
}

// volumeAttributes are a PV's CSI volume attributes: the class's parameters
// but those under csi.storage.k8s.io/, and the creation pod's attributes
// (which ParseVolumeAttributes keeps from replacing a parameter).
func volumeAttributes(params, fromPod map[string]string) map[string]string {
	out := unreservedParameters(params)
	for k, v := range fromPod {
		if out == nil {
			out = make(map[string]string, len(fromPod))
		}
		out[k] = v
	}
	return out
}

// VolumeSnapshot is ClaimSnapshot for a PV, also without the snapshots the
// PV itself carries.
func VolumeSnapshot(pv *corev1.PersistentVolume) (string, error) {
	return snapshot(pv, corev1.SchemeGroupVersion.WithKind("PersistentVolume"), AnnotationClaimSnapshot, AnnotationClassSnapshot)
}

// snapshot is the JSON of a copy of obj, of kind gvk, without managed fields,
// kubectl's last-applied copy and the annotations in drop.
func snapshot(obj runtime.Object, gvk schema.GroupVersionKind, drop ...string) (string, error) {
	c := obj.DeepCopyObject()
	m, err := meta.Accessor(c)
	if err != nil {
		return "", err
	}
	m.SetManagedFields(nil)
	ann := m.GetAnnotations()
	for _, k := range append(drop, annLastApplied) {
		delete(ann, k)
	}
	c.GetObjectKind().SetGroupVersionKind(gvk)
	b, err := json.Marshal(c)
	return string(b), err
}

// Snapshots returns the claim and class snapshots a PV records for its
// deletion, or an error saying why they do not fit on a PV.
func Snapshots(pvc *corev1.PersistentVolumeClaim, sc *storagev1.StorageClass) (claim, class string, err error) {
	if claim, err = ClaimSnapshot(pvc); err != nil {
		return "", "", err
	}
	if class, err = ClassSnapshot(sc); err != nil {
		return "", "", err
	}
	if n := len(claim) + len(class); n > MaxSnapshotBytes {
		return "", "", fmt.Errorf("the claim and its StorageClass take %d KiB as JSON (without managed fields and %s), more than the %d KiB a PersistentVolume can record for the volume's deletion: shorten the claim's annotations or labels",
			n>>10, annLastApplied, MaxSnapshotBytes>>10)
	}
	return claim, class, nil
}

// VolumeSpec is everything BuildVolume needs.
type VolumeSpec struct {
	Provisioner  string
	PVC          *corev1.PersistentVolumeClaim
	Class        *storagev1.StorageClass
	Handle       string
	Capacity     resource.Quantity
	NodeAffinity *corev1.VolumeNodeAffinity
	SelectedNode string
	// Attributes are the creation pod's /pav/volume-attributes
	// (ParseVolumeAttributes), beside the class's parameters.
	Attributes map[string]string
	// VolumeAttributesClassName: the claim's VolumeAttributesClass the
	// volume was created with ("" for none), which the PV controller copies
	// into the claim's status.currentVolumeAttributesClassName.
	VolumeAttributesClassName string
}

// BuildVolume makes the PV for a provisioned claim, bound to it, following
// the external-provisioner protocol, plus what deletion will need later
// (snapshots of claim and class, selected node) since both may be gone then.
func BuildVolume(s VolumeSpec) (*corev1.PersistentVolume, error) {
	pvcJSON, scJSON, err := Snapshots(s.PVC, s.Class)
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
		AnnotationProvisionedBy: s.Provisioner,
		AnnotationClaimSnapshot: pvcJSON,
		AnnotationClassSnapshot: scJSON,
	}
	if s.SelectedNode != "" {
		ann[AnnotationSelectedNode] = s.SelectedNode
	}
	pv := &corev1.PersistentVolume{

		ObjectMeta: metav1.ObjectMeta{
			Name:        VolumeName(s.PVC),
			Annotations: ann,
			Finalizers:  []string{FinalizerVolume},
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
				VolumeAttributes: volumeAttributes(s.Class.Parameters, s.Attributes),
			}},
		},
	}
	if mode != corev1.PersistentVolumeBlock {
		pv.Spec.CSI.FSType = s.Class.Parameters[ParameterFSType]
	}
	if s.VolumeAttributesClassName != "" {
		pv.Spec.VolumeAttributesClassName = &s.VolumeAttributesClassName
	}
	return pv, nil
}
