// Package csi makes every PavProvisioner a CSI driver on its node: for each
// provisioner name it serves the CSI Identity and Node services on
// <kubelet dir>/plugins/<name>/csi.sock and registers that socket with kubelet
// through the plugin registration API (<kubelet dir>/plugins_registry), in
// process, without node-driver-registrar. CSI node RPCs do not carry the
// driver name, hence one socket per name.
//
// PaV volumes need no attach and no separate NodeStage step: NodePublishVolume
// runs the staging pod and bind-mounts its /pav/volume at the target path, and
// NodeUnpublishVolume undoes that. This package only speaks CSI (argument
// checks, status codes, serialisation per volume); the work is a Stager's.
package csi

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/albertofaria/pav/kubelet"
)

// PublishRequest is a validated NodePublishVolume request.
type PublishRequest struct {
	VolumeID   string
	TargetPath string
	// Block: the volume is a raw block device and TargetPath a file.
	Block bool
	// ReadOnly: the request is read-only or the access mode is a reader-only one.
	ReadOnly bool
	// SingleWriter: the access mode is SINGLE_NODE_SINGLE_WRITER (kubelet's
	// for a ReadWriteOncePod claim): no other target on the node may have
	// the volume published at the same time.
	SingleWriter bool
	// MountFlags and FSType: the mount capability's, for Filesystem volumes
	// (kubelet passes the PV's mountOptions and spec.csi.fsType).
	MountFlags []string
	FSType     string
	// VolumeContext holds the PV's volumeAttributes and, because the
	// CSIDriver has podInfoOnMount, csi.storage.k8s.io/pod.* keys.
	VolumeContext map[string]string
	// ClientPodUID: the pod kubelet publishes for, from ContextPodUID (a
	// NodePublishVolume with a well-formed one); empty otherwise.
	ClientPodUID types.UID
	// StagingPath: where NodeStageVolume staged the volume, for a publish
	// that binds it from there (the driver stages per node); empty
	// otherwise.
	StagingPath string
}

// Stager does the actual staging and unstaging of volumes. Errors carrying a
// gRPC status are returned as they are; others become Internal.
type Stager interface {
	// Publish makes the volume available at req.TargetPath; idempotent. A
	// SingleWriter request for a volume published at another target on
	// the node fails with FailedPrecondition, as CSI asks.
	Publish(ctx context.Context, driver string, req *PublishRequest) error
	// Unpublish undoes Publish; idempotent, and succeeds for unknown volumes.
	Unpublish(ctx context.Context, driver, volumeID, targetPath string) error
	// Stats reports usage and health of the volume published at volumePath;
	// a NotFound status if nothing is published there.
	Stats(ctx context.Context, driver, volumeID, volumePath string) (*VolumeStats, error)
	// SharedStaging says whether the driver stages volumes once per node
	// (NodeStageVolume, kubelet then publishes from the staging path).
	SharedStaging(driver string) bool
	// Stage stages the volume once for every client pod of the node
	// (req.TargetPath is kubelet's staging path); idempotent.
	Stage(ctx context.Context, driver string, req *PublishRequest) error
	// Unstage undoes Stage once kubelet unpublished the last client.
	Unstage(ctx context.Context, driver, volumeID, stagingPath string) error
	// Ready is nil when the stager can serve calls (its caches are synced
	// and still watching), else why not. CSI Probe reports it.
	Ready() error
}

// VolumeStats is what NodeGetVolumeStats reports of a published volume.
type VolumeStats struct {
	// Bytes: for Block volumes only TotalBytes is known (the device size).
	Block                                 bool
	TotalBytes, AvailableBytes, UsedBytes int64
	TotalInodes, FreeInodes, UsedInodes   int64
	// Abnormal (with Reason and Message) when the volume cannot be used as
	// published: its long-running staging pod stopped, its mount is gone,
	// its file system no longer answers (a dead FUSE daemon). Usage may then
	// be unknown (all zero).
	Abnormal bool
	Reason   string // CamelCase, e.g. StagingPodStopped
	Message  string
}

// Keys kubelet adds to the volume context of drivers with podInfoOnMount.
const (
	ContextPodName        = "csi.storage.k8s.io/pod.name"
	ContextPodNamespace   = "csi.storage.k8s.io/pod.namespace"
	ContextPodUID         = "csi.storage.k8s.io/pod.uid"
	ContextServiceAccount = "csi.storage.k8s.io/serviceAccount.name"
	ContextEphemeral      = "csi.storage.k8s.io/ephemeral"
)

// clientPodUID is the client pod's UID in a NodePublishVolume's volume
// context, if kubelet put a well-formed one there.
func clientPodUID(volumeContext map[string]string) types.UID {
	if uid := volumeContext[ContextPodUID]; kubelet.IsUID(uid) {
		return types.UID(uid)
	}
	return ""
}

