package protocol

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CSI inline ephemeral volumes (PaV-Go addition): a pod's own `csi:` volume
// naming a PavProvisioner with spec.inlineVolumes. There is no claim and no
// PersistentVolume; the node plugin of the pod's node runs the creation pod
// (phase PhaseInlineCreation) before staging and the deletion pod
// (PhaseInlineDeletion) after unstaging. The inline creation pod is the
// record of the volume: it keeps FinalizerResult, its request
// (AnnotationInline) and its collected results until the volume is deleted.
const (
	PhaseInlineCreation Phase = "inline-creation"
	PhaseInlineDeletion Phase = "inline-deletion"

	// AnnotationInline: JSON of the InlineVolume, on inline creation and
	// deletion pods and on the PersistentVolume PaV makes up for staging.
	AnnotationInline = prefix + "inline"
)

// InlineVolume is what kubelet's NodePublishVolume says of an inline volume:
// its volume ID (kubelet's, "csi-<sha256>", unique per pod and volume), the
// pod's volumeAttributes (a tenant's: on a creation pod's record, as the
// node plugin admitted them) and the pod (podInfoOnMount).
type InlineVolume struct {
	VolumeID       string            `json:"volumeID"`
	Attributes     map[string]string `json:"attributes,omitempty"`
	PodNamespace   string            `json:"podNamespace"`
	PodName        string            `json:"podName"`
	PodUID         string            `json:"podUID"`
	ServiceAccount string            `json:"serviceAccountName,omitempty"`
}

// ReservedAttributePrefix begins the volume context keys kubelet adds
// (pod information, "ephemeral"): they are not the pod's attributes.
const ReservedAttributePrefix = "csi.storage.k8s.io/"

// InlineID names the inline volume's creation and deletion pods (label
// LabelStagingID, PodName).
func InlineID(volumeID string) string {
	sum := sha256.Sum256([]byte("inline\x00" + volumeID))
	return hex.EncodeToString(sum[:])[:20]
}

// InlinePod is an inline volume's creation or deletion pod on node, with
// its /pav under root. It holds FinalizerResult: the creation pod until the
// volume is deleted, the deletion pod until its outcome is acted on.
func InlinePod(tmpl *corev1.PodTemplateSpec, provisioner, root, node string, phase Phase, v InlineVolume) (*corev1.Pod, error) {
	rec, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("recording the inline volume on the %s pod: %w", phase, err)
	}
	id := InlineID(v.VolumeID)
	name := PodName(phase, id)
	pod := BuildPod(tmpl, PodOptions{
		Provisioner: provisioner,
		Phase:       phase,
		Name:        name,
		StagingID:   id,
		NodeName:    node,
		HostDir:     NewHostDir(root, name),
		Annotations: map[string]string{AnnotationInline: string(rec)},
	})
	pod.Finalizers = append(pod.Finalizers, FinalizerResult)
	return pod, nil
}

// InlineOf reads back the InlineVolume recorded on a pod or a made-up
// PersistentVolume; ok is false for anything else.
func InlineOf(obj metav1.Object) (v InlineVolume, ok bool) {
	s, found := obj.GetAnnotations()[AnnotationInline]
	if !found || json.Unmarshal([]byte(s), &v) != nil || v.VolumeID == "" {
		return InlineVolume{}, false
	}
	return v, true
}

// InlineVolumeOf is the InlineVolume of a NodePublishVolume request of an
// inline volume: the attributes without kubelet's keys, the pod from them.
func InlineVolumeOf(volumeID string, volumeContext map[string]string) InlineVolume {
	v := InlineVolume{
		VolumeID:       volumeID,
		PodNamespace:   volumeContext[ReservedAttributePrefix+"pod.namespace"],
		PodName:        volumeContext[ReservedAttributePrefix+"pod.name"],
		PodUID:         volumeContext[ReservedAttributePrefix+"pod.uid"],
		ServiceAccount: volumeContext[ReservedAttributePrefix+"serviceAccount.name"],
	}
	for k, val := range volumeContext {
		if !strings.HasPrefix(k, ReservedAttributePrefix) {
			if v.Attributes == nil {
				v.Attributes = map[string]string{}
			}
			v.Attributes[k] = val
		}
	}
	return v
}

// InlinePV is the PersistentVolume that staging and unstaging see for an
// inline volume: named and with the handle of kubelet's volume ID (kubelet
// publishes and unpublishes by it), the pod's admitted attributes plus those
// the creation pod returned (extra, which win: a tenant's attribute never
// replaces what the creation made) as volumeAttributes, the capacity the
// creation made, ReadWriteOncePod (one pod uses it) and Filesystem. It does
// not exist in the API; AnnotationInline marks it.
func InlinePV(driver string, v InlineVolume, capacity resource.Quantity, extra map[string]string) (*corev1.PersistentVolume, error) {
	rec, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	attrs := maps.Clone(v.Attributes)
	if attrs == nil {
		attrs = map[string]string{}
	}
	maps.Copy(attrs, extra) // the creation's win
	fs := corev1.PersistentVolumeFilesystem
	return &corev1.PersistentVolume{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolume"},
		ObjectMeta: metav1.ObjectMeta{Name: v.VolumeID, Annotations: map[string]string{
			AnnotationInline:        string(rec),
			AnnotationProvisionedBy: driver,
		}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:    corev1.ResourceList{corev1.ResourceStorage: capacity},
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod},
			VolumeMode:  &fs,
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: driver, VolumeHandle: v.VolumeID, VolumeAttributes: attrs,
			}},
		},
	}, nil
}

// InlineClaim is what staging and unstaging pods record as the claim of an
// inline volume (there is none): the pod's namespace and the volume ID.
// Templates never see it.
func InlineClaim(v InlineVolume) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Namespace: v.PodNamespace, Name: v.VolumeID},
	}
}
