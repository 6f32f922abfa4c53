// Package csisanity runs csi-sanity against a CSI node service in a unit
// test. PaV's drivers have no controller service, so the test gives the
// volumes' part of one (Volumes), which the identity service advertises.
package csisanity

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
	"google.golang.org/grpc"
)

// Driver is the service under test: its identity and node services.
type Driver interface {
	csi.IdentityServer
	csi.NodeServer
}

// Volumes is what a test's controller service does for csi-sanity, which
// creates the volumes the node tests stage and publish.
type Volumes interface {
	CreateVolume(context.Context, *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error)
	DeleteVolume(context.Context, *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error)
	ValidateVolumeCapabilities(context.Context, *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error)
}

// Test serves driver and volumes on a Unix socket and runs csi-sanity
// against them, each call made twice (idempotency).
func Test(t *testing.T, driver Driver, volumes Volumes) {
	t.Helper()
	// Not t.TempDir(): a socket's path is at most 108 bytes, and that one
	// holds the test's name.
	dir, err := os.MkdirTemp("", "pav-sanity")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "csi.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	csi.RegisterIdentityServer(srv, withController{driver})
	csi.RegisterNodeServer(srv, driver)
	csi.RegisterControllerServer(srv, &controller{volumes: volumes})
	go srv.Serve(lis)
	defer srv.Stop()

	cfg := sanity.NewTestConfig()
	cfg.Address = "unix:" + sock
	cfg.TargetPath = filepath.Join(dir, "target")
	cfg.StagingPath = filepath.Join(dir, "staging")
	cfg.IdempotentCount = 2
	sanity.Test(t, cfg)
}

// VolumeID is the ID a test's CreateVolume gives the volume csi-sanity
// names: a hash, as csi-sanity's names are 128 characters (too long for
// object names).
func VolumeID(name string) string {
	sum := sha256.Sum256([]byte(name))
	return hex.EncodeToString(sum[:16])
}

// withController advertises the test's controller service.
type withController struct{ Driver }

func (withController) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{Capabilities: []*csi.PluginCapability{{
		Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: csi.PluginCapability_Service_CONTROLLER_SERVICE}},
	}}}, nil
}

// controller is a controller service that creates and deletes volumes.
type controller struct {
	csi.UnimplementedControllerServer
	volumes Volumes
}

func (c *controller) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: []*csi.ControllerServiceCapability{{
		Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME}},
	}}}, nil
}

func (c *controller) CreateVolume(ctx context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	return c.volumes.CreateVolume(ctx, req)
}

func (c *controller) DeleteVolume(ctx context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	return c.volumes.DeleteVolume(ctx, req)
}

func (c *controller) ValidateVolumeCapabilities(ctx context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	return c.volumes.ValidateVolumeCapabilities(ctx, req)
}
