package protocol

import (
	"encoding/json"
	"fmt"
	"maps"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Each kind of pod PaV runs is built by one function here, used by the
// process that runs it and by `pav render --pods`, so that a render shows the
// pod PaV creates (but for the random suffix of its host directory).

// PodBase is what every pod of a phase starts from: the template the phase's
// section evaluated to, the provisioner, and the root of the pods' /pav
// directories on the nodes (PodDirRoot of the kubelet directory).
type PodBase struct {
	Template    *corev1.PodTemplateSpec
	Provisioner string
	Root        string
}

// ClaimPodSpec is a claim pod's own part (ClaimPod).
type ClaimPodSpec struct {
	Phase Phase
	PVC   *corev1.PersistentVolumeClaim
	Class *storagev1.StorageClass // nil when not known
	Extra map[string]string       // the phase's own annotations
	// ChosenNode: the node PaV chose for the attempt (Immediate binding with
	// topology keys), recorded as AnnotationSelectedNode; "" when the
	// scheduler selected it, or none is.
	ChosenNode string
}

// VolumePodSpec is a volume pod's own part (VolumePod).
type VolumePodSpec struct {
	Phase  Phase
	PVName string
	Claim  *corev1.ObjectReference
	Extra  map[string]string // the phase's own annotations
}

// StagingPodSpec is a staging pod's own part (StagingPod).
type StagingPodSpec struct {
	Revision  string // the provisioner's staging revision (templating.StagingRevision)
	Node      string
	StagingID string
	PV        *corev1.PersistentVolume
	PVC       *corev1.PersistentVolumeClaim
	Publication
}

// UnstagingPodSpec is an unstaging pod's own part (UnstagingPod).
type UnstagingPodSpec struct {
	Node       string
	StagingID  string
	PV         *corev1.PersistentVolume
	PVC        *corev1.PersistentVolumeClaim
	TargetPath string
	ReadOnly   bool
}

// ClaimPod is a validation, creation or deletion pod for a claim that has no
// PV yet (the deletion pod reverts a failed or abandoned creation). It
// records the claim and, when known, the StorageClass the attempt started
// with, so that a class changed or deleted mid-attempt does not change the
// attempt; Extra adds the phase's own annotations (the creation pod's
// AnnotationCreationConfig). It holds FinalizerResult, as VolumePod does.
func ClaimPod(b PodBase, s ClaimPodSpec) (*corev1.Pod, error) {
	ann := map[string]string{AnnotationClaim: s.PVC.Namespace + "/" + s.PVC.Name}
	if s.Class != nil {
		snap, err := ClassSnapshot(s.Class)
		if err != nil {
			return nil, fmt.Errorf("recording StorageClass %s on the %s pod: %w", s.Class.Name, s.Phase, err)
		}
		ann[AnnotationClassSnapshot] = snap
	}
	if s.ChosenNode != "" {
		ann[AnnotationSelectedNode] = s.ChosenNode
	}
	maps.Copy(ann, s.Extra)
	name := PodName(s.Phase, string(s.PVC.UID))
	pod := BuildPod(b.Template, PodOptions{
		Provisioner: b.Provisioner,
		Phase:       s.Phase,
		Name:        name,
		ClaimUID:    string(s.PVC.UID),
		HostDir:     NewHostDir(b.Root, name),
		Annotations: ann,
	})
	pod.Finalizers = append(pod.Finalizers, FinalizerResult)
	return pod, nil
}

// VolumePod is a deletion or expansion pod for the existing PV PVName of
// Claim (which may be gone); Extra adds the phase's own annotations (the
// expansion target).
func VolumePod(b PodBase, s VolumePodSpec) *corev1.Pod {
	ann := map[string]string{AnnotationClaim: s.Claim.Namespace + "/" + s.Claim.Name}
	maps.Copy(ann, s.Extra)
	name := PodName(s.Phase, s.PVName)
	pod := BuildPod(b.Template, PodOptions{
		Provisioner: b.Provisioner,
		Phase:       s.Phase,
		Name:        name,
		Volume:      s.PVName,
		ClaimUID:    string(s.Claim.UID),
		HostDir:     NewHostDir(b.Root, name),
		Annotations: ann,
	})
	pod.Finalizers = append(pod.Finalizers, FinalizerResult)
	return pod
}

// CapacityPod is a storage capacity pod measuring the CapacityKey key, on
// node unless the template names a node itself. It holds FinalizerResult, as
// ClaimPod does.
func CapacityPod(tmpl *corev1.PodTemplateSpec, provisioner, root, key, node string) *corev1.Pod {
	name := PodName(PhaseCapacity, key)
	pod := BuildPod(tmpl, PodOptions{
		Provisioner: provisioner,
		Phase:       PhaseCapacity,
		Name:        name,
		HostDir:     NewHostDir(root, name),
		Annotations: map[string]string{AnnotationCapacityOf: key},
	})
	if pod.Spec.NodeName == "" {
		pod.Spec.NodeName = node
	}
	pod.Finalizers = append(pod.Finalizers, FinalizerResult)
	return pod
}

// SnapshotPod is a snapshot creation or deletion pod for the
// VolumeSnapshotContent named content (of UID uid: a content made again
// under the same name gets new pods), with its /pav under root. It holds
// FinalizerResult, as ClaimPod does.
func SnapshotPod(tmpl *corev1.PodTemplateSpec, provisioner, root string, phase Phase, content, uid string) *corev1.Pod {
	return contentPod(tmpl, provisioner, root, phase, AnnotationSnapshotContent, content, uid)
}

// contentPod is a pod of a (group) snapshot content's phase: named after
// the content's UID, labelled with it, the content's name in annotation.
func contentPod(tmpl *corev1.PodTemplateSpec, provisioner, root string, phase Phase, annotation, content, uid string) *corev1.Pod {
	name := PodName(phase, uid)
	pod := BuildPod(tmpl, PodOptions{
		Provisioner:        provisioner,
		Phase:              phase,
		Name:               name,
		SnapshotContentUID: uid,
		HostDir:            NewHostDir(root, name),
		Annotations:        map[string]string{annotation: content},
	})
	pod.Finalizers = append(pod.Finalizers, FinalizerResult)
	return pod
}

// StagingPod is the staging pod for publishing PV (of claim PVC) as its
// Publication asks on Node. It records copies of the PV and claim, for an
// unstaging that runs when they are gone, and holds FinalizerStaging until
// the node plugin has unstaged.
func StagingPod(b PodBase, s StagingPodSpec) (*corev1.Pod, error) {
	claimSnap, err := ClaimSnapshot(s.PVC)
	if err != nil {
		return nil, fmt.Errorf("recording claim %s/%s on the staging pod: %w", s.PVC.Namespace, s.PVC.Name, err)
	}
	volumeSnap, err := VolumeSnapshot(s.PV)
	if err != nil {
		return nil, fmt.Errorf("recording PersistentVolume %s on the staging pod: %w", s.PV.Name, err)
	}
	ann := map[string]string{
		AnnotationTargetPath:     s.TargetPath,
		AnnotationReadOnly:       strconv.FormatBool(s.ReadOnly),
		AnnotationClaimSnapshot:  claimSnap,
		AnnotationVolumeSnapshot: volumeSnap,
	}
	if s.Revision != "" {
		ann[AnnotationStagingRevision] = s.Revision
	}
	if len(s.MountOptions) > 0 {
		opts, _ := json.Marshal(s.MountOptions) // a list of strings always encodes
		ann[AnnotationMountOptions] = string(opts)
	}
	if s.FSType != "" {
		ann[AnnotationFSType] = s.FSType
	}
	if s.ClientPodUID != "" {
		ann[AnnotationClientPod] = string(s.ClientPodUID)
	}
	pod := nodePod(b, PhaseStaging, s.Node, s.StagingID, s.PV.Name, s.PVC, ann)
	pod.Finalizers = append(pod.Finalizers, FinalizerStaging)
	return pod, nil
}

// Publication is what kubelet's NodePublishVolume asked of a staging; the
// staging pod records it, so that unstaging sees what staging saw.
type Publication struct {
	TargetPath string
	ReadOnly   bool
	// MountOptions and FSType are the mount capability's flags and fsType
	// (Filesystem volumes; kubelet passes the PV's mountOptions and
	// spec.csi.fsType).
	MountOptions []string
	FSType       string
	// ClientPodUID: the pod kubelet publishes for, when it said (a
	// publish for one client, not a shared staging).
	ClientPodUID types.UID
}

// PublicationOf reads back what StagingPod recorded; a list that does not
// decode (a pod PaV did not write) counts as none.
func PublicationOf(stagingPod *corev1.Pod) Publication {
	ann := stagingPod.Annotations
	pub := Publication{TargetPath: ann[AnnotationTargetPath], ReadOnly: ann[AnnotationReadOnly] == "true", FSType: ann[AnnotationFSType],
		ClientPodUID: types.UID(ann[AnnotationClientPod])}
	if s, ok := ann[AnnotationMountOptions]; ok {
		if err := json.Unmarshal([]byte(s), &pub.MountOptions); err != nil {
			pub.MountOptions = nil
		}
	}
	return pub
}

// UnstagingPod is the unstaging pod that follows the staging pod of the same
// staging ID: same volume, claim, node and target path.
func UnstagingPod(b PodBase, s UnstagingPodSpec) *corev1.Pod {
	return nodePod(b, PhaseUnstaging, s.Node, s.StagingID, s.PV.Name, s.PVC, map[string]string{
		AnnotationTargetPath: s.TargetPath,
		AnnotationReadOnly:   strconv.FormatBool(s.ReadOnly),
	})
}

func nodePod(b PodBase, phase Phase, node, stagingID, pvName string, pvc *corev1.PersistentVolumeClaim, ann map[string]string) *corev1.Pod {
	ann[AnnotationClaim] = pvc.Namespace + "/" + pvc.Name
	name := PodName(phase, stagingID)
	return BuildPod(b.Template, PodOptions{
		Provisioner: b.Provisioner,
		Phase:       phase,
		Name:        name,
		Volume:      pvName,
		ClaimUID:    string(pvc.UID),
		StagingID:   stagingID,
		NodeName:    node,
		HostDir:     NewHostDir(b.Root, name),
		Annotations: ann,
	})
}
