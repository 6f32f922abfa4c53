package templating

import (
	"context"
	"fmt"
	"math"
	"slices"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"gopkg.in/inf.v0"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/templating/jinja"
)

// The names of each context, as the *Vars functions below build them
// (context_test.go checks they agree). Some are present only when known
// (sourcePvc when cloning, pv and handle when deleting a volume that has
// them): templates test them with "is defined".
var (
	requestVarNames = []string{"requestedVolumeMode", "requestedAccessModes", "requestedMinCapacity", "requestedMaxCapacity"}
	dynamicVarNames = concat(requestVarNames, "params", "sc", "pvc", "selectedNodeName", "sourcePvc", "sourcePv", "sourceHandle", "snapshot", "snapshotContent", "snapshotHandle", "requisiteTopology", "preferredTopology", "vac", "mutableParams")
	staticVarNames  = concat(requestVarNames, "params", "handle", "pv")
	// inlinePod: validation (its fields only), creation and deletion of
	// CSI inline ephemeral volumes (which are never expanded).
	inlineVarNames    = concat(requestVarNames, "params", "selectedNodeName", "requisiteTopology", "preferredTopology", "inlinePod")
	creationVarNames  = concat(dynamicVarNames, "defaultHandle", "inlinePod")
	deletionVarNames  = concat(creationVarNames, "pv", "handle")
	expansionVarNames = concat(dynamicVarNames, "defaultHandle", "pv", "handle", "capacity")
	// modificationVarNames: expansion's, plus the class the volume has now.
	modificationVarNames = concat(expansionVarNames, "currentVac", "currentMutableParams")
	stagingVarNames      = []string{"volumeMode", "accessModes", "capacity", "params", "handle", "readOnly", "mountOptions", "fsType", "pvc", "pv", "node", "inlinePod"}
)

func concat(a []string, more ...string) []string { return append(slices.Clone(a), more...) }

// ContextVariables are the names a phase's templates get from PaV, sorted.
// Validation's depend on the provisioning modes: a provisioner with both
// gets both contexts' names (each template sees one of them at a time).
func ContextVariables(phase protocol.Phase, modes []v1alpha1.ProvisioningMode) []string {
	var names []string
	switch phase {
	case protocol.PhaseValidation:
		if slices.Contains(modes, v1alpha1.Dynamic) {
			names = append(names, dynamicVarNames...)
		}
		if slices.Contains(modes, v1alpha1.Static) {
			names = append(names, staticVarNames...)
		}
		// A CSI inline ephemeral volume's fields (InlineValidation).
		names = append(names, inlineVarNames...)
	case protocol.PhaseCreation:
		names = creationVarNames
	case protocol.PhaseDeletion:
		names = deletionVarNames
	case protocol.PhaseExpansion:
		names = expansionVarNames
	case protocol.PhaseModification:
		names = modificationVarNames
	case protocol.PhaseStaging, protocol.PhaseUnstaging:
		names = stagingVarNames
	}
	out := slices.Clone(names)
	slices.Sort(out)
	return slices.Compact(out)
}

// PVCGetter looks a PersistentVolumeClaim up for get_pvc(name, namespace).
// Its errors reach the template's caller (they are never turned into an
// undefined value).
type PVCGetter func(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error)

