package csi

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/types"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/albertofaria/pav/internal/csisanity"
	"github.com/albertofaria/pav/internal/testwait"
)

// fakeStager stages volumes created through fakeController by creating the
// target (directory or file) and remembering it.
type fakeStager struct {
	mu        sync.Mutex
	volumes   map[string]bool
	published map[string]*PublishRequest // by target path
	block     chan struct{}              // if set, Publish waits on it
	err       error
	shared    bool              // SharedStaging
	staged    map[string]string // volume ID by staging path
}

func newFakeStager() *fakeStager {
	return &fakeStager{volumes: map[string]bool{}, published: map[string]*PublishRequest{}}
}

func (f *fakeStager) Ready() error { return nil }

func (f *fakeStager) Publish(ctx context.Context, driver string, req *PublishRequest) error {
	if f.block != nil {
		<-f.block
	}
	if f.err != nil {
		return f.err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.volumes[req.VolumeID] {
		return status.Errorf(codes.NotFound, "volume %s not found", req.VolumeID)
	}
	if p, ok := f.published[req.TargetPath]; ok {
		if p.VolumeID != req.VolumeID || p.ReadOnly != req.ReadOnly || p.Block != req.Block {
			return status.Errorf(codes.AlreadyExists, "%s is published differently", req.TargetPath)
		}
		return nil
	}
	for target, p := range f.published {
		if p.VolumeID == req.VolumeID && req.SingleWriter {
			return status.Errorf(codes.FailedPrecondition, "volume %s is already published at %s", req.VolumeID, target)
		}
	}
	if req.Block {
		if err := os.WriteFile(req.TargetPath, nil, 0o600); err != nil {
			return err
		}
	} else if err := os.MkdirAll(req.TargetPath, 0o750); err != nil {
		return err
	}
	f.published[req.TargetPath] = req
	return nil
}

func (f *fakeStager) Stats(ctx context.Context, driver, volumeID, volumePath string) (*VolumeStats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.published[volumePath]
	if !ok || p.VolumeID != volumeID {
		return nil, status.Errorf(codes.NotFound, "volume %s is not published at %s", volumeID, volumePath)
	}
	if p.Block {
		return &VolumeStats{Block: true, TotalBytes: 1 << 20}, nil
	}
	return &VolumeStats{TotalBytes: 100, AvailableBytes: 60, UsedBytes: 40, TotalInodes: 10, FreeInodes: 7, UsedInodes: 3}, nil
}

func (f *fakeStager) SharedStaging(string) bool { return f.shared }

func (f *fakeStager) Stage(ctx context.Context, driver string, req *PublishRequest) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.staged == nil {
		f.staged = map[string]string{}
	}
	f.staged[req.TargetPath] = req.VolumeID
	return nil
}

func (f *fakeStager) Unstage(ctx context.Context, driver, volumeID, stagingPath string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.staged, stagingPath)
	return nil
}

func (f *fakeStager) Unpublish(ctx context.Context, driver, volumeID, targetPath string) error {
	if f.err != nil {
		return f.err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.published, targetPath)
	if err := os.RemoveAll(targetPath); err != nil {
		return err
	}
	return nil
}

// fakeController lets csi-sanity create volumes for the node tests; PaV
// itself has no controller service (only the test advertises one).
type fakeController struct {
	s     *fakeStager
	sizes map[string]int64
}

func (c *fakeController) ValidateVolumeCapabilities(_ context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID missing")
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "capabilities missing")
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if !c.s.volumes[req.GetVolumeId()] {
		return nil, status.Error(codes.NotFound, "no such volume")
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeCapabilities: req.GetVolumeCapabilities()}}, nil
}

func (c *fakeController) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	if req.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "name missing")
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "capabilities missing")
	}
	id := csisanity.VolumeID(req.GetName())
	size := req.GetCapacityRange().GetRequiredBytes()
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if c.sizes == nil {
		c.sizes = map[string]int64{}
	}
	if old, ok := c.sizes[id]; ok && old != size {
		return nil, status.Errorf(codes.AlreadyExists, "volume %s exists with another size", req.GetName())
	}
	c.sizes[id] = size
	c.s.volumes[id] = true
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: id, CapacityBytes: req.GetCapacityRange().GetRequiredBytes()}}, nil
}

