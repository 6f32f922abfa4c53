// Package protocol is PaV's contract with the cluster, in one home for the
// controller, the node plugin and `pav render`: the names PaV gives its pods,
// labels, annotations and finalizers, the /pav files, where pods' /pav
// directories live on the nodes, and how PaV's pods are built and created.
// It evaluates no template (that is package templating).
package protocol

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Keep every name PaV gives here, so that its processes agree.

// Phase names a step of a volume's life. Each phase has its own spec section,
// its own Jinja context and its own pod.
type Phase string

const (
	PhaseValidation Phase = "validation"
	PhaseCreation   Phase = "creation"
	PhaseDeletion   Phase = "deletion"
	PhaseStaging    Phase = "staging"
	PhaseUnstaging  Phase = "unstaging"
	PhaseExpansion  Phase = "expansion" // PaV-Go addition
	// PhaseCapacity: a storage capacity pod, which measures one topology
	// segment's free space for one StorageClass (PaV-Go addition; no volume).
	PhaseCapacity Phase = "capacity"
	// PaV-Go additions: taking and deleting a snapshot of a volume (one
	// VolumeSnapshotContent).
	PhaseSnapshotCreation Phase = "snapshot-creation"
	PhaseSnapshotDeletion Phase = "snapshot-deletion"
	// PaV-Go additions: taking and deleting a group snapshot of several
	// volumes at once (one VolumeGroupSnapshotContent).
	PhaseGroupSnapshotCreation Phase = "group-snapshot-creation"
	PhaseGroupSnapshotDeletion Phase = "group-snapshot-deletion"
	// PhaseModification: a volume takes the parameters of another
	// VolumeAttributesClass (PaV-Go addition).
	PhaseModification Phase = "modification"
)

// Phases are all the phases, PaV-Go's and inline volumes' included: the
// names of PaV's pods begin pav-<phase>- (PodName), and policy pav-pod-exec
// in deployment.yaml knows PaV's pods by that (it lists them too).
var Phases = []Phase{
	PhaseValidation, PhaseCreation, PhaseDeletion, PhaseStaging, PhaseUnstaging, PhaseExpansion, PhaseCapacity,
	PhaseSnapshotCreation, PhaseSnapshotDeletion, PhaseModification, PhaseInlineCreation, PhaseInlineDeletion,
	PhaseGroupSnapshotCreation, PhaseGroupSnapshotDeletion,
}

// CapacityKey names one measurement of storage capacity: a provisioner's
// StorageClass in one topology segment. The CSIStorageCapacity PaV publishes
// for it is named "pav-<key>", and the capacity pod that measures it records
// the key (AnnotationCapacityOf).
func CapacityKey(class string, segment Segment) string {
	return hash(class+"\n"+segment.Key(), 32)
}

// ReservedPrefix begins every label, annotation and finalizer PaV gives;
// only PaV may set them (IsReserved).
const ReservedPrefix = prefix

const prefix = "pav.albertofaria.github.io/"

// IsReserved reports whether a label, annotation or finalizer name is PaV's:
// PaV's own decisions and pods' results live under its prefix, so nothing a
// template or a tenant writes may carry it.
func IsReserved(key string) bool { return strings.HasPrefix(key, prefix) }

// Labels on every pod PaV creates.
const (
	LabelProvisioner = prefix + "provisioner" // PavProvisioner name
	LabelPhase       = prefix + "phase"       // a Phase
	LabelVolume      = prefix + "volume"      // PersistentVolume name (pvc-<claim uid> for dynamic provisioning)
	LabelClaimUID    = prefix + "claim-uid"   // UID of the PVC (validation/creation/deletion pods)
	LabelStagingID   = prefix + "staging-id"  // hash of (volume, target path) for staging/unstaging pods
	// LabelSnapshotContentUID: the UID of the VolumeSnapshotContent a
	// snapshot creation or deletion pod is for.
	LabelSnapshotContentUID = prefix + "snapshot-content-uid"
)

