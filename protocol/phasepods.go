package protocol

import (
	"encoding/json"
	"fmt"
	"maps"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// Each kind of pod PaV runs is built by one function here, used by the
// process that runs it and by `pav render --pods`, so that a render shows the
// pod PaV creates (but for the random suffix of its host directory).

// ClaimPod is a validation, creation or deletion pod for a claim that has no
// PV yet (the deletion pod reverts a failed or abandoned creation), with its
// /pav under root (PodDirRoot of the nodes' kubelet directory). It records
// the claim and, when known, the StorageClass the attempt started with, so
// that a class changed or deleted mid-attempt does not change the attempt;
// extra adds the phase's own annotations (the creation pod's
// AnnotationCreationConfig). It holds FinalizerResult, as VolumePod does.
func ClaimPod(tmpl *corev1.PodTemplateSpec, provisioner, root string, phase Phase, pvc *corev1.PersistentVolumeClaim, class *storagev1.StorageClass, extra map[string]string) (*corev1.Pod, error) {
	ann := map[string]string{AnnotationClaim: pvc.Namespace + "/" + pvc.Name}
	if class != nil {
		snap, err := ClassSnapshot(class)
		if err != nil {
			return nil, fmt.Errorf("recording StorageClass %s on the %s pod: %w", class.Name, phase, err)
		}
		ann[AnnotationClassSnapshot] = snap
	}
	maps.Copy(ann, extra)
	name := PodName(phase, string(pvc.UID))
	pod := BuildPod(tmpl, PodOptions{
		Provisioner: provisioner,
		Phase:       phase,
		Name:        name,
		ClaimUID:    string(pvc.UID),
		HostDir:     NewHostDir(root, name),
		Annotations: ann,
	})
	pod.Finalizers = append(pod.Finalizers, FinalizerResult)
	return pod, nil
}

// VolumePod is a deletion or expansion pod for the existing PV pvName of the
// claim claimNamespace/claimName (which may be gone), with its /pav under
// root; extra adds the phase's own annotations (the expansion target).
func VolumePod(tmpl *corev1.PodTemplateSpec, provisioner, root string, phase Phase, pvName string, claim *corev1.ObjectReference, extra map[string]string) *corev1.Pod {
	ann := map[string]string{AnnotationClaim: claim.Namespace + "/" + claim.Name}
	maps.Copy(ann, extra)
	name := PodName(phase, pvName)
	pod := BuildPod(tmpl, PodOptions{
		Provisioner: provisioner,
		Phase:       phase,
		Name:        name,
		Volume:      pvName,
		ClaimUID:    string(claim.UID),
		HostDir:     NewHostDir(root, name),
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
	name := PodName(phase, uid)
	pod := BuildPod(tmpl, PodOptions{
		Provisioner:        provisioner,
		Phase:              phase,
		Name:               name,
		SnapshotContentUID: uid,
		HostDir:            NewHostDir(root, name),
		Annotations:        map[string]string{AnnotationSnapshotContent: content},
	})
	pod.Finalizers = append(pod.Finalizers, FinalizerResult)
	return pod
}

// StagingPod is the staging pod for publishing pv (of claim pvc) as pub
// asks on node, whose node plugin keeps pod directories under root; revision
// is the provisioner's staging revision it is made from (templating.StagingRevision).
// It records copies of pv and pvc, for an unstaging that runs when they are
// gone, and holds FinalizerStaging until the node plugin has unstaged.
func StagingPod(tmpl *corev1.PodTemplateSpec, provisioner, revision, root, node, stagingID string, pv *corev1.PersistentVolume, pvc *corev1.PersistentVolumeClaim, pub Publication) (*corev1.Pod, error) {
	claimSnap, err := ClaimSnapshot(pvc)
	if err != nil {
		return nil, fmt.Errorf("recording claim %s/%s on the staging pod: %w", pvc.Namespace, pvc.Name, err)
	}
	volumeSnap, err := VolumeSnapshot(pv)
	if err != nil {
		return nil, fmt.Errorf("recording PersistentVolume %s on the staging pod: %w", pv.Name, err)
	}
	ann := map[string]string{
		AnnotationTargetPath:     pub.TargetPath,
		AnnotationReadOnly:       strconv.FormatBool(pub.ReadOnly),
		AnnotationClaimSnapshot:  claimSnap,
		AnnotationVolumeSnapshot: volumeSnap,
	}
	if revision != "" {
		ann[AnnotationStagingRevision] = revision
	}
	if len(pub.MountOptions) > 0 {
		b, _ := json.Marshal(pub.MountOptions) // a list of strings always encodes
		ann[AnnotationMountOptions] = string(b)
	}
	if pub.FSType != "" {
		ann[AnnotationFSType] = pub.FSType
	}
	pod := nodePod(tmpl, provisioner, PhaseStaging, root, node, stagingID, pv.Name, pvc, ann)
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
}

// PublicationOf reads back what StagingPod recorded; a list that does not
// decode (a pod PaV did not write) counts as none.
func PublicationOf(stagingPod *corev1.Pod) Publication {
	ann := stagingPod.Annotations
	pub := Publication{TargetPath: ann[AnnotationTargetPath], ReadOnly: ann[AnnotationReadOnly] == "true", FSType: ann[AnnotationFSType]}
	if s, ok := ann[AnnotationMountOptions]; ok {
		if err := json.Unmarshal([]byte(s), &pub.MountOptions); err != nil {
			pub.MountOptions = nil
		}
	}
	return pub
}

// UnstagingPod is the unstaging pod that follows the staging pod of the same
// staging ID: same volume, claim, node and target path.
func UnstagingPod(tmpl *corev1.PodTemplateSpec, provisioner, root, node, stagingID string, pv *corev1.PersistentVolume, pvc *corev1.PersistentVolumeClaim, targetPath string, readOnly bool) *corev1.Pod {
	return nodePod(tmpl, provisioner, PhaseUnstaging, root, node, stagingID, pv.Name, pvc, map[string]string{
		AnnotationTargetPath: targetPath,
		AnnotationReadOnly:   strconv.FormatBool(readOnly),
	})
}

func nodePod(tmpl *corev1.PodTemplateSpec, provisioner string, phase Phase, root, node, stagingID, pvName string, pvc *corev1.PersistentVolumeClaim, ann map[string]string) *corev1.Pod {
	ann[AnnotationClaim] = pvc.Namespace + "/" + pvc.Name
	name := PodName(phase, stagingID)
	return BuildPod(tmpl, PodOptions{
		Provisioner: provisioner,
		Phase:       phase,
		Name:        name,
		Volume:      pvName,
		ClaimUID:    string(pvc.UID),
		StagingID:   stagingID,
		NodeName:    node,
		HostDir:     NewHostDir(root, name),
		Annotations: ann,
	})
}
