// Package nodeagent is the logic of `pav node`, PaV's node plugin: it makes
// every PavProvisioner a CSI driver on its node (package csi), stages and
// unstages volumes with staging and unstaging pods (Stager), and collects
// the result files of the validation, creation and deletion pods that ran
// on its node (package collector). All its state is in API objects (pods with
// labels, annotations and a finalizer) and in the pods' host directories,
// so it resumes after a crash from what it finds.
package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	mount "k8s.io/mount-utils"

	"github.com/albertofaria/pav/crds/v1alpha1"
	pavcsi "github.com/albertofaria/pav/csi"
	"github.com/albertofaria/pav/kubeclient"
	"github.com/albertofaria/pav/nodeagent/collector"
	"github.com/albertofaria/pav/nodeagent/containerd"
	"github.com/albertofaria/pav/nodeagent/mounts"
	"github.com/albertofaria/pav/protocol"
)

// Config of the node plugin.
type Config struct {
	NodeName   string
	KubeletDir string // kubelet's root directory; plugin sockets go under it
	PodDirRoot string // where PaV pods' /pav directories live (default protocol.PodDirRoot(KubeletDir))
	Version    string
	Kube       kubeclient.Interface
	Pav        kubeclient.PavInterface
	Engine     Engine
	Mounter    mount.Interface // nil: the real one
	// RuntimeEndpoint is containerd's socket, whose task exit events tell
	// that a pod's containers exited before kubelet does ("" disables).
	RuntimeEndpoint string
	// HealthAddress serves /healthz and /readyz ("" disables).
	HealthAddress string
	// Registry receives the node plugin's metrics (nil: a private one);
	// the caller serves it.
	Registry *prometheus.Registry
	Workers  int
	// MaxVolumesPerNode is what every driver reports to kubelet as the
	// most volumes it may have on this node (0: no limit).
	MaxVolumesPerNode int64
	// SkipPreflight: do not check the kernel and the kubelet directory's
	// mount propagation (a node plugin that serves no real kubelet).
	SkipPreflight bool
}

