package csi

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/fsnotify/fsnotify"
	"google.golang.org/grpc"
	"k8s.io/klog/v2"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/albertofaria/pav/kubelet"
)

// Manager keeps one CSI server and one kubelet registration server per
// driver name, under a kubelet root directory (/var/lib/kubelet, or a
// temporary directory in tests).
//
// Kubelet registers and deregisters drivers concurrently, each updating the
// node's CSINode with a few conflict retries: with many drivers at once some
// updates give up and CSINode keeps listing drivers that are gone. So the
// registration sockets, which kubelet acts on, are created and removed one
// at a time (registrar), each change confirmed before the next: by kubelet's
// registration status, and through NodeDrivers by CSINode itself, which the
// manager repairs where kubelet left a removed driver behind.
type Manager struct {
	kubeletDir kubelet.Dir
	version    string
	nodeID     string
	stager     Stager
	maxVolumes int64 // of every driver (LimitVolumes)

	mu      sync.Mutex
	drivers map[string]*served
	pending []registrarOp // FIFO of the registrar
	wake    chan struct{} // the registrar has work (capacity 1)
	done    chan struct{} // closed by Stop

	nodeDrivers NodeDrivers
	// confirmTimeout bounds each wait for kubelet (or CSINode) to confirm a
	// registration change; past it the registrar goes on (and repairs CSINode).
	// Nanoseconds; atomic so that tests may change it.
	confirmTimeout atomic.Int64

	// drainEnded, if set (by tests), is called when a drain goroutine ends.
	drainEnded func(name string)
	// socketCreated, if set (by tests), is called when the registrar has
	// created a registration socket.
	socketCreated func(name string)
}

// NodeDrivers is this node's CSINode, as far as registration needs it.
type NodeDrivers interface {
	// Lists tells whether CSINode lists driver name.
	Lists(name string) bool
	// Changed receives after CSINode changed (changes may be coalesced).
	Changed() <-chan struct{}
	// Remove deletes driver name from CSINode.
	Remove(ctx context.Context, name string) error
}

// registrarOp creates (register) or removes the registration socket of s.
type registrarOp struct {
	s        *served
	register bool
}

type served struct {
	name       string
	driver     *Driver
	csiServer  *grpc.Server
	regServer  *grpc.Server
	csiSocket  string
	regSocket  string
	registered chan struct{} // closed once kubelet reported success
	stopped    chan struct{} // closed when the driver is handed over for deregistration
	once       sync.Once
	draining   bool // removal requested; waiting until kubelet no longer needs the driver
}

// servedMarker, in a driver's socket directory, tells a restarted node
// plugin that the directory is PaV's (other CSI drivers live next to it).
const servedMarker = "pav-driver"

// NewManager serves drivers under kubeletDir.
func NewManager(kubeletDir, version, nodeID string, stager Stager) *Manager {
	m := &Manager{
		kubeletDir: kubelet.Dir(kubeletDir), version: version, nodeID: nodeID, stager: stager,
		drivers: map[string]*served{},
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
	}
	m.confirmTimeout.Store(int64(10 * time.Second))
	go m.registrar()
	return m
}

// UseNodeDrivers makes deregistration wait for, and repair, the node's
// CSINode (call before the first Add).
func (m *Manager) UseNodeDrivers(nd NodeDrivers) { m.nodeDrivers = nd }

// LimitVolumes makes every driver report at most n volumes per node in
// NodeGetInfo (0: no limit, the default; n as CheckVolumeLimit allows). CSI
// limits are per driver, so the limit applies to each PavProvisioner on its
// own. Call before the first Add.
func (m *Manager) LimitVolumes(n int64) { m.maxVolumes = n }

// CheckVolumeLimit tells whether n can be a per-node volume limit: CSI
// forbids negative ones, and CSINode's allocatable count is an int32 (kubelet
// would silently truncate a larger one).
func CheckVolumeLimit(n int64) error {
	if n < 0 || n > math.MaxInt32 {
		return fmt.Errorf("maximum volumes per node %d: must be 0 (no limit) to %d", n, math.MaxInt32)
	}
	return nil
}

// CSISocket is where driver name's CSI endpoint is.
func (m *Manager) CSISocket(name string) string {
	return m.kubeletDir.PluginSocket(name)
}