func (c *fakeController) DeleteVolume(_ context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID missing")
	}
	c.s.mu.Lock()
	delete(c.s.volumes, req.GetVolumeId())
	delete(c.sizes, req.GetVolumeId())
	c.s.mu.Unlock()
	return &csi.DeleteVolumeResponse{}, nil
}

func TestSanity(t *testing.T) {
	stager := newFakeStager()
	csisanity.Test(t, NewDriver("sanity.example", "test", "node1", stager), &fakeController{s: stager})
}

func dial(t *testing.T, sock string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("unix:"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func TestNodePublishArguments(t *testing.T) {
	mountCap := &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
	blockROCap := &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY},
	}
	tests := []struct {
		name      string
		req       *csi.NodePublishVolumeRequest
		stagerErr error
		code      codes.Code
		want      *PublishRequest
	}{
		{name: "no volume id", req: &csi.NodePublishVolumeRequest{TargetPath: "/t", VolumeCapability: mountCap}, code: codes.InvalidArgument},
		{name: "no target", req: &csi.NodePublishVolumeRequest{VolumeId: "v", VolumeCapability: mountCap}, code: codes.InvalidArgument},
		{name: "no capability", req: &csi.NodePublishVolumeRequest{VolumeId: "v", TargetPath: "/t"}, code: codes.InvalidArgument},
		{name: "no access type", req: &csi.NodePublishVolumeRequest{VolumeId: "v", TargetPath: "/t", VolumeCapability: &csi.VolumeCapability{
			AccessMode: mountCap.AccessMode}}, code: codes.InvalidArgument},
		{name: "mount", req: &csi.NodePublishVolumeRequest{VolumeId: "v", TargetPath: "/t", VolumeCapability: mountCap,
			VolumeContext: map[string]string{ContextPodName: "p"}},
			code: codes.OK, want: &PublishRequest{VolumeID: "v", TargetPath: "/t", VolumeContext: map[string]string{ContextPodName: "p"}}},
		{name: "readonly flag", req: &csi.NodePublishVolumeRequest{VolumeId: "v", TargetPath: "/t", VolumeCapability: mountCap, Readonly: true},
			code: codes.OK, want: &PublishRequest{VolumeID: "v", TargetPath: "/t", ReadOnly: true}},
		{name: "reader-only access mode, block", req: &csi.NodePublishVolumeRequest{VolumeId: "v", TargetPath: "/t", VolumeCapability: blockROCap},
			code: codes.OK, want: &PublishRequest{VolumeID: "v", TargetPath: "/t", ReadOnly: true, Block: true}},
		{name: "single writer (ReadWriteOncePod)", req: &csi.NodePublishVolumeRequest{VolumeId: "v", TargetPath: "/t", VolumeCapability: &csi.VolumeCapability{
			AccessType: mountCap.AccessType, AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER}}},
			code: codes.OK, want: &PublishRequest{VolumeID: "v", TargetPath: "/t", SingleWriter: true}},
		{name: "multi writer (ReadWriteOnce)", req: &csi.NodePublishVolumeRequest{VolumeId: "v", TargetPath: "/t", VolumeCapability: &csi.VolumeCapability{
			AccessType: mountCap.AccessType, AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER}}},
			code: codes.OK, want: &PublishRequest{VolumeID: "v", TargetPath: "/t"}},
		{name: "unknown access mode", req: &csi.NodePublishVolumeRequest{VolumeId: "v", TargetPath: "/t", VolumeCapability: &csi.VolumeCapability{
			AccessType: mountCap.AccessType, AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_UNKNOWN}}},
			code: codes.InvalidArgument},
		{name: "mount flags and fsType", req: &csi.NodePublishVolumeRequest{VolumeId: "v", TargetPath: "/t", VolumeCapability: &csi.VolumeCapability{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: "ext4", MountFlags: []string{"noatime", "sync"}}},
			AccessMode: mountCap.AccessMode}},
			code: codes.OK, want: &PublishRequest{VolumeID: "v", TargetPath: "/t", MountFlags: []string{"noatime", "sync"}, FSType: "ext4"}},
		{name: "stager status kept", req: &csi.NodePublishVolumeRequest{VolumeId: "v", TargetPath: "/t", VolumeCapability: mountCap},
			stagerErr: status.Error(codes.FailedPrecondition, "static validation failed"), code: codes.FailedPrecondition},
		{name: "wrapped status kept", req: &csi.NodePublishVolumeRequest{VolumeId: "v", TargetPath: "/t", VolumeCapability: mountCap},
			stagerErr: fmt.Errorf("context: %w", status.Error(codes.NotFound, "no PV")), code: codes.NotFound},
		{name: "deadline", req: &csi.NodePublishVolumeRequest{VolumeId: "v", TargetPath: "/t", VolumeCapability: mountCap},
			stagerErr: fmt.Errorf("waiting: %w", context.DeadlineExceeded), code: codes.DeadlineExceeded},
		{name: "plain error is internal", req: &csi.NodePublishVolumeRequest{VolumeId: "v", TargetPath: "/t", VolumeCapability: mountCap},
			stagerErr: errors.New("boom"), code: codes.Internal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recordingStager{err: tt.stagerErr}
			d := NewDriver("d", "v", "n", rec)
			_, err := d.NodePublishVolume(context.Background(), tt.req)
			if got := status.Code(err); got != tt.code {
				t.Fatalf("code = %v (%v), want %v", got, err, tt.code)
			}
			if tt.want != nil {
				if rec.last == nil {
					t.Fatal("stager not called")
				}
				got := *rec.last
				if got.VolumeContext == nil {
					got.VolumeContext = nil
				}
				if fmt.Sprint(got) != fmt.Sprint(*tt.want) {
					t.Errorf("stager got %+v, want %+v", got, *tt.want)
				}
			}
		})
	}
}