// LabelAllowPods on a Namespace, set to "true" by the cluster admin: PaV's
// pods may run there (policy pav-pod-confinement in deployment.yaml, besides
// the namespaces its ConfigMap lists).
const LabelAllowPods = prefix + "allow-pods"

// Annotations.
const (
	// On staging and unstaging pods: what the unstaging phase needs to know.
	AnnotationClaim      = prefix + "claim"       // "<namespace>/<name>" of the PVC
	AnnotationTargetPath = prefix + "target-path" // kubelet's target path
	AnnotationReadOnly   = prefix + "read-only"   // "true" or "false"
	// On staging pods, when kubelet passed them: the mount flags (JSON list
	// of strings) and fsType of NodePublishVolume's mount capability.
	AnnotationMountOptions = prefix + "mount-options"
	AnnotationFSType       = prefix + "fs-type"
	// On staging pods for one client (NodePublishVolume): the client pod's
	// UID, as kubelet's volume context names it (podInfoOnMount).
	AnnotationClientPod = prefix + "client-pod"
	// On staging pods: JSON snapshots of the PVC and PV at staging time, so
	// that unstaging can be evaluated even if they are gone by then
	// (AnnotationClaimSnapshot holds the PVC), and "true" once the unstaging
	// pod succeeded (so that a restart does not run it twice).
	AnnotationVolumeSnapshot = prefix + "volume-snapshot" // JSON of the PV
	AnnotationUnstaged       = prefix + "unstaged"
	// On a staging pod that replaces one that stopped while clients used
	// its volume: JSON of what it replaces and since when, until the node
	// plugin has replaced the volume in every client container.
	AnnotationRecovering = prefix + "recovering"
	// On a staging pod that serves every client on its node (NodeStageVolume;
	// its target path is kubelet's staging path): "true".
	AnnotationShared = prefix + "shared"
	// On staging pods: the revision of the provisioner's spec.volumeStaging
	// they were made from (templating.StagingRevision).
	AnnotationStagingRevision = prefix + "staging-revision"

	// On creation pods: the evaluated volumeCreation fields (handle,
	// capacity, nodeAffinity) as JSON, so that the PV is built from exactly
	// what the attempt evaluated, however the claim changed meanwhile.
	AnnotationCreationConfig = prefix + "creation-config"
	// On snapshot creation and deletion pods: the name of their
	// VolumeSnapshotContent.
	AnnotationSnapshotContent = prefix + "snapshot-content"
	// On group snapshot creation and deletion pods: the name of their
	// VolumeGroupSnapshotContent (its UID is their LabelSnapshotContentUID).
	AnnotationGroupSnapshotContent = prefix + "group-snapshot-content"
	// On expansion pods: the size they grow the volume to.
	AnnotationExpansionTarget = prefix + "expansion-target"
	// On modification pods: the VolumeAttributesClass they give the volume.
	AnnotationModificationTarget = prefix + "modification-target"

	// AnnotationCapacityOf on capacity pods: the CapacityKey they measure.
	AnnotationCapacityOf = prefix + "capacity-of"

	// On terminated validation/creation/deletion/expansion/capacity pods,
	// written by the node plugin of the node the pod ran on, from the files
	// the pod left in /pav.
	AnnotationResultsCollected = prefix + "results-collected" // "true" once /pav was read
	AnnotationResultHandle     = prefix + "result-handle"     // content of /pav/handle, if present
	AnnotationResultCapacity   = prefix + "result-capacity"   // content of /pav/capacity, if present
	AnnotationResultError      = prefix + "result-error"      // content of /pav/error, if present
	AnnotationResultInfeasible = prefix + "result-infeasible" // content of /pav/infeasible, if present (even empty)
	// AnnotationResultVolumeAttributes: the content of /pav/volume-attributes
	// (at most MaxVolumeAttributesBytes+1 bytes, so that an overlong file is
	// seen as such), if present, even empty; "" too when PaV refused to read
	// the file (AnnotationResultError says why). ParseVolumeAttributes reads it.
	AnnotationResultVolumeAttributes = prefix + "result-volume-attributes"
	// On terminated snapshot creation pods: /pav/snapshot-handle and
	// /pav/restore-size, if present.
	AnnotationResultSnapshotHandle = prefix + "result-snapshot-handle"
	AnnotationResultRestoreSize    = prefix + "result-restore-size"
	AnnotationResultReadyToUse     = prefix + "result-ready-to-use"
	// On terminated group snapshot creation pods: /pav/snapshot-handles.
	AnnotationResultSnapshotHandles = prefix + "result-snapshot-handles"
	// On terminated capacity pods: /pav/maximum-volume-size, if present.
	AnnotationResultMaximumVolumeSize = prefix + "result-maximum-volume-size"

	// AnnotationSucceeded ("true") on a run-to-completion pod: the node plugin
	// of its node learnt from the container runtime that every container
	// exited 0 and none will run again, before kubelet reported the pod
	// Succeeded. It is written before anyone acts on it and is final (see
	// Succeeded); on validation, creation, deletion and expansion pods in the
	// same write as the collected results.
	AnnotationSucceeded = prefix + "succeeded"

	// On PersistentVolumes PaV created: snapshots of the claim and class at
	// creation time, so that deletion can be evaluated after both are gone.
	// AnnotationClassSnapshot is on a claim's validation, creation and
	// deletion pods too: an attempt uses the class as it was when the
	// attempt started, even if the class is deleted or changed meanwhile.
	AnnotationClaimSnapshot = prefix + "claim-snapshot" // JSON of the PVC
	AnnotationClassSnapshot = prefix + "class-snapshot" // JSON of the StorageClass
	// AnnotationSelectedNode on PersistentVolumes: the node chosen by the scheduler
	// (WaitForFirstConsumer) or by PaV (Immediate binding with topology keys),
	// for the deletion phase's selectedNodeName. On a claim's validation,
	// creation and deletion pods: the node PaV chose, so that every step of
	// the attempt uses the same one.
	AnnotationSelectedNode = prefix + "selected-node"
)