// Driver serves the CSI Identity and Node services for one driver name.
type Driver struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedNodeServer

	name    string
	version string
	nodeID  string
	stager  Stager
	// maxVolumes is NodeGetInfo's max_volumes_per_node (0: no limit).
	maxVolumes int64

	// inflight serialises operations per (volume, target path): kubelet
	// never issues two at once for one target, but a retry may overlap a
	// call that is still running after kubelet's deadline expired.
	mu       sync.Mutex
	inflight map[string]bool
}

// NewDriver returns the servers of driver name on node nodeID.
func NewDriver(name, version, nodeID string, stager Stager) *Driver {
	return &Driver{name: name, version: version, nodeID: nodeID, stager: stager, inflight: map[string]bool{}}
}

// Name is the driver (PavProvisioner) name.
func (d *Driver) Name() string { return d.name }

func (d *Driver) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: d.name, VendorVersion: d.version}, nil
}

// GetPluginCapabilities: VOLUME_ACCESSIBILITY_CONSTRAINTS for a
// provisioner with topology keys, which the CSI spec requires of a plugin
// whose NodeGetInfo reports accessible topology. There is no controller
// service (PaV's controller provisions through the API, not through CSI,
// and puts a volume's node affinity on its PV).
func (d *Driver) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	resp := &csi.GetPluginCapabilitiesResponse{}
	if tr, ok := d.stager.(TopologyReporter); ok && tr.HasTopology(d.name) {
		resp.Capabilities = append(resp.Capabilities, &csi.PluginCapability{Type: &csi.PluginCapability_Service_{
			Service: &csi.PluginCapability_Service{Type: csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS}}})
	}
	return resp, nil
}

// Probe: ready while the stager is (CSI lets a plugin that is alive but
// not ready answer ready=false rather than fail).
func (d *Driver) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	if err := d.stager.Ready(); err != nil {
		klog.V(2).InfoS("Probe: not ready", "driver", d.name, "err", err)
		return &csi.ProbeResponse{Ready: wrapperspb.Bool(false)}, nil
	}
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(true)}, nil
}

// NodeGetInfo: kubelet copies a nonzero MaxVolumesPerNode into the node's
// CSINode (spec.drivers[].allocatable.count) when the driver registers, and
// the scheduler then keeps pods whose volumes would exceed it off the node.
// A Stager that is a TopologyReporter gives the node's accessible topology,
// which kubelet writes into CSINode (topologyKeys) and the Node's labels.
func (d *Driver) NodeGetInfo(ctx context.Context, _ *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	resp := &csi.NodeGetInfoResponse{NodeId: d.nodeID, MaxVolumesPerNode: d.maxVolumes}
	if tr, ok := d.stager.(TopologyReporter); ok {
		seg, err := tr.NodeTopology(ctx, d.name)
		if err != nil {
			return nil, toStatus(err)
		}
		if len(seg) > 0 {
			resp.AccessibleTopology = &csi.Topology{Segments: seg}
		}
	}
	return resp, nil
}

// TopologyReporter is a Stager that knows the node's topology segment for
// a driver (nil: none) and whether the driver has topology at all.
type TopologyReporter interface {
	NodeTopology(ctx context.Context, driver string) (map[string]string, error)
	HasTopology(driver string) bool
}

// NodeGetCapabilities: volume stats, volume health (CSI 1.13's
// NodeGetVolumeHealth, which replaced VOLUME_CONDITION), and
// SINGLE_NODE_MULTI_WRITER, which makes kubelet pass a ReadWriteOncePod
// claim as SINGLE_NODE_SINGLE_WRITER and a ReadWriteOnce one as
// SINGLE_NODE_MULTI_WRITER (without it both are SINGLE_NODE_WRITER and the
// node plugin cannot tell them apart). STAGE_UNSTAGE_VOLUME only for a
// provisioner that shares stagings (Stager.SharedStaging): without it
// kubelet calls NodePublishVolume once per pod and target path, which is
// exactly one staging pod per client pod as the PaV spec describes; with it
// kubelet stages once per volume and node, counts the pods publishing it,
// and unstages after the last.
func (d *Driver) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	capability := func(t csi.NodeServiceCapability_RPC_Type) *csi.NodeServiceCapability {
		return &csi.NodeServiceCapability{Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: t}}}
	}
	caps := []*csi.NodeServiceCapability{
		capability(csi.NodeServiceCapability_RPC_GET_VOLUME_STATS),
		capability(csi.NodeServiceCapability_RPC_GET_VOLUME_HEALTH),
		capability(csi.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER),
	}
	if d.stager.SharedStaging(d.name) {
		caps = append(caps, capability(csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME))
	}
	return &csi.NodeGetCapabilitiesResponse{Capabilities: caps}, nil
}