type recordingStager struct {
	err      error
	last     *PublishRequest
	notReady error
}

func (r *recordingStager) Ready() error { return r.notReady }

func (r *recordingStager) SharedStaging(string) bool { return false }

func (r *recordingStager) Stage(ctx context.Context, driver string, req *PublishRequest) error {
	r.last = req
	return r.err
}

func (r *recordingStager) Unstage(context.Context, string, string, string) error { return r.err }

func (r *recordingStager) Publish(_ context.Context, _ string, req *PublishRequest) error {
	r.last = req
	return r.err
}
func (r *recordingStager) Unpublish(context.Context, string, string, string) error { return r.err }
func (r *recordingStager) Stats(context.Context, string, string, string) (*VolumeStats, error) {
	return &VolumeStats{Abnormal: true, Reason: "StagingPodStopped", Message: "the staging pod stopped"}, r.err
}

// Probe reports the stager's readiness: kubelet and liveness probes see a
// node plugin whose caches stopped as not ready.
func TestProbeFollowsStager(t *testing.T) {
	s := &recordingStager{}
	d := NewDriver("d", "v", "n", s)
	for _, notReady := range []error{nil, errors.New("the pods informer stopped"), nil} {
		s.notReady = notReady
		resp, err := d.Probe(context.Background(), &csi.ProbeRequest{})
		if err != nil || resp.GetReady().GetValue() != (notReady == nil) {
			t.Errorf("stager not ready %v: Probe %v, %v", notReady, resp, err)
		}
	}
}

// Stats and health go from the stager to CSI as kubelet reads them: usage
// always present, an abnormal volume INACCESSIBLE with the stager's reason.
func TestVolumeStatsAndHealth(t *testing.T) {
	ctx := context.Background()
	caps, err := NewDriver("d", "v", "n", &recordingStager{}).NodeGetCapabilities(ctx, &csi.NodeGetCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var got []csi.NodeServiceCapability_RPC_Type
	for _, c := range caps.Capabilities {
		got = append(got, c.GetRpc().GetType())
	}
	if !reflect.DeepEqual(got, []csi.NodeServiceCapability_RPC_Type{csi.NodeServiceCapability_RPC_GET_VOLUME_STATS, csi.NodeServiceCapability_RPC_GET_VOLUME_HEALTH,
		csi.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER}) {
		t.Errorf("capabilities %v", got)
	}

	d := NewDriver("d", "v", "n", &recordingStager{})
	stats, err := d.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: "v", VolumePath: "/t"})
	if err != nil || len(stats.Usage) != 2 {
		t.Fatalf("abnormal volume's stats %v, %v: kubelet needs usage entries", stats, err)
	}
	health, err := d.NodeGetVolumeHealth(ctx, &csi.NodeGetVolumeHealthRequest{VolumeId: "v", VolumePublishPath: "/t"})
	if err != nil {
		t.Fatal(err)
	}
	if h := health.VolumeHealth.HealthStatuses; len(h) != 1 || h[0].Status != csi.VolumeHealthErrorType_INACCESSIBLE || h[0].Reason != "StagingPodStopped" {
		t.Errorf("health %v", health)
	}
	for _, req := range []*csi.NodeGetVolumeStatsRequest{{VolumePath: "/t"}, {VolumeId: "v"}} {
		if _, err := d.NodeGetVolumeStats(ctx, req); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%v: %v, want InvalidArgument", req, err)
		}
	}
	f := newFakeStager()
	if _, err := NewDriver("d", "v", "n", f).NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: "v", VolumePath: "/nowhere"}); status.Code(err) != codes.NotFound {
		t.Errorf("unpublished path: %v, want NotFound", err)
	}
}