// DynamicRequest is what dynamic provisioning's phases (validation, creation,
// deletion) are evaluated for.
type DynamicRequest struct {
	PVC   *corev1.PersistentVolumeClaim
	Class *storagev1.StorageClass
	// SelectedNodeName is the node the scheduler picked (WaitForFirstConsumer),
	// or the controller chose (Immediate binding with topology keys), "" when
	// none; templates see it as selectedNodeName (none when "").
	SelectedNodeName string
	// PV and Handle are for deletion only (a PaV-Go addition): the volume
	// being deleted, as pv, and its handle, as handle (the one the creation
	// pod chose). Reverting a failed creation has no PV, and a handle only if
	// the creation pod wrote one.
	PV     *corev1.PersistentVolume
	Handle string
	// SourcePVC and SourcePV, when cloning (a PaV-Go addition): the claim
	// named in the new claim's dataSource and its volume; templates see them
	// as sourcePvc, sourcePv and sourceHandle.
	SourcePVC *corev1.PersistentVolumeClaim
	SourcePV  *corev1.PersistentVolume
	// SourceSnapshot and SourceContent, when restoring (a PaV-Go addition):
	// the VolumeSnapshot named in the new claim's dataSource and its bound
	// content; templates see them as snapshot, snapshotContent and
	// snapshotHandle.
	SourceSnapshot *snapshotv1.VolumeSnapshot
	SourceContent  *snapshotv1.VolumeSnapshotContent
	// VolumeAttributesClass, when the claim names one (a PaV-Go addition):
	// the class a new volume is created with, or that a modification gives
	// the volume; templates see it as vac and its parameters as
	// mutableParams (CSI's mutable_parameters; {} without a class).
	VolumeAttributesClass *storagev1.VolumeAttributesClass
	// CurrentVolumeAttributesClass, for a modification: the class the
	// volume has now (nil: none); templates see currentVac and
	// currentMutableParams.
	CurrentVolumeAttributesClass *storagev1.VolumeAttributesClass
	// Topology, for a provisioner with spec.topologyKeys (a PaV-Go
	// addition): what external-provisioner would pass to CreateVolume;
	// templates see requisiteTopology and preferredTopology (none when nil).
	Topology *Topology
	// Inline, for a CSI inline ephemeral volume (a PaV-Go addition), in
	// place of PVC and Class: see inlineVars.
	Inline *protocol.InlineVolume
}

// Topology is CSI's TopologyRequirement: segments the volume must be
// accessible from (any one of Requisite), best first (Preferred).
type Topology struct {
	Requisite []protocol.Segment `json:"requisite"`
	Preferred []protocol.Segment `json:"preferred"`
}

func segmentList(segs []protocol.Segment) []interface{} {
	out := make([]interface{}, len(segs))
	for i, s := range segs {
		out[i] = stringMap(s)
	}
	return out
}

// StaticRequest is what static provisioning's validation is evaluated for.
type StaticRequest struct {
	PV *corev1.PersistentVolume
}

// StagingRequest is what staging and unstaging are evaluated for.
type StagingRequest struct {
	PVC      *corev1.PersistentVolumeClaim
	PV       *corev1.PersistentVolume
	Node     *corev1.Node
	ReadOnly bool
	// MountOptions and FSType: what kubelet passed in NodePublishVolume's
	// mount capability (the PV's mountOptions and spec.csi.fsType), none
	// for Block volumes.
	MountOptions []string
	FSType       string
}

var (
	pvcGVK   = corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim")
	pvGVK    = corev1.SchemeGroupVersion.WithKind("PersistentVolume")
	nodeGVK  = corev1.SchemeGroupVersion.WithKind("Node")
	classGVK = storagev1.SchemeGroupVersion.WithKind("StorageClass")
	vacGVK   = storagev1.SchemeGroupVersion.WithKind("VolumeAttributesClass")
)

// toMap converts a typed object into the JSON-like form the API server
// returns, apiVersion and kind included.
func toMap(obj runtime.Object, gvk schema.GroupVersionKind) (map[string]interface{}, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("converting %s: %w", gvk.Kind, err)
	}
	if m["apiVersion"] == nil || m["apiVersion"] == "" {
		m["apiVersion"] = gvk.GroupVersion().String()
	}
	if m["kind"] == nil || m["kind"] == "" {
		m["kind"] = gvk.Kind
	}
	return m, nil
}

func stringList[T ~string](in []T) []interface{} {
	out := make([]interface{}, len(in))
	for i, s := range in {
		out[i] = string(s)
	}
	return out
}