// complete checks cfg and fills in its defaults.
func (cfg *Config) complete() error {
	if cfg.NodeName == "" {
		return errors.New("the node name is required (--node-name or $NODE_NAME)")
	}
	if err := pavcsi.CheckVolumeLimit(cfg.MaxVolumesPerNode); err != nil {
		return fmt.Errorf("--max-volumes-per-node: %w", err)
	}
	if cfg.KubeletDir == "" {
		cfg.KubeletDir = protocol.DefaultKubeletDir
	}
	if err := protocol.CheckKubeletDir(cfg.KubeletDir); err != nil {
		return err
	}
	if cfg.PodDirRoot == "" {
		cfg.PodDirRoot = protocol.PodDirRoot(cfg.KubeletDir)
	}
	if cfg.Mounter == nil {
		cfg.Mounter = mounts.HostMounter{Interface: mount.New("")}
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 4
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	return nil
}

// Run runs the node plugin until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.complete(); err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.PodDirRoot, 0o750); err != nil {
		return fmt.Errorf("creating %s: %w", cfg.PodDirRoot, err)
	}

	reg := cfg.Registry
	m := newMetrics(reg)

	// PaV's own pods on this node only: the node plugin never needs others.
	kube := cfg.Kube
	podInformer := kubeclient.NewInformer(kube, kube.CoreV1().Pods(metav1.NamespaceAll), &corev1.Pod{}, 0,
		kubeclient.Selector{Label: protocol.LabelPhase, Field: "spec.nodeName=" + cfg.NodeName})
	if err := podInformer.AddIndexers(PodIndexers()); err != nil {
		return err
	}
	// Every PV of the cluster (the API has no field selector on the CSI
	// driver), reduced to what finds them (protocol.StripVolumeToLookup).
	pvInformer := kubeclient.NewInformer(kube, kube.CoreV1().PersistentVolumes(), &corev1.PersistentVolume{}, 0, kubeclient.Selector{})
	if err := pvInformer.AddIndexers(PVIndexers()); err != nil {
		return err
	}
	provInformer := kubeclient.NewInformer(cfg.Pav, cfg.Pav.PavV1alpha1().PavProvisioners(), &v1alpha1.PavProvisioner{}, 0, kubeclient.Selector{})
	for inf, transform := range map[cache.SharedIndexInformer]cache.TransformFunc{
		podInformer: protocol.StripManagedFields, pvInformer: protocol.StripVolumeToLookup, provInformer: protocol.StripManagedFields,
	} {
		if err := inf.SetTransform(transform); err != nil {
			return err
		}
	}

	var exits *Exits
	var processes ContainerProcesses
	if cfg.RuntimeEndpoint != "" {
		exits = NewExits(podInformer)
		cp, err := containerd.NewProcesses(cfg.RuntimeEndpoint)
		if err != nil {
			return err
		}
		processes = cp
	}
	results := collector.New(cfg.Kube, podInformer, cfg.Mounter, cfg.PodDirRoot, exits)
	broadcaster := kubeclient.NewEventBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(kubeclient.EventSink{Client: kube.CoreV1()})
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(kubeclient.Scheme, corev1.EventSource{Component: "pav-node", Host: cfg.NodeName})
	var preflight error
	if !cfg.SkipPreflight {
		preflight = runPreflight(cfg.KubeletDir, cfg.NodeName, recorder)
	}
	stager := NewStager(StagerConfig{
		Kube: cfg.Kube, Engine: cfg.Engine, NodeName: cfg.NodeName, PodDirRoot: cfg.PodDirRoot,
		Mounter: cfg.Mounter, Pods: podInformer, PVs: pvInformer, Provisioners: provInformer, Metrics: m, Exits: exits,
		Recorder:  recorder,
		Processes: processes, Recovery: true,
	})
	reg.MustRegister(newAbnormalVolumes(stager.health))
	manager := pavcsi.NewManager(cfg.KubeletDir, cfg.Version, cfg.NodeName, stager)
	// This node's CSINode: driver registrations are paced and confirmed there.
	csiNodeInformer := kubeclient.NewInformer(kube, kube.StorageV1().CSINodes(), &storagev1.CSINode{}, 0,
		kubeclient.Selector{Field: "metadata.name=" + cfg.NodeName})
	nodeDrivers, err := newNodeDrivers(kube, cfg.NodeName, csiNodeInformer)
	if err != nil {
		return err
	}
	manager.UseNodeDrivers(nodeDrivers)
	manager.LimitVolumes(cfg.MaxVolumesPerNode)

	kubeclient.Run(ctx, podInformer, pvInformer, csiNodeInformer, provInformer)

	var started atomic.Bool // caches synced, drivers being served
	if cfg.HealthAddress != "" {
		go serveHealth(ctx, cfg.HealthAddress, nodeHealth{started: &started, stager: stager, manager: manager, preflight: preflight})
	}

	klog.InfoS("Waiting for caches", "node", cfg.NodeName)
	if !cache.WaitForCacheSync(ctx.Done(), podInformer.HasSynced, pvInformer.HasSynced, provInformer.HasSynced, csiNodeInformer.HasSynced) {
		return ctx.Err()
	}
	// Serve drivers only now: a NodePublishVolume must find the PV and any
	// staging pod left by a previous incarnation in the caches.
	if err := serveProvisioners(ctx, provInformer, manager, cfg.Engine); err != nil {
		return err
	}
	retireLeftoverDrivers(manager, provInformer.GetStore())
	go results.Run(ctx, cfg.Workers)
	if exits != nil {
		go containerd.Watch(ctx, cfg.RuntimeEndpoint, exits.record)
	}
	go stager.RunAbandonedSweep(ctx)
	go stager.RunRecovery(ctx)
	started.Store(true)
	klog.InfoS("Node plugin running", "node", cfg.NodeName, "kubeletDir", cfg.KubeletDir, "podDirRoot", cfg.PodDirRoot)

	<-ctx.Done()
	// The sockets stay: a restarted node plugin replaces them, and kubelet
	// keeps the drivers registered meanwhile (NodeUnpublish calls are
	// retried), while removing them would make kubelet forget the drivers.
	// PaV's pod directory root goes if empty (after an uninstall, say); a
	// restarted node plugin, and kubelet for each PaV pod, create it again.
	_ = os.Remove(cfg.PodDirRoot)
	_ = os.Remove(filepath.Dir(cfg.PodDirRoot))
	return nil
}