func TestConcurrentCallsAreAborted(t *testing.T) {
	s := newFakeStager()
	s.volumes["v"] = true
	s.block = make(chan struct{})
	d := NewDriver("d", "v", "n", s)
	target := filepath.Join(t.TempDir(), "t")
	req := &csi.NodePublishVolumeRequest{VolumeId: "v", TargetPath: target, VolumeCapability: &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}}
	done := make(chan error)
	go func() { _, err := d.NodePublishVolume(context.Background(), req); done <- err }()
	// Wait until the first call holds the volume.
	for deadline := time.Now().Add(5 * time.Second); ; {
		d.mu.Lock()
		n := len(d.inflight)
		d.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("first call never started")
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := d.NodeUnpublishVolume(context.Background(), &csi.NodeUnpublishVolumeRequest{VolumeId: "v", TargetPath: target}); status.Code(err) != codes.Aborted {
		t.Errorf("overlapping call: %v, want Aborted", err)
	}
	close(s.block)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Check notices a served driver's socket that is gone.
func TestManagerCheck(t *testing.T) {
	dir := t.TempDir()
	m := NewManager(dir, "1.2.3", "node1", newFakeStager())
	defer m.Stop()
	created := make(chan string, 1)
	m.socketCreated = func(name string) { created <- name }
	if err := m.Add("prov"); err != nil {
		t.Fatal(err)
	}
	<-created
	if err := m.Check(); err != nil {
		t.Fatalf("all sockets in place: %v", err)
	}
	for _, socket := range []string{m.RegistrationSocket("prov"), m.CSISocket("prov")} {
		if err := os.Remove(socket); err != nil {
			t.Fatal(err)
		}
		if err := m.Check(); err == nil || !strings.Contains(err.Error(), socket) {
			t.Errorf("%s removed: Check() = %v", socket, err)
		}
	}
}

// TestNodeGetInfoVolumeLimit: every driver a manager serves reports the
// manager's volume limit to kubelet, and none (0) unless one is set.
func TestNodeGetInfoVolumeLimit(t *testing.T) {
	for _, limit := range []int64{0, 40} {
		m := NewManager(t.TempDir(), "1.2.3", "node1", newFakeStager())
		if limit != 0 {
			m.LimitVolumes(limit)
		}
		for _, name := range []string{"prov-a", "prov-b"} {
			if err := m.Add(name); err != nil {
				t.Fatal(err)
			}
			ni, err := csi.NewNodeClient(dial(t, m.CSISocket(name))).NodeGetInfo(context.Background(), &csi.NodeGetInfoRequest{})
			if err != nil || ni.NodeId != "node1" || ni.MaxVolumesPerNode != limit {
				t.Errorf("limit %d: %s: NodeGetInfo = %v, %v; want max_volumes_per_node %d", limit, name, ni, err, limit)
			}
		}
		m.Stop()
	}
}

func TestCheckVolumeLimit(t *testing.T) {
	for n, ok := range map[int64]bool{0: true, 1: true, math.MaxInt32: true, -1: false, math.MaxInt32 + 1: false} {
		if err := CheckVolumeLimit(n); (err == nil) != ok {
			t.Errorf("CheckVolumeLimit(%d) = %v", n, err)
		}
	}
}

func TestManagerRegistration(t *testing.T) {
	dir := t.TempDir()
	m := NewManager(dir, "1.2.3", "node1", newFakeStager())
	// A stale socket from a previous incarnation must not stop us.
	if err := os.MkdirAll(filepath.Join(dir, "plugins_registry"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(m.RegistrationSocket("prov"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := m.Add("prov"); err != nil {
		t.Fatal(err)
	}
	if err := m.Add("prov"); err != nil {
		t.Fatalf("second Add: %v", err)
	}
	ctx := context.Background()
	testwait.Until(t, "the registration socket is served", func() bool {
		_, err := registerapi.NewRegistrationClient(dial(t, m.RegistrationSocket("prov"))).GetInfo(ctx, &registerapi.InfoRequest{})
		return err == nil
	})
	reg := registerapi.NewRegistrationClient(dial(t, m.RegistrationSocket("prov")))
	info, err := reg.GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if info.Type != registerapi.CSIPlugin || info.Name != "prov" || info.Endpoint != filepath.Join(dir, "plugins/prov/csi.sock") ||
		len(info.SupportedVersions) != 1 || info.SupportedVersions[0] != "1.0.0" {
		t.Errorf("GetInfo = %+v", info)
	}
	// What kubelet does next: NodeGetInfo on the endpoint, then report back.
	conn := dial(t, info.Endpoint)
	ni, err := csi.NewNodeClient(conn).NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
	if err != nil || ni.NodeId != "node1" {
		t.Fatalf("NodeGetInfo = %v, %v", ni, err)
	}
	pi, err := csi.NewIdentityClient(conn).GetPluginInfo(ctx, &csi.GetPluginInfoRequest{})
	if err != nil || pi.Name != "prov" || pi.VendorVersion != "1.2.3" {
		t.Fatalf("GetPluginInfo = %v, %v", pi, err)
	}
	if _, err := reg.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-m.Registered("prov"):
	default:
		t.Error("Registered not closed after kubelet's success notification")
	}
	if got := m.Names(); len(got) != 1 || got[0] != "prov" {
		t.Errorf("Names = %v", got)
	}
	m.Remove("prov")
	testwait.Until(t, "the driver's sockets and directory are gone", func() bool {
		for _, p := range []string{m.RegistrationSocket("prov"), m.CSISocket("prov"), filepath.Dir(m.CSISocket("prov"))} {
			if _, err := os.Stat(p); !os.IsNotExist(err) {
				return false
			}
		}
		return true
	})
	m.Remove("prov") // idempotent
	m.Stop()
}

// fakeCSINode is NodeDrivers over an in-memory driver list, with a kubelet
// that may forget to deregister.
type fakeCSINode struct {
	mu      sync.Mutex
	drivers map[string]bool
	removed []string // by the manager's repair
	changed chan struct{}
}

func newFakeCSINode() *fakeCSINode {
	return &fakeCSINode{drivers: map[string]bool{}, changed: make(chan struct{}, 1)}
}

func (f *fakeCSINode) set(name string, listed bool) {
	f.mu.Lock()
	f.drivers[name] = listed
	f.mu.Unlock()
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

func (f *fakeCSINode) Lists(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.drivers[name]
}

func (f *fakeCSINode) Changed() <-chan struct{} { return f.changed }

func (f *fakeCSINode) Remove(_ context.Context, name string) error {
	f.mu.Lock()
	f.removed = append(f.removed, name)
	f.mu.Unlock()
	f.set(name, false)
	return nil
}

// Registration sockets appear one at a time, each after kubelet confirmed the
// previous one; removals wait for CSINode, and a driver kubelet failed to
// remove from CSINode is removed by the manager.
func TestManagerPacesRegistration(t *testing.T) {
	dir := t.TempDir()
	m := NewManager(dir, "1.2.3", "node1", newFakeStager())
	m.confirmTimeout.Store(int64(time.Hour)) // only confirmations move the registrar on
	node := newFakeCSINode()
	m.UseNodeDrivers(node)
	created := make(chan string, 10)
	m.socketCreated = func(name string) { created <- name }
	var mu sync.Mutex
	var log []string
	record := func(e string) { mu.Lock(); log = append(log, e); mu.Unlock() }

	names := []string{"a", "b", "c", "d"}
	for _, n := range names {
		if err := m.Add(n); err != nil {
			t.Fatal(err)
		}
	}
	// A kubelet that registers each socket it is shown.
	for range names {
		var n string
		select {
		case n = <-created:
		case <-time.After(10 * time.Second):
			t.Fatalf("registration stalled; log %v", log)
		}
		record("created " + n)
		node.set(n, true)
		reg := registerapi.NewRegistrationClient(dial(t, m.RegistrationSocket(n)))
		record("confirmed " + n)
		if _, err := reg.NotifyRegistrationStatus(context.Background(), &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"created a", "confirmed a", "created b", "confirmed b", "created c", "confirmed c", "created d", "confirmed d"}
	if !reflect.DeepEqual(log, want) {
		t.Errorf("registration order %v, want %v", log, want)
	}

	// kubelet deregisters a and c, but "forgets" b and d (conflicts): the
	// manager waits for CSINode, then removes b and d itself.
	m.confirmTimeout.Store(int64(100 * time.Millisecond))
	for _, n := range names {
		m.Remove(n)
		if n == "a" || n == "c" {
			testwait.Until(t, n+"'s registration socket is removed", func() bool {
				_, err := os.Stat(m.RegistrationSocket(n))
				return os.IsNotExist(err)
			})
			node.set(n, false)
		}
	}
	testwait.Until(t, "every driver is stopped", func() bool {
		_, err := os.Stat(filepath.Join(dir, "plugins", "d"))
		return os.IsNotExist(err)
	})
	node.mu.Lock()
	defer node.mu.Unlock()
	if !reflect.DeepEqual(node.removed, []string{"b", "d"}) {
		t.Errorf("manager removed %v from CSINode, want [b d]", node.removed)
	}
	for _, n := range names {
		if node.drivers[n] {
			t.Errorf("CSINode still lists %s", n)
		}
	}
	m.Stop()
}

// newDrainFixture is a manager under a temporary kubelet directory in which
// kubelet tracks one file system volume of driver "prov"; it returns that
// volume's state directory.
func newDrainFixture(t *testing.T) (m *Manager, dir, volume string) {
	t.Helper()
	dir = t.TempDir()
	m = NewManager(dir, "1.2.3", "node1", newFakeStager())
	volume = filepath.Join(dir, "plugins/kubernetes.io/csi/prov/0123abcd")
	if err := os.MkdirAll(filepath.Join(volume, "globalmount"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(volume, "vol_data.json"), []byte(`{"driverName":"prov"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return m, dir, volume
}

// A removed driver whose volumes kubelet still tracks keeps being served (kubelet's
// UnmountDevice calls it after the last NodeUnpublishVolume) until that state is gone.
func TestManagerDrainsWhileKubeletTracksVolumes(t *testing.T) {
	m, _, volume := newDrainFixture(t)
	if err := m.Add("prov"); err != nil {
		t.Fatal(err)
	}
	m.Remove("prov")
	conn := dial(t, m.CSISocket("prov"))
	if _, err := csi.NewNodeClient(conn).NodeGetCapabilities(context.Background(), &csi.NodeGetCapabilitiesRequest{}); err != nil {
		t.Fatalf("draining driver does not answer NodeGetCapabilities: %v", err)
	}
	// kubelet's UnmountDevice done: it deletes vol_data.json, and the
	// directory unless a mount is left there
	if err := os.Remove(filepath.Join(volume, "vol_data.json")); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "the drained driver's sockets are gone", func() bool {
		_, err1 := os.Stat(m.CSISocket("prov"))
		_, err2 := os.Stat(m.RegistrationSocket("prov"))
		return os.IsNotExist(err1) && os.IsNotExist(err2) && len(m.Names()) == 0
	})
}

func TestManagerDrainsWhileKubeletTracksBlockVolumes(t *testing.T) {
	dir := t.TempDir()
	m := NewManager(dir, "1.2.3", "node1", newFakeStager())
	data := filepath.Join(dir, "plugins/kubernetes.io/csi/volumeDevices/pvc-1/data")
	if err := os.MkdirAll(data, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "vol_data.json"), []byte(`{"driverName":"prov","volumeHandle":"h"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := m.Add("prov"); err != nil {
		t.Fatal(err)
	}
	if err := m.Add("other"); err != nil {
		t.Fatal(err)
	}
	m.Remove("other") // kubelet tracks nothing of it: stopped at once
	m.Remove("prov")
	if got := m.Names(); len(got) != 1 || got[0] != "prov" {
		t.Errorf("Names while a block volume is tracked = %v, want [prov]", got)
	}
	m.Stop()
}

// Add during draining cancels it; a restarted manager finds what it served.
func TestManagerReAddAndLeftovers(t *testing.T) {
	m, dir, volume := newDrainFixture(t)
	drainEnded := make(chan string, 1)
	m.drainEnded = func(name string) { drainEnded <- name }
	for _, n := range []string{"prov", "other"} {
		if err := m.Add(n); err != nil {
			t.Fatal(err)
		}
	}
	m.Remove("prov")
	if err := m.Add("prov"); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(volume); err != nil {
		t.Fatal(err)
	}
	select { // the drain notices the volume is gone, and that it was cancelled
	case <-drainEnded:
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled drain never ended")
	}
	if _, err := os.Stat(m.CSISocket("prov")); err != nil {
		t.Fatalf("re-added driver stopped: %v", err)
	}

	// A new incarnation (the sockets stay when the node plugin exits).
	m2 := NewManager(dir, "1.2.3", "node1", newFakeStager())
	if got := m2.Leftovers(); len(got) != 2 || got[0] != "other" || got[1] != "prov" {
		t.Errorf("Leftovers = %v", got)
	}
	if err := m2.Add("prov"); err != nil {
		t.Fatal(err)
	}
	if got := m2.Leftovers(); len(got) != 1 || got[0] != "other" {
		t.Errorf("Leftovers after Add = %v", got)
	}
	m.Stop()
	m2.Stop()
}

// A provisioner deleted and created again (same name) while kubelet still
// lists the old driver: the old incarnation, stopped once kubelet let it go,
// leaves the new one's sockets alone. (Closing a Go Unix listener unlinks its
// path, which had become the new incarnation's socket: kubelet then failed to
// register the driver until the liveness probe restarted the node plugin.)
func TestManagerReAddWhileDeregisteringKeepsSockets(t *testing.T) {
	dir := t.TempDir()
	m := NewManager(dir, "1.2.3", "node1", newFakeStager())
	defer m.Stop()
	m.confirmTimeout.Store(int64(time.Hour))
	node := newFakeCSINode()
	m.UseNodeDrivers(node)
	created := make(chan string, 2)
	m.socketCreated = func(name string) { created <- name }
	if err := m.Add("prov"); err != nil {
		t.Fatal(err)
	}
	<-created
	node.set("prov", true)
	reg := registerapi.NewRegistrationClient(dial(t, m.RegistrationSocket("prov")))
	if _, err := reg.NotifyRegistrationStatus(context.Background(), &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
		t.Fatal(err)
	}

	m.Remove("prov")
	testwait.Until(t, "the old registration socket is removed", func() bool {
		_, err := os.Stat(m.RegistrationSocket("prov"))
		return os.IsNotExist(err)
	})
	if err := m.Add("prov"); err != nil { // while the old one waits for CSINode
		t.Fatal(err)
	}
	node.set("prov", false) // kubelet deregistered the old one
	select {
	case <-created:
	case <-time.After(10 * time.Second):
		t.Fatal("the new incarnation never created its registration socket")
	}
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
	identity := csi.NewIdentityClient(dial(t, m.CSISocket("prov")))
	if _, err := identity.GetPluginInfo(context.Background(), &csi.GetPluginInfoRequest{}); err != nil {
		t.Fatalf("the new incarnation's CSI socket: %v", err)
	}
}

// A driver retired by a new incarnation before its registration came up
// (Leftovers: Add, then Remove at once) still loses the registration socket
// the previous incarnation left, which would keep it registered with kubelet.
func TestManagerRetiresLeftoverRegistration(t *testing.T) {
	dir := t.TempDir()
	m := NewManager(dir, "1.2.3", "node1", newFakeStager())
	m.confirmTimeout.Store(int64(time.Hour)) // the first registration never completes
	if err := m.Add("first"); err != nil {   // keeps the registrar busy
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "plugins_registry"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(m.RegistrationSocket("old"), nil, 0o600); err != nil { // the previous incarnation's
		t.Fatal(err)
	}
	if err := m.Add("old"); err != nil {
		t.Fatal(err)
	}
	m.Remove("old")
	m.Remove("first")
	testwait.Until(t, "the old registration socket is removed", func() bool {
		_, err := os.Stat(m.RegistrationSocket("old"))
		return os.IsNotExist(err)
	})
	m.Stop()
}

// A driver that shares stagings advertises STAGE_UNSTAGE_VOLUME, stages
// through the stager, and passes the staging path on to publishes.
func TestSharedStagingThroughNodeStage(t *testing.T) {
	ctx := context.Background()
	for _, shared := range []bool{false, true} {
		stager := newFakeStager()
		stager.shared = shared
		d := NewDriver("prov", "v", "node", stager)
		caps, err := d.NodeGetCapabilities(ctx, &csi.NodeGetCapabilitiesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		advertised := false
		for _, c := range caps.GetCapabilities() {
			advertised = advertised || c.GetRpc().GetType() == csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME
		}
		if advertised != shared {
			t.Errorf("shared %v: STAGE_UNSTAGE_VOLUME advertised %v", shared, advertised)
		}
	}
	stager := newFakeStager()
	stager.shared = true
	stager.volumes["v1"] = true
	d := NewDriver("prov", "v", "node", stager)
	mountCap := &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER}}
	if _, err := d.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "v1", StagingTargetPath: "/staging"}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("a stage without a capability: %v, want InvalidArgument", err)
	}
	if _, err := d.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "v1", StagingTargetPath: "/staging", VolumeCapability: mountCap}); err != nil {
		t.Fatal(err)
	}
	if stager.staged["/staging"] != "v1" {
		t.Fatalf("staged %v", stager.staged)
	}
	target := filepath.Join(t.TempDir(), "target")
	if _, err := d.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "v1", StagingTargetPath: "/staging", TargetPath: target, VolumeCapability: mountCap}); err != nil {
		t.Fatal(err)
	}
	if got := stager.published[target].StagingPath; got != "/staging" {
		t.Errorf("publish got staging path %q", got)
	}
	if _, err := d.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "v1", StagingTargetPath: "/staging"}); err != nil || len(stager.staged) != 0 {
		t.Errorf("unstage: %v, still staged %v", err, stager.staged)
	}
}

// kubelet names the client pod in the volume context (podInfoOnMount); the
// stager gets its UID only in the form the API server makes.
func TestPublishPassesTheClientPodUID(t *testing.T) {
	ctx := context.Background()
	const uid = "0f6f8a3e-7c1b-4d0a-9a51-2b8d3c4e5f60"
	mountCap := &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}
	for given, want := range map[string]types.UID{uid: uid, "": "", "not-a-uid": "", "urn:uuid:" + uid: ""} {
		stager := newFakeStager()
		stager.volumes["v1"] = true
		d := NewDriver("prov", "v", "node", stager)
		target := filepath.Join(t.TempDir(), "target")
		req := &csi.NodePublishVolumeRequest{VolumeId: "v1", TargetPath: target, VolumeCapability: mountCap}
		if given != "" {
			req.VolumeContext = map[string]string{ContextPodUID: given}
		}
		if _, err := d.NodePublishVolume(ctx, req); err != nil {
			t.Fatal(err)
		}
		if got := stager.published[target].ClientPodUID; got != want {
			t.Errorf("volume context pod.uid %q: ClientPodUID %q, want %q", given, got, want)
		}
	}
}

// topologyStager is a fakeStager whose drivers named "zoned" have topology.
type topologyStager struct{ *fakeStager }

func (topologyStager) HasTopology(driver string) bool { return driver == "zoned" }
func (t topologyStager) NodeTopology(_ context.Context, driver string) (map[string]string, error) {
	if !t.HasTopology(driver) {
		return nil, nil
	}
	return map[string]string{"topology.kubernetes.io/zone": "a"}, nil
}

// A driver that reports accessible topology in NodeGetInfo has the
// VOLUME_ACCESSIBILITY_CONSTRAINTS plugin capability, as the CSI spec
// requires; one without topology has neither.
func TestTopologyCapability(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"zoned", "flat"} {
		d := NewDriver(name, "v", "node1", topologyStager{newFakeStager()})
		caps, err := d.GetPluginCapabilities(ctx, &csi.GetPluginCapabilitiesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		info, err := d.NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
		if err != nil {
			t.Fatal(err)
		}
		hasCap := len(caps.Capabilities) == 1 && caps.Capabilities[0].GetService().GetType() == csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS
		if hasTopology := info.AccessibleTopology != nil; hasCap != hasTopology || hasTopology != (name == "zoned") {
			t.Errorf("%s: capabilities %v, accessible topology %v", name, caps.Capabilities, info.AccessibleTopology)
		}
	}
}