func stringMap(in map[string]string) map[string]interface{} {
	out := make(map[string]interface{}, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

// VolumeRequest is what a claim (dynamic) or a PersistentVolume (static) asks
// of a provisioner; ValidationConfig.Check judges it.
type VolumeRequest struct {
	VolumeMode  corev1.PersistentVolumeMode
	AccessModes []corev1.PersistentVolumeAccessMode
	MinCapacity int64  // bytes
	MaxCapacity *int64 // bytes, nil when unlimited
}

// maxBytes is the largest capacity PaV accepts: an int64 number of bytes
// (8 EiB). The API server accepts larger quantities (1e19, 1e100), which no
// volume has; converting them to int64 would wrap and bypass maxCapacity.
var maxBytes = inf.NewDec(math.MaxInt64, 0)

// Bytes is a capacity in bytes (rounded up), or an error for a negative
// quantity or one that does not fit in an int64.
func Bytes(q resource.Quantity) (int64, error) {
	if q.Sign() < 0 {
		return 0, fmt.Errorf("capacity %s is negative", q.String())
	}
	if q.AsDec().Cmp(maxBytes) > 0 { // exact, whatever the suffix

		return 0, fmt.Errorf("capacity %s is larger than %d bytes", q.String(), int64(math.MaxInt64))
	}
	return q.Value(), nil
}

// DynamicVolumeRequest: volume mode (Filesystem when unset), access modes,
// requests.storage as the minimum and limits.storage (if any) as the maximum.
func DynamicVolumeRequest(pvc *corev1.PersistentVolumeClaim) (VolumeRequest, error) {
	r := VolumeRequest{
		VolumeMode:  corev1.PersistentVolumeFilesystem,
		AccessModes: pvc.Spec.AccessModes,
	}
	if pvc.Spec.VolumeMode != nil && *pvc.Spec.VolumeMode != "" {
		r.VolumeMode = *pvc.Spec.VolumeMode
	}
	var err error
	if q, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; ok {
		if r.MinCapacity, err = Bytes(q); err != nil {
			return r, fmt.Errorf("the claim's storage request: %w", err)
		}
	}
	if q, ok := pvc.Spec.Resources.Limits[corev1.ResourceStorage]; ok {
		v, err := Bytes(q)
		if err != nil {
			return r, fmt.Errorf("the claim's storage limit: %w", err)
		}
		r.MaxCapacity = &v
	}
	return r, nil
}

// StaticVolumeRequest: the PV's volume mode, access modes and capacity (as
// both minimum and maximum).
func StaticVolumeRequest(pv *corev1.PersistentVolume) (VolumeRequest, error) {
	r := VolumeRequest{
		VolumeMode:  corev1.PersistentVolumeFilesystem,
		AccessModes: pv.Spec.AccessModes,
	}
	if pv.Spec.VolumeMode != nil && *pv.Spec.VolumeMode != "" {
		r.VolumeMode = *pv.Spec.VolumeMode
	}
	if q, ok := pv.Spec.Capacity[corev1.ResourceStorage]; ok {
		var err error
		if r.MinCapacity, err = Bytes(q); err != nil {
			return r, fmt.Errorf("the PersistentVolume's capacity: %w", err)
		}
	}
	v := r.MinCapacity
	r.MaxCapacity = &v
	return r, nil
}

func requestVars(r VolumeRequest) map[string]interface{} {
	vars := map[string]interface{}{
		"requestedVolumeMode":  string(r.VolumeMode),
		"requestedAccessModes": stringList(r.AccessModes),
		"requestedMinCapacity": r.MinCapacity,
		"requestedMaxCapacity": nil,
	}
	if r.MaxCapacity != nil {
		vars["requestedMaxCapacity"] = *r.MaxCapacity
	}
	return vars
}

// dynamicVars is the volumeValidation context of dynamic provisioning, plus
// PaV-Go's selectedNodeName, requisiteTopology and preferredTopology.
func dynamicVars(r DynamicRequest) (map[string]interface{}, error) {
	if r.Inline != nil {
		return inlineVars(r), nil
	}
	if r.PVC == nil {
		return nil, fmt.Errorf("no PersistentVolumeClaim")
	}
	if r.Class == nil {
		return nil, fmt.Errorf("no StorageClass")
	}
	req, err := DynamicVolumeRequest(r.PVC)
	if err != nil {
		return nil, err
	}
	vars := requestVars(req)
	vars["params"] = stringMap(r.Class.Parameters)
	if vars["sc"], err = toMap(r.Class, classGVK); err != nil {
		return nil, err
	}
	if vars["pvc"], err = toMap(r.PVC, pvcGVK); err != nil {
		return nil, err
	}
	vars["selectedNodeName"] = nil
	if r.SelectedNodeName != "" {
		vars["selectedNodeName"] = r.SelectedNodeName
	}
	vars["requisiteTopology"], vars["preferredTopology"] = nil, nil
	if r.Topology != nil {
		vars["requisiteTopology"] = segmentList(r.Topology.Requisite)
		vars["preferredTopology"] = segmentList(r.Topology.Preferred)
	}
	if vars["vac"], vars["mutableParams"], err = vacVars(r.VolumeAttributesClass); err != nil {
		return nil, err
	}
	if r.SourcePVC != nil && r.SourcePV != nil {
		if vars["sourcePvc"], err = toMap(r.SourcePVC, pvcGVK); err != nil {
			return nil, err
		}
		if vars["sourcePv"], err = toMap(r.SourcePV, pvGVK); err != nil {
			return nil, err
		}
		if r.SourcePV.Spec.CSI != nil {
			vars["sourceHandle"] = r.SourcePV.Spec.CSI.VolumeHandle
		}
	}
	if r.SourceSnapshot != nil && r.SourceContent != nil {
		if vars["snapshot"], err = toMap(r.SourceSnapshot, snapshotGVK); err != nil {
			return nil, err
		}
		if vars["snapshotContent"], err = toMap(r.SourceContent, contentGVK); err != nil {
			return nil, err
		}
		vars["snapshotHandle"] = SnapshotHandle(r.SourceContent)
	}
	return vars, nil
}

// inlineVars is the validation and creation context of a CSI inline
// ephemeral volume, which has no claim, class or PV: an empty request for a
// Filesystem ReadWriteOncePod volume (requestedMinCapacity 0, no maximum),
// the volume's attributes (InlineAttributes: declared, checked, defaults
// added) as params, the pod's node as selectedNodeName, and
// inlinePod (the pod's name, namespace, uid and serviceAccountName); pvc,
// sc, topology and the sources are undefined.
func inlineVars(r DynamicRequest) map[string]interface{} {
	vars := requestVars(VolumeRequest{VolumeMode: corev1.PersistentVolumeFilesystem, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod}})
	vars["params"] = stringMap(r.Inline.Attributes)
	vars["selectedNodeName"] = r.SelectedNodeName
	vars["requisiteTopology"], vars["preferredTopology"] = nil, nil
	vars["inlinePod"] = inlinePodVar(*r.Inline)
	return vars
}

func inlinePodVar(v protocol.InlineVolume) map[string]interface{} {
	return map[string]interface{}{"name": v.PodName, "namespace": v.PodNamespace, "uid": v.PodUID, "serviceAccountName": v.ServiceAccount}
}

// creationVars is the context of volumeCreation and volumeDeletion; an
// inline volume's default handle is kubelet's volume ID.
func creationVars(r DynamicRequest) (map[string]interface{}, error) {
	vars, err := dynamicVars(r)
	if err != nil {
		return nil, err
	}
	if r.Inline != nil {
		vars["defaultHandle"] = r.Inline.VolumeID
	} else {
		vars["defaultHandle"] = protocol.VolumeName(r.PVC)
	}
	return vars, nil
}

// deletionVars is the context of volumeDeletion: creation's plus pv and
// handle when known.
func deletionVars(r DynamicRequest) (map[string]interface{}, error) {
	vars, err := creationVars(r)
	if err != nil {
		return nil, err
	}
	if r.PV != nil {
		if vars["pv"], err = toMap(r.PV, pvGVK); err != nil {
			return nil, err
		}
	}
	if r.Handle != "" {
		vars["handle"] = r.Handle
	}
	return vars, nil
}

// expansionVars is the context of volumeExpansion: creation's (with the new
// size requested) plus pv, handle and the volume's current capacity.
func expansionVars(r DynamicRequest) (map[string]interface{}, error) {
	vars, err := creationVars(r)
	if err != nil {
		return nil, err
	}
	if vars["pv"], err = toMap(r.PV, pvGVK); err != nil {
		return nil, err
	}
	if r.PV.Spec.CSI != nil {
		vars["handle"] = r.PV.Spec.CSI.VolumeHandle
	}
	capacity := r.PV.Spec.Capacity[corev1.ResourceStorage]
	vars["capacity"] = capacity.Value()
	return vars, nil
}

// modificationVars is the context of volumeModification: expansion's (vac
// and mutableParams are the new class) plus currentVac and
// currentMutableParams, the class the volume has now.
func modificationVars(r DynamicRequest) (map[string]interface{}, error) {
	vars, err := expansionVars(r)
	if err != nil {
		return nil, err
	}
	if vars["currentVac"], vars["currentMutableParams"], err = vacVars(r.CurrentVolumeAttributesClass); err != nil {
		return nil, err
	}
	return vars, nil
}

// vacVars are a VolumeAttributesClass as templates see it (none without
// one) and its parameters ({} without one).
func vacVars(vac *storagev1.VolumeAttributesClass) (obj, params interface{}, err error) {
	if vac == nil {
		return nil, map[string]interface{}{}, nil
	}
	m, err := toMap(vac, vacGVK)
	if err != nil {
		return nil, nil, err
	}
	return m, stringMap(vac.Parameters), nil
}

// staticVars is the volumeValidation context of static provisioning.
func staticVars(r StaticRequest) (map[string]interface{}, error) {
	if r.PV == nil {
		return nil, fmt.Errorf("no PersistentVolume")
	}
	req, err := StaticVolumeRequest(r.PV)
	if err != nil {
		return nil, err
	}
	vars := requestVars(req)
	vars["params"] = map[string]interface{}{}
	vars["handle"] = ""
	if csi := r.PV.Spec.CSI; csi != nil {
		vars["params"] = stringMap(csi.VolumeAttributes)
		vars["handle"] = csi.VolumeHandle
	}
	if vars["pv"], err = toMap(r.PV, pvGVK); err != nil {
		return nil, err
	}
	return vars, nil
}

// stagingVars is the context of volumeStaging and volumeUnstaging.
func stagingVars(r StagingRequest) (map[string]interface{}, error) {
	if r.PVC == nil || r.PV == nil || r.Node == nil {
		return nil, fmt.Errorf("staging needs the PersistentVolumeClaim, the PersistentVolume and the Node")
	}
	mode := corev1.PersistentVolumeFilesystem
	if m := r.PVC.Spec.VolumeMode; m != nil && *m != "" {
		mode = *m
	} else if m := r.PV.Spec.VolumeMode; m != nil && *m != "" {
		mode = *m
	}
	var capacity int64
	if q, ok := r.PV.Spec.Capacity[corev1.ResourceStorage]; ok {
		var err error
		if capacity, err = Bytes(q); err != nil {
			return nil, fmt.Errorf("the PersistentVolume's capacity: %w", err)
		}
	}
	vars := map[string]interface{}{
		"volumeMode":  string(mode),
		"accessModes": stringList(r.PVC.Spec.AccessModes),
		"capacity":    capacity,
		"params":      map[string]interface{}{},
		"handle":      "",
		"readOnly":    r.ReadOnly,
		// PaV-Go additions.
		"mountOptions": stringList(r.MountOptions),
		"fsType":       r.FSType,
	}
	if csi := r.PV.Spec.CSI; csi != nil {
		vars["params"] = stringMap(csi.VolumeAttributes)
		vars["handle"] = csi.VolumeHandle
	}
	var err error
	// An inline volume's claim and PV are made up (protocol.InlinePV):
	// templates see inlinePod instead of pvc, and pv as made up.
	if v, ok := protocol.InlineOf(r.PV); ok {
		vars["inlinePod"] = inlinePodVar(v)
	} else if vars["pvc"], err = toMap(r.PVC, pvcGVK); err != nil {
		return nil, err
	}
	if vars["pv"], err = toMap(r.PV, pvGVK); err != nil {
		return nil, err
	}
	if vars["node"], err = toMap(r.Node, nodeGVK); err != nil {
		return nil, err
	}
	return vars, nil
}

// functions binds get_pvc to a getter and a context.
func functions(ctx context.Context, get PVCGetter) *jinja.Functions {
	return &jinja.Functions{GetPVC: func(name, namespace string) (map[string]interface{}, error) {
		if get == nil {
			return nil, fmt.Errorf("get_pvc is not available here")
		}
		pvc, err := get(ctx, namespace, name)
		if err != nil {
			return nil, err
		}
		if pvc == nil {
			return nil, fmt.Errorf("PersistentVolumeClaim %s/%s not found", namespace, name)
		}
		return toMap(pvc, pvcGVK)
	}}
}
