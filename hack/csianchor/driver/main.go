// Command csi-anchor-driver is the smallest CSI driver the cluster benchmark
// (test/benchcluster) needs as its CSI anchor, next to the real
// external-provisioner: csi-driver-host-path and node-driver-registrar are not
// served by the Go module proxy, and csi-test no longer has a mock driver.
// It is deliberately not PaV code, so that the anchor shares none of PaV's
// paths.
//
//	csi-anchor-driver controller --endpoint /csi/csi.sock
//	  Identity (CONTROLLER_SERVICE) and Controller: CreateVolume and
//	  DeleteVolume only record nothing and return at once.
//	csi-anchor-driver node --name NAME --node-id NODE --kubelet-dir DIR --data-dir DIR
//	  Identity and Node on DIR/plugins/NAME/csi.sock, registered with kubelet
//	  through DIR/plugins_registry (what node-driver-registrar does, in
//	  process); NodePublishVolume bind-mounts DATA-DIR/<volume id> at the
//	  target path, as csi-driver-host-path does.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
	"k8s.io/klog/v2"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: csi-anchor-driver controller|node [flags]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	name := fs.String("name", "csi-anchor.pav.bench", "driver name")
	endpoint := fs.String("endpoint", "/csi/csi.sock", "controller: the CSI socket")
	nodeID := fs.String("node-id", "", "node: this node's name")
	kubeletDir := fs.String("kubelet-dir", "/var/lib/kubelet", "node: kubelet's root directory")
	dataDir := fs.String("data-dir", "/var/lib/pav-bench-anchor", "node: where volumes' directories are")
	klog.InitFlags(fs)
	_ = fs.Parse(os.Args[2:])

	id := &identity{name: *name}
	var servers []*grpc.Server
	var sockets []string // removed at exit: kubelet deregisters a driver whose socket is gone
	var err error
	switch os.Args[1] {
	case "controller":
		id.controller = true
		s := grpc.NewServer()
		csi.RegisterIdentityServer(s, id)
		csi.RegisterControllerServer(s, &controller{})
		err = serve(s, *endpoint)
		servers = append(servers, s)
	case "node":
		csiSocket := filepath.Join(*kubeletDir, "plugins", *name, "csi.sock")
		s := grpc.NewServer()
		csi.RegisterIdentityServer(s, id)
		csi.RegisterNodeServer(s, &node{id: *nodeID, dataDir: *dataDir})
		regSocket := filepath.Join(*kubeletDir, "plugins_registry", *name+"-reg.sock")
		if err = serve(s, csiSocket); err == nil {
			r := grpc.NewServer()
			registerapi.RegisterRegistrationServer(r, &registration{name: *name, endpoint: csiSocket})
			err = serve(r, regSocket)
			servers = append(servers, s, r)
			sockets = append(sockets, regSocket, csiSocket)
		}
	default:
		err = fmt.Errorf("unknown mode %q", os.Args[1])
	}
	if err != nil {
		klog.ErrorS(err, "Starting")
		os.Exit(1)
	}
	klog.InfoS("Serving", "mode", os.Args[1], "driver", *name)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	for _, path := range sockets {
		_ = os.Remove(path)
	}
	for _, s := range servers {
		s.Stop()
	}
}

// serve serves s on a new Unix socket at path.
func serve(s *grpc.Server, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return err
	}
	go func() { _ = s.Serve(l) }()
	return nil
}

type identity struct {
	csi.UnimplementedIdentityServer
	name       string
	controller bool
}

func (i *identity) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: i.name, VendorVersion: "0.1"}, nil
}

func (i *identity) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	resp := &csi.GetPluginCapabilitiesResponse{}
	if i.controller {
		resp.Capabilities = append(resp.Capabilities, &csi.PluginCapability{Type: &csi.PluginCapability_Service_{
			Service: &csi.PluginCapability_Service{Type: csi.PluginCapability_Service_CONTROLLER_SERVICE}}})
	}
	return resp, nil
}

func (i *identity) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(true)}, nil
}

type controller struct {
	csi.UnimplementedControllerServer
}

func (*controller) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: []*csi.ControllerServiceCapability{{
		Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME}},
	}}}, nil
}

// CreateVolume: the volume's ID is its name (unique per claim), so a retry
// gets the same volume, as CSI requires.
func (*controller) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	if req.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "name missing")
	}
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: req.GetName(), CapacityBytes: req.GetCapacityRange().GetRequiredBytes()}}, nil
}

func (*controller) DeleteVolume(context.Context, *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	return &csi.DeleteVolumeResponse{}, nil
}

type node struct {
	csi.UnimplementedNodeServer
	id, dataDir string
}

func (n *node) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: n.id}, nil
}

func (n *node) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{}, nil
}

func (n *node) NodePublishVolume(_ context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	id, target := req.GetVolumeId(), req.GetTargetPath()
	if id == "" || target == "" || filepath.Base(id) != id {
		return nil, status.Error(codes.InvalidArgument, "bad volume ID or target path")
	}
	src := filepath.Join(n.dataDir, id)
	if err := os.MkdirAll(src, 0o777); err != nil {
		return nil, status.Errorf(codes.Internal, "creating %s: %v", src, err)
	}
	if err := os.MkdirAll(target, 0o750); err != nil {
		return nil, status.Errorf(codes.Internal, "creating %s: %v", target, err)
	}
	if mounted(target) {
		return &csi.NodePublishVolumeResponse{}, nil
	}
	flags := uintptr(syscall.MS_BIND)
	if err := syscall.Mount(src, target, "", flags, ""); err != nil {
		return nil, status.Errorf(codes.Internal, "bind-mounting %s at %s: %v", src, target, err)
	}
	if req.GetReadonly() {
		if err := syscall.Mount("", target, "", flags|syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
			return nil, status.Errorf(codes.Internal, "remounting %s read-only: %v", target, err)
		}
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

func (n *node) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	target := req.GetTargetPath()
	if target == "" {
		return nil, status.Error(codes.InvalidArgument, "target path missing")
	}
	if mounted(target) {
		if err := syscall.Unmount(target, 0); err != nil {
			return nil, status.Errorf(codes.Internal, "unmounting %s: %v", target, err)
		}
	}
	if err := os.Remove(target); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, status.Errorf(codes.Internal, "removing %s: %v", target, err)
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// mounted tells whether path is a mount point (field 5 of a line of
// /proc/self/mountinfo; kubelet's paths have no spaces to escape).
func mounted(path string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == path {
			return true
		}
	}
	return false
}

type registration struct {
	registerapi.UnimplementedRegistrationServer
	name, endpoint string
}

func (r *registration) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: r.name, Endpoint: r.endpoint, SupportedVersions: []string{"1.0.0"}}, nil
}

func (r *registration) NotifyRegistrationStatus(_ context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if !st.PluginRegistered {
		klog.ErrorS(errors.New(st.Error), "Kubelet failed to register the driver")
	} else {
		klog.InfoS("Kubelet registered the driver")
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}