// NodePluginAnnotations are the annotations only the node plugin of a pod's
// node writes on PaV's pods (policies pav-controller-scope and
// pav-node-scope in deployment.yaml list them too).
var NodePluginAnnotations = []string{
	AnnotationResultsCollected, AnnotationResultHandle, AnnotationResultCapacity, AnnotationResultError,
	AnnotationResultInfeasible, AnnotationResultVolumeAttributes, AnnotationResultSnapshotHandle, AnnotationResultRestoreSize,
	AnnotationResultReadyToUse, AnnotationResultSnapshotHandles, AnnotationResultMaximumVolumeSize, AnnotationSucceeded, AnnotationUnstaged, AnnotationRecovering,
}

// Finalizers.
const (
	FinalizerProvisioner = prefix + "provisioner" // on PavProvisioners while volumes exist
	FinalizerClaim       = prefix + "claim"       // on PVCs while PaV provisions for them
	FinalizerVolume      = prefix + "volume"      // on PVs PaV created, until the volume is deleted
	// FinalizerStaging is on staging pods until the volume is unstaged: the
	// pod object keeps what unstaging needs across node plugin restarts.
	FinalizerStaging = prefix + "staging"
	// FinalizerResult is on validation, creation, deletion and expansion
	// pods until the controller has acted on their outcome (DeletePod
	// removes it): a finished pod is the only record of what it did (a
	// volume created, say), so one that anybody else deletes stays, marked
	// deleted, until then, and its work is neither lost nor done twice.
	FinalizerResult = prefix + "result"
)

// finalizerClonePrefix begins CloneFinalizer's names.
const finalizerClonePrefix = prefix + "clone-"