func (d *Driver) NodeStageVolume(ctx context.Context, req *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	switch {
	case req.GetVolumeId() == "":
		return nil, status.Error(codes.InvalidArgument, "volume ID missing in request")
	case req.GetStagingTargetPath() == "":
		return nil, status.Error(codes.InvalidArgument, "staging target path missing in request")
	}
	vc := req.GetVolumeCapability()
	readOnly, _, err := accessOf(vc)
	if err != nil {
		return nil, err
	}
	if !d.begin(req.GetVolumeId(), req.GetStagingTargetPath()) {
		return nil, status.Errorf(codes.Aborted, "an operation on volume %s at %s is already in progress", req.GetVolumeId(), req.GetStagingTargetPath())
	}
	defer d.end(req.GetVolumeId(), req.GetStagingTargetPath())
	err = d.stager.Stage(ctx, d.name, &PublishRequest{
		VolumeID:      req.GetVolumeId(),
		TargetPath:    req.GetStagingTargetPath(),
		Block:         vc.GetBlock() != nil,
		ReadOnly:      readOnly,
		MountFlags:    vc.GetMount().GetMountFlags(),
		FSType:        vc.GetMount().GetFsType(),
		VolumeContext: req.GetVolumeContext(),
	})
	if err != nil {
		klog.ErrorS(err, "NodeStageVolume failed", "driver", d.name, "volume", req.GetVolumeId(), "stagingPath", req.GetStagingTargetPath())
		return nil, toStatus(err)
	}
	return &csi.NodeStageVolumeResponse{}, nil
}

func (d *Driver) NodeUnstageVolume(ctx context.Context, req *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	switch {
	case req.GetVolumeId() == "":
		return nil, status.Error(codes.InvalidArgument, "volume ID missing in request")
	case req.GetStagingTargetPath() == "":
		return nil, status.Error(codes.InvalidArgument, "staging target path missing in request")
	}
	if !d.begin(req.GetVolumeId(), req.GetStagingTargetPath()) {
		return nil, status.Errorf(codes.Aborted, "an operation on volume %s at %s is already in progress", req.GetVolumeId(), req.GetStagingTargetPath())
	}
	defer d.end(req.GetVolumeId(), req.GetStagingTargetPath())
	if err := d.stager.Unstage(ctx, d.name, req.GetVolumeId(), req.GetStagingTargetPath()); err != nil {
		klog.ErrorS(err, "NodeUnstageVolume failed", "driver", d.name, "volume", req.GetVolumeId(), "stagingPath", req.GetStagingTargetPath())
		return nil, toStatus(err)
	}
	return &csi.NodeUnstageVolumeResponse{}, nil
}

// accessOf checks a volume capability and says what its access mode means
// for PaV: read-only, or single writer (ReadWriteOncePod).
func accessOf(vc *csi.VolumeCapability) (readOnly, singleWriter bool, err error) {
	switch {
	case vc == nil:
		return false, false, status.Error(codes.InvalidArgument, "volume capability missing in request")
	case vc.GetBlock() == nil && vc.GetMount() == nil:
		return false, false, status.Error(codes.InvalidArgument, "volume capability must be block or mount")
	case vc.GetAccessMode() == nil:
		return false, false, status.Error(codes.InvalidArgument, "volume capability has no access mode")
	}
	switch mode := vc.GetAccessMode().GetMode(); mode {
	case csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY, csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY:
		return true, false, nil
	case csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER:
		return false, true, nil
	case csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER,
		csi.VolumeCapability_AccessMode_MULTI_NODE_SINGLE_WRITER, csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER:
		return false, false, nil // read-write unless the request says otherwise
	default:
		return false, false, status.Errorf(codes.InvalidArgument, "access mode %s is not supported", mode)
	}
}

// NodeGetVolumeStats reports the usage of a published volume (kubelet's
// kubelet_volume_stats_* metrics). Kubelet requires a usage entry, so an
// abnormal volume whose usage is unknown reports zeros.
func (d *Driver) NodeGetVolumeStats(ctx context.Context, req *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	switch {
	case req.GetVolumeId() == "":
		return nil, status.Error(codes.InvalidArgument, "volume ID missing in request")
	case req.GetVolumePath() == "":
		return nil, status.Error(codes.InvalidArgument, "volume path missing in request")
	}
	st, err := d.stager.Stats(ctx, d.name, req.GetVolumeId(), req.GetVolumePath())
	if err != nil {
		return nil, toStatus(err)
	}
	if st.Block {
		return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{{Unit: csi.VolumeUsage_BYTES, Total: st.TotalBytes}}}, nil
	}
	return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{
		{Unit: csi.VolumeUsage_BYTES, Total: st.TotalBytes, Available: st.AvailableBytes, Used: st.UsedBytes},
		{Unit: csi.VolumeUsage_INODES, Total: st.TotalInodes, Available: st.FreeInodes, Used: st.UsedInodes},
	}}, nil
}

