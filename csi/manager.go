package csi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"k8s.io/klog/v2"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// Manager keeps one CSI server and one kubelet registration server per
// driver name, under a kubelet root directory (/var/lib/kubelet, or a
// temporary directory in tests).
type Manager struct {
	kubeletDir string
	version    string
	nodeID     string
	stager     Stager

	mu      sync.Mutex
	drivers map[string]*served
}

type served struct {
	driver     *Driver
	csiServer  *grpc.Server
	regServer  *grpc.Server
	csiSocket  string
	regSocket  string
	registered chan struct{} // closed once kubelet reported success
	once       sync.Once
}

// NewManager serves drivers under kubeletDir.
func NewManager(kubeletDir, version, nodeID string, stager Stager) *Manager {
	return &Manager{kubeletDir: kubeletDir, version: version, nodeID: nodeID, stager: stager, drivers: map[string]*served{}}
}

// CSISocket is where driver name's CSI endpoint is.
func (m *Manager) CSISocket(name string) string {
	return filepath.Join(m.kubeletDir, "plugins", name, "csi.sock")
}

// RegistrationSocket is the socket kubelet's plugin watcher discovers.
func (m *Manager) RegistrationSocket(name string) string {
	return filepath.Join(m.kubeletDir, "plugins_registry", name+"-reg.sock")
}

// Names lists the drivers being served.
func (m *Manager) Names() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for n := range m.drivers {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Registered returns a channel closed once kubelet has registered driver
// name, or nil if it is not served.
func (m *Manager) Registered(name string) <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.drivers[name]; s != nil {
		return s.registered
	}
	return nil
}

// Add starts serving driver name (no-op if already served). The CSI socket
// comes first: kubelet calls NodeGetInfo on it as soon as it sees the
// registration socket.
func (m *Manager) Add(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.drivers[name]; ok {
		return nil
	}
	s := &served{
		driver:     NewDriver(name, m.version, m.nodeID, m.stager),
		csiSocket:  m.CSISocket(name),
		regSocket:  m.RegistrationSocket(name),
		registered: make(chan struct{}),
	}
	csiLis, err := listen(s.csiSocket)
	if err != nil {
		return err
	}
	s.csiServer = grpc.NewServer(grpc.UnaryInterceptor(logErrors))
	csi.RegisterIdentityServer(s.csiServer, s.driver)
	csi.RegisterNodeServer(s.csiServer, s.driver)
	go serve(s.csiServer, csiLis)

	regLis, err := listen(s.regSocket)
	if err != nil {
		s.csiServer.Stop()
		_ = os.Remove(s.csiSocket)
		return err
	}
	s.regServer = grpc.NewServer()
	registerapi.RegisterRegistrationServer(s.regServer, &registration{s: s})
	go serve(s.regServer, regLis)

	m.drivers[name] = s
	klog.InfoS("Serving CSI driver", "driver", name, "endpoint", s.csiSocket, "registration", s.regSocket)
	return nil
}

// Remove stops serving driver name. Removing the registration socket makes
// kubelet deregister the driver.
func (m *Manager) Remove(name string) {
	m.mu.Lock()
	s, ok := m.drivers[name]
	delete(m.drivers, name)
	m.mu.Unlock()
	if !ok {
		return
	}
	s.regServer.Stop()
	_ = os.Remove(s.regSocket)
	// Let running NodePublish/NodeUnpublish calls finish.
	s.csiServer.GracefulStop()
	_ = os.Remove(s.csiSocket)
	_ = os.Remove(filepath.Dir(s.csiSocket))
	klog.InfoS("Stopped serving CSI driver", "driver", name)
}

// Stop removes every driver.
func (m *Manager) Stop() {
	for _, n := range m.Names() {
		m.Remove(n)
	}
}

// listen creates a Unix socket at path, replacing a stale one left by a
// previous incarnation of the node plugin.
func listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("creating socket directory: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("removing stale socket %s: %w", path, err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", path, err)
	}
	return l, nil
}

func serve(s *grpc.Server, l net.Listener) {
	if err := s.Serve(l); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		klog.ErrorS(err, "gRPC server stopped", "address", l.Addr().String())
	}
}

func logErrors(ctx context.Context, req interface{}, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (interface{}, error) {
	klog.V(4).InfoS("gRPC call", "method", info.FullMethod)
	resp, err := handler(ctx, req)
	if err != nil {
		klog.V(2).InfoS("gRPC call failed", "method", info.FullMethod, "err", err)
	}
	return resp, err
}

// registration answers kubelet's plugin watcher for one driver.
type registration struct {
	registerapi.UnimplementedRegistrationServer
	s *served
}

func (r *registration) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{
		Type:              registerapi.CSIPlugin,
		Name:              r.s.driver.name,
		Endpoint:          r.s.csiSocket,
		SupportedVersions: []string{"1.0.0"},
	}, nil
}

func (r *registration) NotifyRegistrationStatus(_ context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if !st.PluginRegistered {
		klog.ErrorS(errors.New(st.Error), "Kubelet failed to register CSI driver", "driver", r.s.driver.name)
	} else {
		klog.V(2).InfoS("Kubelet registered CSI driver", "driver", r.s.driver.name)
		r.s.once.Do(func() { close(r.s.registered) })
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}