// CloneFinalizer is on a claim while PaV provisions the claim of UID uid, a
// clone of it (its data source), as external-provisioner's
// cloning-protection finalizer is: the source and its volume stay until
// the clone's attempt is over. One per clone, so the finalizer itself says
// which clone holds the source, and it is removed once that clone no longer
// holds FinalizerClaim.
func CloneFinalizer(uid string) string { return finalizerClonePrefix + uid }

// CloneOf is the UID of the clone a finalizer of CloneFinalizer's is for.
func CloneOf(finalizer string) (uid string, ok bool) {
	return strings.CutPrefix(finalizer, finalizerClonePrefix)
}

// The /pav protocol: the directory every container of a PaV pod sees at /pav,
// and the files in it.
const (
	PavMountPath  = "/pav"
	PavVolumeName = "pav"

	FileHandle   = "handle"
	FileCapacity = "capacity"
	FileReady    = "ready"
	FileVolume   = "volume"
	FileError    = "error" // PaV-Go addition: a message explaining a failure
	// FileInfeasible (PaV-Go addition), from an expansion pod: the volume
	// was left as it was and can never grow to the size asked; its content,
	// if any, says why.
	FileInfeasible = "infeasible"
	// FileVolumeAttributes (PaV-Go addition), from a creation pod: a JSON
	// object of strings that joins the class's parameters in the PV's
	// volumeAttributes (ParseVolumeAttributes has its rules).
	FileVolumeAttributes = "volume-attributes"
	// FileSnapshotHandle and FileRestoreSize (PaV-Go additions), from a
	// snapshot creation pod: the snapshot's handle (CheckHandle's rules)
	// and the smallest volume it restores into (bytes, or a quantity).
	FileSnapshotHandle = "snapshot-handle"
	FileRestoreSize    = "restore-size"
	// FileReadyToUse (PaV-Go addition), from a snapshot creation pod:
	// "false" if the snapshot is cut but not usable yet (PaV runs the
	// creation pod again later, with snapshotHandle in its context, until
	// it writes "true" or nothing).
	FileReadyToUse = "ready-to-use"
	// FileSnapshotHandles (PaV-Go addition), from a group snapshot
	// creation pod: one line per volume of the group, its volume handle
	// and its snapshot's handle, separated by white space, and optionally
	// its snapshot's restore size (ParseSnapshotHandles reads it). The
	// group's own handle goes to FileSnapshotHandle.
	FileSnapshotHandles = "snapshot-handles"
	// FileMaximumVolumeSize (PaV-Go addition), from a capacity pod: the
	// largest volume the segment can hold (bytes, or a quantity), which may
	// be less than its free space (e.g. a pool spread over several disks).
	FileMaximumVolumeSize = "maximum-volume-size"
)

// MaxHandleBytes is the longest volume handle: CSI's limit on volume IDs.
const MaxHandleBytes = 128

// HandlePunctuation is what a volume handle may hold besides ASCII letters
// and digits: what real drivers' handles use (`pool/vol-1`, `host:/path`,
// base64's `+`, `=`; `#` separates fields in some drivers' IDs), and nothing
// a shell gives a meaning to inside a word (no `$`, backquote, `;`, `|`, `&`,
// quotes, backslash, globs, brackets, `~`, `!`, `<`, `>`, white space).
const HandlePunctuation = "-_.:/=+@,%#"