// serveProvisioners serves a CSI driver for every PavProvisioner, and
// stops serving it (and forgets its templates) once it is deleted.
func serveProvisioners(ctx context.Context, provisioners cache.SharedIndexInformer, manager *pavcsi.Manager, engine Engine) error {
	_, err := provisioners.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			if p, ok := obj.(*v1alpha1.PavProvisioner); ok {
				addDriver(ctx, manager, p.Name)
			}
		},
		DeleteFunc: func(obj interface{}) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if p, ok := obj.(*v1alpha1.PavProvisioner); ok {
				manager.Remove(p.Name)
				engine.Forget(p)
			}
		},
	})
	return err
}

// retireLeftoverDrivers handles drivers served by a previous incarnation
// whose PavProvisioner was deleted meanwhile: each is served again only for
// as long as kubelet still needs it (see Manager.Remove), then removed.
func retireLeftoverDrivers(m *pavcsi.Manager, provisioners cache.Store) {
	for _, name := range m.Leftovers() {
		if _, exists, _ := provisioners.GetByKey(name); exists {
			continue
		}
		klog.InfoS("Retiring the CSI driver of a deleted PavProvisioner", "driver", name)
		if err := m.Add(name); err != nil {
			klog.ErrorS(err, "Serving leftover CSI driver", "driver", name)
			continue
		}
		m.Remove(name)
	}
}

// addDriver serves a driver, retrying in the background on failure (a
// socket directory that cannot be created yet, say).
func addDriver(ctx context.Context, m *pavcsi.Manager, name string) {
	if err := m.Add(name); err == nil {
		return
	} else {
		klog.ErrorS(err, "Serving CSI driver; retrying", "driver", name)
	}
	go func() {
		for delay := time.Second; ; delay = min(2*delay, time.Minute) {
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
			if err := m.Add(name); err == nil {
				return
			} else {
				klog.ErrorS(err, "Serving CSI driver; retrying", "driver", name)
			}
		}
	}()
}

// nodeHealth is what the node plugin's probes report.
type nodeHealth struct {
	started *atomic.Bool
	stager  interface{ Ready() error }
	manager interface{ Check() error }
	// preflight: why this node cannot serve volumes (nil: it can).
	preflight error
}

// live is nil unless the node plugin, once started, lost what kubelet needs
// of it: a cache that stopped watching, a driver socket that is gone. A
// restart repairs both. While starting it is alive (syncing caches may take
// a while on a big cluster), only not ready.
func (h nodeHealth) live() error {
	if !h.started.Load() {
		return nil
	}
	if err := h.stager.Ready(); err != nil {
		return err
	}
	return h.manager.Check()
}

// ready is nil once caches synced and drivers are served, while live, on
// a node that passed the preflight (a restart does not change the kernel
// or the mounts: not a liveness failure).
func (h nodeHealth) ready() error {
	if h.preflight != nil {
		return h.preflight
	}
	if !h.started.Load() {
		return errors.New("caches not synced yet")
	}
	return h.live()
}

// handler serves /healthz (live) and /readyz (ready): 200 "ok", or 503
// with the reason.
func (h nodeHealth) handler() http.Handler {
	mux := http.NewServeMux()
	for path, check := range map[string]func() error{"/healthz": h.live, "/readyz": h.ready} {
		mux.HandleFunc(path, func(w http.ResponseWriter, _ *http.Request) {
			if err := check(); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
			_, _ = w.Write([]byte("ok"))
		})
	}
	return mux
}

func serveHealth(ctx context.Context, addr string, h nodeHealth) {
	mux := h.handler()
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		klog.ErrorS(err, "Health server stopped", "address", addr)
	}
}