// NodeGetVolumeHealth reports a published volume that can no longer be used
// (see VolumeStats.Abnormal) as INACCESSIBLE. Health is known per publish
// path (each has its own staging pod): without one, none is reported.
func (d *Driver) NodeGetVolumeHealth(ctx context.Context, req *csi.NodeGetVolumeHealthRequest) (*csi.NodeGetVolumeHealthResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID missing in request")
	}
	health := &csi.VolumeHealth{VolumeId: req.GetVolumeId()}
	if req.GetVolumePublishPath() == "" {
		return &csi.NodeGetVolumeHealthResponse{VolumeHealth: health}, nil
	}
	st, err := d.stager.Stats(ctx, d.name, req.GetVolumeId(), req.GetVolumePublishPath())
	if err != nil {
		return nil, toStatus(err)
	}
	if st.Abnormal {
		health.HealthStatuses = []*csi.VolumeHealth_VolumeHealthEntry{{
			Status: csi.VolumeHealthErrorType_INACCESSIBLE, Reason: st.Reason, Message: st.Message,
		}}
	}
	return &csi.NodeGetVolumeHealthResponse{VolumeHealth: health}, nil
}

func (d *Driver) NodePublishVolume(ctx context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	switch {
	case req.GetVolumeId() == "":
		return nil, status.Error(codes.InvalidArgument, "volume ID missing in request")
	case req.GetTargetPath() == "":
		return nil, status.Error(codes.InvalidArgument, "target path missing in request")
	}
	vc := req.GetVolumeCapability()
	readOnly, singleWriter, err := accessOf(vc)
	if err != nil {
		return nil, err
	}
	readOnly = readOnly || req.GetReadonly()
	if !d.begin(req.GetVolumeId(), req.GetTargetPath()) {
		return nil, status.Errorf(codes.Aborted, "an operation on volume %s at %s is already in progress", req.GetVolumeId(), req.GetTargetPath())
	}
	defer d.end(req.GetVolumeId(), req.GetTargetPath())
	err = d.stager.Publish(ctx, d.name, &PublishRequest{
		VolumeID:      req.GetVolumeId(),
		TargetPath:    req.GetTargetPath(),
		Block:         vc.GetBlock() != nil,
		ReadOnly:      readOnly,
		SingleWriter:  singleWriter,
		MountFlags:    vc.GetMount().GetMountFlags(),
		FSType:        vc.GetMount().GetFsType(),
		VolumeContext: req.GetVolumeContext(),
		ClientPodUID:  clientPodUID(req.GetVolumeContext()),
		StagingPath:   req.GetStagingTargetPath(),
	})
	if err != nil {
		klog.ErrorS(err, "NodePublishVolume failed", "driver", d.name, "volume", req.GetVolumeId(), "target", req.GetTargetPath())
		return nil, toStatus(err)
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

func (d *Driver) NodeUnpublishVolume(ctx context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	switch {
	case req.GetVolumeId() == "":
		return nil, status.Error(codes.InvalidArgument, "volume ID missing in request")
	case req.GetTargetPath() == "":
		return nil, status.Error(codes.InvalidArgument, "target path missing in request")
	}
	if !d.begin(req.GetVolumeId(), req.GetTargetPath()) {
		return nil, status.Errorf(codes.Aborted, "an operation on volume %s at %s is already in progress", req.GetVolumeId(), req.GetTargetPath())
	}
	defer d.end(req.GetVolumeId(), req.GetTargetPath())
	if err := d.stager.Unpublish(ctx, d.name, req.GetVolumeId(), req.GetTargetPath()); err != nil {
		klog.ErrorS(err, "NodeUnpublishVolume failed", "driver", d.name, "volume", req.GetVolumeId(), "target", req.GetTargetPath())
		return nil, toStatus(err)
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

func (d *Driver) begin(volumeID, target string) bool {
	key := volumeID + "\x00" + target
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.inflight[key] {
		return false
	}
	d.inflight[key] = true
	return true
}

func (d *Driver) end(volumeID, target string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.inflight, volumeID+"\x00"+target)
}

// toStatus keeps a status error's code; a context error becomes
// DeadlineExceeded or Canceled (kubelet treats both as "maybe still in
// progress" and calls again); anything else is Internal.
func toStatus(err error) error {
	if s, ok := status.FromError(err); ok {
		return s.Err()
	}
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) {
		return status.Error(se.GRPCStatus().Code(), err.Error())
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	}
	return status.Error(codes.Internal, fmt.Sprint(err))
}