// CheckHandle enforces what a volume handle must be, wherever it comes from
// (spec.volumeCreation.handle, /pav/handle, a static PV's volumeHandle
// when its volume is staged, `pav render`): at most MaxHandleBytes bytes of
// ASCII letters, digits and HandlePunctuation, not starting with '-' (a
// command would read it as an option), and a relative path that stays
// beneath its directory: components separated by single "/", none of them
// "." or "..", no "/" first or last ("pool/vol-1" is fine, "/", "..",
// "../../etc" and "a//b" are not). Kubelet passes it to PaV's node plugin
// and templates put it into commands and paths (<root>/{{ handle }}, which
// a deletion pod removes), so nothing a shell would expand or split and
// nothing that leaves <root>.
func CheckHandle(h string) error {
	switch {
	case h == "":
		return fmt.Errorf("the handle is empty")
	case len(h) > MaxHandleBytes:
		return fmt.Errorf("the handle is %d bytes long; at most %d are allowed", len(h), MaxHandleBytes)
	}
	for _, r := range h {
		if !handleRune(r) {
			return fmt.Errorf("the handle %q contains %s, which a handle may not: only ASCII letters, digits and %s are allowed (templates put handles into shell commands)",
				h, describeRune(r), HandlePunctuation)
		}
	}
	switch {
	case h[0] == '-':
		return fmt.Errorf("the handle %q starts with '-', which a command would read as an option", h)
	case !pathBeneath(h):
		return fmt.Errorf("the handle %q is not allowed: templates use handles as paths beneath a directory (<root>/{{ handle }}), so a handle is names separated by single '/', none of them '.' or '..', with no '/' first or last", h)
	}
	return nil
}

func handleRune(r rune) bool {
	return r < utf8.RuneSelf && ('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune(HandlePunctuation, r))
}

// describeRune names a character for an error message: quoted if printable,
// by code point otherwise (a newline, a NUL, invalid UTF-8).
func describeRune(r rune) string {
	switch {
	case r == utf8.RuneError:
		return "invalid UTF-8"
	case r == ' ':
		return "a space"
	case unicode.IsPrint(r):
		return fmt.Sprintf("%q", r)
	}
	return fmt.Sprintf("the character %U", r)
}

// pathBeneath reports whether p, joined to a directory, names something
// strictly beneath it without any lexical step back or aside.
func pathBeneath(p string) bool {
	for _, c := range strings.Split(p, "/") {
		if c == "" || c == "." || c == ".." {
			return false
		}
	}
	return true
}

// DefaultKubeletDir is kubelet's default root directory (its --root-dir).
// Distributions such as k0s or microk8s use another one; PaV's processes take
// it as --kubelet-dir, and the manifests as the node plugin's host path.
const DefaultKubeletDir = "/var/lib/kubelet"

// KubeletDirHelp describes --kubelet-dir, which the controller, the node
// plugin and `pav render --pods` must agree on: the controller puts its
// pods' /pav directories under it, the node plugin reads them there and
// serves its sockets there.
const KubeletDirHelp = "kubelet's root directory on the nodes (its --root-dir), the same for the controller and the node plugin: PaV's pods keep /pav under it, and the node plugin's sockets go there"

// PodDirRoot is the host directory under which each PaV pod gets its own /pav
// directory, on a node whose kubelet root directory is kubeletDir. It sits
// under that root, which kubelet keeps rshared, so mounts made in a pod's /pav
// with Bidirectional propagation reach the host. (PavProvisioner names are DNS
// labels, so no driver's plugin dir can collide.)
func PodDirRoot(kubeletDir string) string {
	return path.Join(kubeletDir, "plugins", "pav.albertofaria.github.io", "pods")
}

// CheckKubeletDir says whether dir can be a kubelet root directory setting: an
// absolute, clean path other than "/".
func CheckKubeletDir(dir string) error {
	if !path.IsAbs(dir) || path.Clean(dir) != dir || dir == "/" {
		return fmt.Errorf("the kubelet directory %q is not an absolute, clean path below /", dir)
	}
	return nil
}

// StagingID identifies one staging of a volume: kubelet publishes a volume
// once per client pod, at a target path unique to that pod and volume. It
// names the staging and unstaging pods (PodName).
func StagingID(volumeHandle, targetPath string) string {
	sum := sha256.Sum256([]byte(volumeHandle + "\x00" + targetPath))
	return hex.EncodeToString(sum[:])[:20]
}