// RegistrationSocket is the socket kubelet's plugin watcher discovers.
func (m *Manager) RegistrationSocket(name string) string {
	return m.kubeletDir.RegistrationSocket(name)
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

// Check is nil while every driver served has its sockets in place. A
// socket deleted under the node plugin (kubelet's directory wiped, say)
// cuts kubelet off from the driver for good; the node plugin's liveness
// probe reports it, and the restart that follows creates the sockets again.
func (m *Manager) Check() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, name := range slices.Sorted(maps.Keys(m.drivers)) {
		s := m.drivers[name]
		sockets := []string{s.csiSocket}
		if s.regServer != nil { // the registrar has created it
			sockets = append(sockets, s.regSocket)
		}
		for _, path := range sockets {
			if fi, err := os.Lstat(path); err != nil || fi.Mode().Type() != fs.ModeSocket {
				return fmt.Errorf("CSI driver %s: socket %s is gone", name, path)
			}
		}
	}
	return nil
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
// comes first, at once; the registration socket follows through the
// registrar (kubelet calls NodeGetInfo on the CSI socket as soon as it sees
// the registration socket).
func (m *Manager) Add(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.drivers[name]; ok {
		s.draining = false // the provisioner is back: keep serving
		return nil
	}
	driver := NewDriver(name, m.version, m.nodeID, m.stager)
	driver.maxVolumes = m.maxVolumes
	s := &served{
		name:       name,
		driver:     driver,
		csiSocket:  m.CSISocket(name),
		regSocket:  m.RegistrationSocket(name),
		registered: make(chan struct{}),
		stopped:    make(chan struct{}),
	}
	csiLis, err := listen(s.csiSocket)
	if err != nil {
		return err
	}
	s.csiServer = grpc.NewServer(grpc.UnaryInterceptor(logErrors))
	csi.RegisterIdentityServer(s.csiServer, s.driver)
	csi.RegisterNodeServer(s.csiServer, s.driver)
	go serve(s.csiServer, csiLis)

	_ = os.WriteFile(filepath.Join(filepath.Dir(s.csiSocket), servedMarker), nil, 0o600)
	m.drivers[name] = s
	m.enqueueLocked(registrarOp{s: s, register: true})
	klog.InfoS("Serving CSI driver", "driver", name, "endpoint", s.csiSocket)
	return nil
}

func (m *Manager) enqueueLocked(op registrarOp) {
	m.pending = append(m.pending, op)
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// registrar applies registration changes one at a time, in order.
func (m *Manager) registrar() {
	for {
		m.mu.Lock()
		var op registrarOp
		ok := len(m.pending) > 0
		if ok {
			op, m.pending = m.pending[0], m.pending[1:]
		}
		m.mu.Unlock()
		if !ok {
			select {
			case <-m.wake:
				continue
			case <-m.done:
				return
			}
		}
		if op.register {
			m.register(op.s)
		} else {
			m.deregister(op.s, true)
		}
	}
}

// register creates s's registration socket and waits until kubelet reports
// the driver registered (or confirmTimeout passes: kubelet may be down, and
// it finds the socket when it starts).
func (m *Manager) register(s *served) {
	m.mu.Lock()
	if m.drivers[s.name] != s {
		m.mu.Unlock()
		return // removed before its turn came
	}
	regLis, err := listen(s.regSocket)
	if err != nil {
		m.mu.Unlock()
		klog.ErrorS(err, "Registering CSI driver with kubelet; retrying", "driver", s.name)
		go func() {
			select {
			case <-time.After(time.Second):
				m.mu.Lock()
				m.enqueueLocked(registrarOp{s: s, register: true})
				m.mu.Unlock()
			case <-m.done:
			}
		}()
		return
	}
	s.regServer = grpc.NewServer()
	registerapi.RegisterRegistrationServer(s.regServer, &registration{s: s})
	go serve(s.regServer, regLis)
	m.mu.Unlock()
	klog.V(2).InfoS("Registration socket created", "driver", s.name, "socket", s.regSocket)
	if m.socketCreated != nil {
		m.socketCreated(s.name)
	}

	timeout := time.NewTimer(time.Duration(m.confirmTimeout.Load()))
	defer timeout.Stop()
	select {
	case <-s.registered:
	case <-s.stopped: // its deregistration is next in line
	case <-timeout.C:
		klog.InfoS("Kubelet has not confirmed the registration of a CSI driver yet; going on", "driver", s.name, "after", time.Duration(m.confirmTimeout.Load()))
	case <-m.done:
	}
}

// deregister removes s's registration socket and, if confirm, waits until
// CSINode no longer lists the driver (removing it there itself if kubelet
// did not); then it stops the CSI server. A driver added again meanwhile
// keeps its paths: the new incarnation owns them.
func (m *Manager) deregister(s *served, confirm bool) {
	m.mu.Lock()
	regServer := s.regServer
	readded := m.drivers[s.name] != nil
	if !readded {
		// also when this incarnation never served it: the socket of a
		// previous incarnation keeps the driver registered with kubelet
		_ = os.Remove(s.regSocket)
	}
	m.mu.Unlock()
	if regServer != nil {
		regServer.Stop()
	}
	if nd := m.nodeDrivers; nd != nil && confirm && !readded {
		m.confirmDeregistered(nd, s.name)
	}
	// Let running NodePublish/NodeUnpublish calls finish.
	s.csiServer.GracefulStop()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.drivers[s.name] != nil {
		return
	}
	_ = os.Remove(s.csiSocket)
	_ = os.Remove(filepath.Join(filepath.Dir(s.csiSocket), servedMarker))
	_ = os.Remove(filepath.Dir(s.csiSocket))
	klog.InfoS("Stopped serving CSI driver", "driver", s.name)
}

// confirmDeregistered waits until CSINode no longer lists driver name, and
// removes it from there past confirmTimeout (kubelet gave up on a conflict).
func (m *Manager) confirmDeregistered(nd NodeDrivers, name string) {
	timeout := time.NewTimer(time.Duration(m.confirmTimeout.Load()))
	defer timeout.Stop()
	for nd.Lists(name) {
		select {
		case <-nd.Changed():
			continue
		case <-timeout.C:
		case <-m.done:
			return
		}
		break
	}
	m.mu.Lock()
	readded := m.drivers[name] != nil
	m.mu.Unlock()
	if readded || !nd.Lists(name) {
		return
	}
	klog.InfoS("Kubelet left a removed CSI driver in CSINode; removing it", "driver", name, "node", m.nodeID)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(m.confirmTimeout.Load()))
	defer cancel()
	if err := nd.Remove(ctx, name); err != nil {
		klog.ErrorS(err, "Removing a stale CSI driver from CSINode", "driver", name)
	}
}

// Remove stops serving driver name, once kubelet no longer needs it: after
// the last NodeUnpublishVolume, kubelet still calls the driver (its
// UnmountDevice asks NodeGetCapabilities) and retries forever if the driver
// is gone. So while kubelet keeps volume state for the driver, the driver is
// drained: served until that state is gone, or until Add brings it back.
func (m *Manager) Remove(name string) {
	m.mu.Lock()
	s, ok := m.drivers[name]
	if !ok || s.draining {
		m.mu.Unlock()
		return
	}
	if m.kubeletDir.TracksVolumes(name) {
		s.draining = true
		m.mu.Unlock()
		klog.InfoS("Draining CSI driver: kubelet still tracks volumes of it", "driver", name, "dir", m.kubeletDir.CSIVolumesDir(name))
		go m.drain(name, s)
		return
	}
	delete(m.drivers, name)
	m.mu.Unlock()
	m.stop(s)
}

// drain stops serving s once kubelet's volume state for it is gone, woken by
// changes in kubelet's directories of it (and by a slow tick, for when they
// cannot be watched).
func (m *Manager) drain(name string, s *served) {
	if m.drainEnded != nil {
		defer m.drainEnded(name)
	}
	// Kubelet's per-volume directories are watched too: kubelet deletes the
	// vol_data.json in them, and the directory unless a mount is left there.
	var events <-chan fsnotify.Event
	watch := func() {}
	if w, err := fsnotify.NewWatcher(); err == nil {
		defer w.Close()
		watch = func() {
			volumes := m.kubeletDir.CSIVolumesDir(name)
			dirs, _ := filepath.Glob(filepath.Join(volumes, "*"))
			for _, dir := range append(dirs, volumes, m.kubeletDir.CSIBlockVolumesDir()) {
				if err := w.Add(dir); err == nil {
					events = w.Events
				}
			}
		}
	}
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	for {
		watch()
		m.mu.Lock()
		if m.drivers[name] != s || !s.draining {
			m.mu.Unlock()
			return // served again, or stopped by someone else
		}
		if !m.kubeletDir.TracksVolumes(name) {
			delete(m.drivers, name)
			m.mu.Unlock()
			m.stop(s)
			return
		}
		m.mu.Unlock()
		select {
		case <-events:
		case <-tick.C:
		}
	}
}

// stop hands s, already out of m.drivers, to the registrar: removing the
// registration socket makes kubelet deregister the driver. The socket
// directory's marker stays until then, so that a node plugin restarted
// meanwhile retires the driver again (Leftovers).
func (m *Manager) stop(s *served) {
	m.mu.Lock()
	defer m.mu.Unlock()
	close(s.stopped)
	m.enqueueLocked(registrarOp{s: s})
}

// Leftovers lists drivers that a previous incarnation of the node plugin
// served (their socket directories are still there) and this one does not.
func (m *Manager) Leftovers() []string {
	dirs, _ := filepath.Glob(filepath.Join(m.kubeletDir.PluginsDir(), "*", servedMarker))
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, d := range dirs {
		name := filepath.Base(filepath.Dir(d))
		if _, ok := m.drivers[name]; !ok {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// Stop stops serving every driver now, drained or not, without waiting for
// kubelet, and ends the registrar.
func (m *Manager) Stop() {
	m.mu.Lock()
	select {
	case <-m.done:
		m.mu.Unlock()
		return
	default:
	}
	close(m.done)
	drivers := m.drivers
	m.drivers = map[string]*served{}
	m.pending = nil
	m.mu.Unlock()
	for _, s := range drivers {
		m.deregister(s, false)
	}
}

// listen creates a Unix socket at path, replacing a stale one left by a
// previous incarnation of the node plugin or of the driver.
func listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("creating socket directory: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("removing stale socket %s: %w", path, err)
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", path, err)
	}
	// The manager removes its sockets itself, when no new incarnation of the
	// driver has taken the path over; closing the listener must not.
	l.SetUnlinkOnClose(false)
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
