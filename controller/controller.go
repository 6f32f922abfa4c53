// Package controller implements `pav controller`: dynamic provisioning and
// deletion of volumes for every PavProvisioner, following the external
// provisioner protocol (storage-classes design) on client-go informers and
// workqueues, and the PavProvisioners' own lifecycle (status, CSIDriver,
// finalizer).
//
// All state lives in API objects: a finalizer on the claim while PaV works
// for it, PaV's pods (deterministic names, one per claim and phase) and the
// PersistentVolume with snapshots of the claim and class. A controller killed
// at any point picks the work up again from those objects.
package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	groupsnapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	groupsnapshotlisters "github.com/kubernetes-csi/external-snapshotter/client/v8/listers/volumegroupsnapshot/v1"
	snapshotlisters "github.com/kubernetes-csi/external-snapshotter/client/v8/listers/volumesnapshot/v1"

	pavlisters "github.com/albertofaria/pav/crds/generated/listers/crds/v1alpha1"
	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/kubeclient"
	"github.com/albertofaria/pav/protocol"
)

// Well-known annotations of the PV/PVC protocol.
const (
	annSelectedNode = "volume.kubernetes.io/selected-node"
)

// Indexer names.
const (
	indexClaimUID    = "claimUID"
	indexVolume      = "volume"
	indexProvisioner = "provisioner"
	indexCSIDriver   = "csiDriver"
	indexNode        = "node"
	// indexCSIHandle: PVs by "<driver>/<volume handle>" (handleKey)
	indexCSIHandle = "csiHandle"
	// indexSnapshotContent: pods by LabelSnapshotContentUID
	indexSnapshotContent = "snapshotContent"
)

// Config configures a Controller.
type Config struct {
	Kube   kubeclient.Interface
	Pav    kubeclient.PavInterface
	Engine Engine
	// Snapshots, if set, is the client of the VolumeSnapshot API: the
	// controller then handles the VolumeSnapshotContents of its
	// provisioners and restores claims from VolumeSnapshots. Its caches
	// sync on their own, so that a cluster without the snapshot CRDs holds
	// up nothing else.
	Snapshots kubeclient.SnapshotInterface

	// ClaimWorkers, VolumeWorkers and ProvisionerWorkers: parallel syncs.
	ClaimWorkers, VolumeWorkers, ProvisionerWorkers int
	// RetryStart and RetryMax bound the per-item exponential backoff.
	RetryStart, RetryMax time.Duration
	// ResultsTimeout: how long a terminated pod may wait for the node plugin
	// to collect its /pav results before the controller gives up on them.
	ResultsTimeout time.Duration
	// Resync is the informers' resync period (0: none).
	Resync time.Duration
	// Metrics, if non-nil, records operations.
	Metrics *Metrics
	// Identity names this controller in Events.
	Identity string
	// Namespace is PaV's namespace, where the CSIStorageCapacity objects
	// of provisioners that track storage capacity go (default "pav").
	Namespace string
	// KubeletDir is the nodes' kubelet root directory: the /pav directories
	// of claim and volume pods go under it (protocol.PodDirRoot), where the
	// node plugin reads them (default protocol.DefaultKubeletDir).
	KubeletDir string
	// PoolKubeletDirs: nodes whose kubelet root is another (node pools
	// served by their own node plugin DaemonSet), first match wins. Pods
	// the controller places on a node itself (capacity pods) keep their
	// /pav under that node's root, where its node plugin reads it.
	PoolKubeletDirs []PoolKubeletDir
	// Settled, if set, is told of every sync that ended without error: the
	// queue ("claims", "volumes", "provisioners", "snapshotcontents" or "groupsnapshotcontents"), the key, and the
	// resourceVersion of the object in the cache as the sync began (the sync
	// saw that version or a newer one; "" if there was none). Tests wait on it
	// to check that something did not happen, instead of sleeping.
	Settled func(queue, key, resourceVersion string)
}

func (c *Config) setDefaults() {
	if c.ClaimWorkers <= 0 {
		c.ClaimWorkers = 16
	}
	if c.KubeletDir == "" {
		c.KubeletDir = protocol.DefaultKubeletDir
	}
	if c.Namespace == "" {
		c.Namespace = "pav"
	}
	if c.VolumeWorkers <= 0 {
		c.VolumeWorkers = 16
	}
	if c.ProvisionerWorkers <= 0 {
		c.ProvisionerWorkers = 4
	}
	if c.RetryStart <= 0 {
		c.RetryStart = time.Second
	}
	if c.RetryMax <= 0 {
		c.RetryMax = 5 * time.Minute
	}
	if c.ResultsTimeout <= 0 {
		c.ResultsTimeout = 2 * time.Minute
	}
	if c.Identity == "" {
		c.Identity = "pav-controller"
	}
}

// Controller provisions and deletes volumes for all PavProvisioners.
type Controller struct {
	cfg    Config
	kube   kubeclient.Interface
	pav    kubeclient.PavInterface
	engine Engine

	claims       corelisters.PersistentVolumeClaimLister
	volumes      corelisters.PersistentVolumeLister
	classes      storagelisters.StorageClassLister
	csiDrivers   storagelisters.CSIDriverLister
	nodes        corelisters.NodeLister
	pods         corelisters.PodLister
	provisioners pavlisters.PavProvisionerLister
	provInformer cache.SharedIndexInformer
	informers    []cache.SharedIndexInformer // every cache, started by Run
	synced       []cache.InformerSynced

	// The caches behind the listers, for the indexes and for tests.
	claimIndexer, pvIndexer, classIndexer, csiDriverIndexer, podIndexer, nodeIndexer cache.Indexer
	// capacityIndexer: PaV's CSIStorageCapacity objects, by provisioner.
	capacityIndexer cache.Indexer
	// capacityDue: when each provisioner's next round of capacity
	// measurements is due; capacityFailures: how many measurements of
	// each item failed in a row (capacity.go).
	capacityMu       sync.Mutex
	capacityDue      map[string]time.Time
	capacityFailures map[string]map[string]int

	claimQueue       workqueue.TypedRateLimitingInterface[string]
	volumeQueue      workqueue.TypedRateLimitingInterface[string]
	provisionerQueue workqueue.TypedRateLimitingInterface[string]

	claimBackoff  *backoff
	volumeBackoff *backoff
	// nodeSelected: when a node was first seen selected for each
	// WaitForFirstConsumer claim (provisioning latency counts from then).
	nodeSelected nodeSelected

	// VolumeSnapshotContents (nil snapshots: not handled).
	snapshots       kubeclient.SnapshotInterface
	contents        snapshotlisters.VolumeSnapshotContentLister
	contentInformer cache.SharedIndexInformer
	contentIndexer  cache.Indexer
	contentQueue    workqueue.TypedRateLimitingInterface[string]
	contentBackoff  *backoff

	// VolumeGroupSnapshotContents (with snapshots; groupsnapshot.go).
	groupContents        groupsnapshotlisters.VolumeGroupSnapshotContentLister
	groupContentInformer cache.SharedIndexInformer
	groupContentQueue    workqueue.TypedRateLimitingInterface[string]
	groupContentBackoff  *backoff

	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder
	metrics     *Metrics

	// retained: the released PVs kept by their reclaim policy that this
	// process announced (name → UID), so each gets one Event.
	retained sync.Map

	// handles: one PV creation per driver handle at a time (pv.go).
	handles handleGuard
}

// podDirRoot is where the /pav directories of claim and volume pods go on
// whichever node runs them.
func (c *Controller) podDirRoot() string { return protocol.PodDirRoot(c.cfg.KubeletDir) }

// PoolKubeletDir: the kubelet root directory of the nodes Selector matches.
type PoolKubeletDir struct {
	Selector labels.Selector
	Dir      string
}

// podDirRootOn is where the /pav directory of a pod the controller places
// on node goes: under that node's kubelet root (its pool's, else
// KubeletDir).
func (c *Controller) podDirRootOn(node string) string {
	if n, err := c.nodes.Get(node); err == nil {
		for _, p := range c.cfg.PoolKubeletDirs {
			if p.Selector.Matches(labels.Set(n.Labels)) {
				return protocol.PodDirRoot(p.Dir)
			}
		}
	}
	return c.podDirRoot()
}

// New builds a Controller; Run starts it.
func New(cfg Config) (*Controller, error) {
	cfg.setDefaults()
	if err := cfg.check(); err != nil {
		return nil, err
	}
	c := &Controller{
		cfg:           cfg,
		kube:          cfg.Kube,
		pav:           cfg.Pav,
		engine:        cfg.Engine,
		claimBackoff:  newBackoff(cfg.RetryStart, cfg.RetryMax),
		volumeBackoff: newBackoff(cfg.RetryStart, cfg.RetryMax),
		metrics:       cfg.Metrics,
		snapshots:     cfg.Snapshots,
	}
	if c.metrics == nil {
		c.metrics = NewMetrics(nil)
	}

	// Only short requeues go through the rate limiter (conflicts, stale
	// caches); real failures use the per-item backoff above.
	newQueue := func(name string) workqueue.TypedRateLimitingInterface[string] {
		return workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](50*time.Millisecond, cfg.RetryMax),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: name})
	}
	c.claimQueue = newQueue("claims")
	c.volumeQueue = newQueue("volumes")
	c.provisionerQueue = newQueue("provisioners")
	c.contentQueue = newQueue("snapshotcontents")
	c.contentBackoff = newBackoff(cfg.RetryStart, cfg.RetryMax)
	c.groupContentQueue = newQueue("groupsnapshotcontents")
	c.groupContentBackoff = newBackoff(cfg.RetryStart, cfg.RetryMax)

	kube, all := cfg.Kube, kubeclient.Selector{} // all: every object
	claimInf := kubeclient.NewInformer(kube, kube.CoreV1().PersistentVolumeClaims(metav1.NamespaceAll), &corev1.PersistentVolumeClaim{}, cfg.Resync, all)
	pvInf := kubeclient.NewInformer(kube, kube.CoreV1().PersistentVolumes(), &corev1.PersistentVolume{}, cfg.Resync, all)
	scInf := kubeclient.NewInformer(kube, kube.StorageV1().StorageClasses(), &storagev1.StorageClass{}, cfg.Resync, all)
	csiInf := kubeclient.NewInformer(kube, kube.StorageV1().CSIDrivers(), &storagev1.CSIDriver{}, cfg.Resync, all)
	nodeInf := kubeclient.NewInformer(kube, kube.CoreV1().Nodes(), &corev1.Node{}, cfg.Resync, all)
	podInf := kubeclient.NewInformer(kube, kube.CoreV1().Pods(metav1.NamespaceAll), &corev1.Pod{}, cfg.Resync,
		kubeclient.Selector{Label: protocol.LabelPhase})
	c.provInformer = kubeclient.NewInformer(cfg.Pav, cfg.Pav.PavV1alpha1().PavProvisioners(), &v1alpha1.PavProvisioner{}, cfg.Resync, all)
	capInf := kubeclient.NewInformer(kube, kube.StorageV1().CSIStorageCapacities(cfg.Namespace), &storagev1.CSIStorageCapacity{}, cfg.Resync,
		kubeclient.Selector{Label: protocol.LabelProvisioner})
	c.informers = []cache.SharedIndexInformer{claimInf, pvInf, scInf, csiInf, nodeInf, podInf, c.provInformer, capInf}

	if err := nodeInf.SetTransform(stripNode); err != nil {
		return nil, err
	}
	// Every other cache keeps objects whole (templates see claims, PVs and
	// classes as they are) but for managedFields, which nothing reads.
	for _, inf := range []cache.SharedIndexInformer{claimInf, pvInf, scInf, csiInf, podInf, c.provInformer, capInf} {
		if err := inf.SetTransform(protocol.StripManagedFields); err != nil {
			return nil, err
		}
	}

	if err := podInf.AddIndexers(cache.Indexers{
		indexClaimUID:        labelIndex(protocol.LabelClaimUID),
		indexVolume:          labelIndex(protocol.LabelVolume),
		indexProvisioner:     labelIndex(protocol.LabelProvisioner),
		indexSnapshotContent: labelIndex(protocol.LabelSnapshotContentUID),
		indexNode:            podNodeIndex,
	}); err != nil {
		return nil, err
	}
	if err := pvInf.AddIndexers(cache.Indexers{indexCSIDriver: pvDriverIndex, indexCSIHandle: pvHandleIndex}); err != nil {
		return nil, err
	}

	if err := capInf.AddIndexers(cache.Indexers{indexProvisioner: labelIndex(protocol.LabelProvisioner)}); err != nil {
		return nil, err
	}
	c.capacityIndexer, c.capacityDue, c.capacityFailures = capInf.GetIndexer(), map[string]time.Time{}, map[string]map[string]int{}
	c.claimIndexer, c.pvIndexer, c.classIndexer = claimInf.GetIndexer(), pvInf.GetIndexer(), scInf.GetIndexer()
	c.csiDriverIndexer, c.podIndexer = csiInf.GetIndexer(), podInf.GetIndexer()
	c.claims = corelisters.NewPersistentVolumeClaimLister(c.claimIndexer)
	c.volumes = corelisters.NewPersistentVolumeLister(c.pvIndexer)
	c.classes = storagelisters.NewStorageClassLister(c.classIndexer)
	c.csiDrivers = storagelisters.NewCSIDriverLister(c.csiDriverIndexer)
	c.nodeIndexer = nodeInf.GetIndexer()
	c.nodes = corelisters.NewNodeLister(c.nodeIndexer)
	c.pods = corelisters.NewPodLister(c.podIndexer)
	c.provisioners = pavlisters.NewPavProvisionerLister(c.provInformer.GetIndexer())
	for _, inf := range c.informers {
		c.synced = append(c.synced, inf.HasSynced)
	}

	handlers := []struct {
		inf cache.SharedIndexInformer
		h   cache.ResourceEventHandler
	}{
		{claimInf, c.funcs(c.onClaim)},
		{pvInf, c.funcs(c.onVolume)},
		{scInf, c.funcs(c.onClass)},
		{csiInf, c.funcs(c.onCSIDriver)},
		{podInf, c.funcs(c.onPod)},
		{nodeInf, c.funcs(c.onNode)},
		{nodeInf, c.funcs(c.onTopologyChange)},
		{scInf, c.funcs(c.onTopologyChange)},
		{capInf, c.funcs(c.onCapacity)},
		{c.provInformer, c.provisionerFuncs()},
		{c.provInformer, cache.ResourceEventHandlerFuncs{DeleteFunc: c.forgetProvisioner}},
	}
	for _, h := range handlers {
		if _, err := h.inf.AddEventHandler(h.h); err != nil {
			return nil, err
		}
	}

	if cfg.Snapshots != nil {
		c.contentInformer = kubeclient.NewInformer(cfg.Snapshots, cfg.Snapshots.SnapshotV1().VolumeSnapshotContents(), &snapshotv1.VolumeSnapshotContent{}, cfg.Resync, all)
		if err := c.contentInformer.SetTransform(protocol.StripManagedFields); err != nil {
			return nil, err
		}
		if _, err := c.contentInformer.AddEventHandler(c.funcs(c.onContent)); err != nil {
			return nil, err
		}
		c.contentIndexer = c.contentInformer.GetIndexer()
		c.contents = snapshotlisters.NewVolumeSnapshotContentLister(c.contentIndexer)

		c.groupContentInformer = kubeclient.NewInformer(cfg.Snapshots, cfg.Snapshots.GroupsnapshotV1().VolumeGroupSnapshotContents(), &groupsnapshotv1.VolumeGroupSnapshotContent{}, cfg.Resync, all)
		if err := c.groupContentInformer.SetTransform(protocol.StripManagedFields); err != nil {
			return nil, err
		}
		if _, err := c.groupContentInformer.AddEventHandler(c.funcs(c.onGroupContent)); err != nil {
			return nil, err
		}
		c.groupContents = groupsnapshotlisters.NewVolumeGroupSnapshotContentLister(c.groupContentInformer.GetIndexer())
	}

	c.broadcaster = kubeclient.NewEventBroadcaster()
	c.recorder = c.broadcaster.NewRecorder(kubeclient.Scheme, corev1.EventSource{Component: cfg.Identity})
	return c, nil
}

// check says what is wrong with a Config, with its defaults set.
func (cfg *Config) check() error {
	if cfg.Kube == nil || cfg.Pav == nil || cfg.Engine == nil {
		return fmt.Errorf("controller config needs Kube, Pav and Engine")
	}
	if err := protocol.CheckKubeletDir(cfg.KubeletDir); err != nil {
		return err
	}
	for _, p := range cfg.PoolKubeletDirs {
		if err := protocol.CheckKubeletDir(p.Dir); err != nil {
			return err
		}
	}
	return nil
}

// podNodeIndex indexes a pod by the node it runs on.
func podNodeIndex(obj interface{}) ([]string, error) {
	if pod, ok := obj.(*corev1.Pod); ok && pod.Spec.NodeName != "" {
		return []string{pod.Spec.NodeName}, nil
	}
	return nil, nil
}

// pvDriverIndex indexes a CSI PV by its driver.
func pvDriverIndex(obj interface{}) ([]string, error) {
	pv, ok := obj.(*corev1.PersistentVolume)
	if !ok || pv.Spec.CSI == nil {
		return nil, nil
	}
	return []string{pv.Spec.CSI.Driver}, nil
}

// pvHandleIndex indexes a CSI PV by its driver and handle (handleKey).
func pvHandleIndex(obj interface{}) ([]string, error) {
	pv, ok := obj.(*corev1.PersistentVolume)
	if !ok || pv.Spec.CSI == nil {
		return nil, nil
	}
	return []string{handleKey(pv.Spec.CSI.Driver, pv.Spec.CSI.VolumeHandle)}, nil
}

func labelIndex(label string) cache.IndexFunc {
	return func(obj interface{}) ([]string, error) {
		m, err := metaAccessor(obj)
		if err != nil {
			return nil, nil
		}
		if v, ok := m.GetLabels()[label]; ok && v != "" {
			return []string{v}, nil
		}
		return nil, nil
	}
}

func metaAccessor(obj interface{}) (metav1.Object, error) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("unexpected object %T", obj)
	}
	return m, nil
}

// funcs turns a single "something changed" callback into an event handler.
func (c *Controller) funcs(f func(obj interface{})) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    f,
		UpdateFunc: func(_, n interface{}) { f(n) },
		DeleteFunc: func(o interface{}) {
			if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			f(o)
		},
	}
}

// Run starts the informers and workers and blocks until ctx is done.
func (c *Controller) Run(ctx context.Context) error {
	defer utilruntime.HandleCrash()
	defer c.claimQueue.ShutDown()
	defer c.volumeQueue.ShutDown()
	defer c.provisionerQueue.ShutDown()
	defer c.contentQueue.ShutDown()
	defer c.groupContentQueue.ShutDown()

	c.broadcaster.StartStructuredLogging(3)
	c.broadcaster.StartRecordingToSink(kubeclient.EventSink{Client: c.kube.CoreV1()})
	defer c.broadcaster.Shutdown()

	defer kubeclient.Run(ctx, c.informers...)() // waits for the informers to stop
	if c.contentInformer != nil {
		defer kubeclient.Run(ctx, c.contentInformer)()
	}
	if c.groupContentInformer != nil {
		defer kubeclient.Run(ctx, c.groupContentInformer)()
	}

	klog.InfoS("Waiting for informer caches to sync")
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("caches did not sync: %w", ctx.Err())
	}
	c.metrics.registerInFlight(c)

	var wg sync.WaitGroup
	run := func(n int, w worker) {
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				wait.UntilWithContext(ctx, func(ctx context.Context) {
					for c.processNext(ctx, w) {
					}
				}, time.Second)
			}()
		}
	}
	run(c.cfg.ClaimWorkers, worker{"claims", c.claimQueue, c.syncClaim, c.claimVersion})
	run(c.cfg.VolumeWorkers, worker{"volumes", c.volumeQueue, c.syncVolume, c.volumeVersion})
	run(c.cfg.ProvisionerWorkers, worker{"provisioners", c.provisionerQueue, c.syncProvisioner, c.provisionerVersion})
	if c.contentInformer != nil {
		// Without the snapshot CRDs this cache never syncs; nothing else waits for it.
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !cache.WaitForNamedCacheSync("VolumeSnapshotContents", ctx.Done(), c.contentInformer.HasSynced) {
				return
			}
			run(c.cfg.ProvisionerWorkers, worker{"snapshotcontents", c.contentQueue, c.syncContent, c.contentVersion})
		}()
	}
	if c.groupContentInformer != nil {
		// Without the group snapshot CRDs this cache never syncs; nothing else waits for it.
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !cache.WaitForNamedCacheSync("VolumeGroupSnapshotContents", ctx.Done(), c.groupContentInformer.HasSynced) {
				return
			}
			run(c.cfg.ProvisionerWorkers, worker{"groupsnapshotcontents", c.groupContentQueue, c.syncGroupContent, c.groupContentVersion})
		}()
	}

	klog.InfoS("Controller started", "claimWorkers", c.cfg.ClaimWorkers, "volumeWorkers", c.cfg.VolumeWorkers)

	<-ctx.Done()
	c.claimQueue.ShutDown()
	c.volumeQueue.ShutDown()
	c.provisionerQueue.ShutDown()
	c.contentQueue.ShutDown()
	c.groupContentQueue.ShutDown()
	wg.Wait()
	return nil
}

// retryScheduled wraps a failure that has been reported (Event) and whose
// retry is already scheduled with the item's backoff.
type retryScheduled struct{ err error }

func (e retryScheduled) Error() string { return e.err.Error() }
func (e retryScheduled) Unwrap() error { return e.err }

// worker is one queue and what syncs its keys.
type worker struct {
	name  string
	queue workqueue.TypedRateLimitingInterface[string]
	sync  func(context.Context, string) error
	// version: the resourceVersion of a key's object in the cache ("" if none)
	version func(key string) string
}

func (c *Controller) processNext(ctx context.Context, w worker) bool {
	q := w.queue
	key, quit := q.Get()
	if quit {
		return false
	}
	defer q.Done(key)
	var version string
	if c.cfg.Settled != nil {
		version = w.version(key)
	}
	err := w.sync(ctx, key)
	var scheduled retryScheduled
	switch {
	case err == nil:
		q.Forget(key)
		if c.cfg.Settled != nil {
			c.cfg.Settled(w.name, key, version)
		}
	case errors.As(err, &scheduled):
		klog.V(2).InfoS("Sync failed; retry scheduled", "key", key, "err", err)
	default:
		// API errors, conflicts, caches lagging behind: retry soon, with the
		// queue's own (fast-starting) per-item backoff.
		klog.V(3).InfoS("Requeueing", "key", key, "err", err)
		q.AddRateLimited(key)
	}
	return true
}

func (c *Controller) claimVersion(key string) string {
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	if pvc, err := c.claims.PersistentVolumeClaims(ns).Get(name); err == nil {
		return pvc.ResourceVersion
	}
	return ""
}

func (c *Controller) volumeVersion(name string) string {
	if pv, err := c.volumes.Get(name); err == nil {
		return pv.ResourceVersion
	}
	return ""
}

func (c *Controller) provisionerVersion(name string) string {
	if p := c.provisioner(name); p != nil {
		return p.ResourceVersion
	}
	return ""
}

func (c *Controller) contentVersion(name string) string {
	if content, err := c.contents.Get(name); err == nil {
		return content.ResourceVersion
	}
	return ""
}

// --- event handlers: map every change to the work items it affects ---

func (c *Controller) groupContentVersion(name string) string {
	if content, err := c.groupContents.Get(name); err == nil {
		return content.ResourceVersion
	}
	return ""
}

func (c *Controller) onGroupContent(obj interface{}) {
	if content, ok := obj.(*groupsnapshotv1.VolumeGroupSnapshotContent); ok {
		if p := c.provisioner(content.Spec.Driver); p != nil {
			c.groupContentQueue.Add(content.Name)
			if p.DeletionTimestamp != nil {
				c.provisionerQueue.Add(p.Name) // its group contents may hold it
			}
		}
	}
}

func (c *Controller) onContent(obj interface{}) {
	if content, ok := obj.(*snapshotv1.VolumeSnapshotContent); ok {
		if p := c.provisioner(content.Spec.Driver); p != nil {
			c.contentQueue.Add(content.Name)
			if p.DeletionTimestamp != nil {
				c.provisionerQueue.Add(p.Name) // its contents may hold it
			}
		}
	}
}

func (c *Controller) onClaim(obj interface{}) {
	if pvc, ok := obj.(*corev1.PersistentVolumeClaim); ok {
		c.enqueueClaim(pvc)
		// A clone's progress decides whether its source keeps the clone's finalizer.
		if src := cloneSourceName(pvc); src != "" {
			c.claimQueue.Add(pvc.Namespace + "/" + src)
		}
	}
}

func (c *Controller) enqueueClaim(pvc *corev1.PersistentVolumeClaim) {
	key, err := cache.MetaNamespaceKeyFunc(pvc)
	if err == nil {
		c.claimQueue.Add(key)
	}
}

func (c *Controller) onVolume(obj interface{}) {
	pv, ok := obj.(*corev1.PersistentVolume)
	if !ok {
		return
	}
	c.volumeQueue.Add(pv.Name)
	if pv.Spec.CSI != nil {
		c.provisionerQueue.Add(pv.Spec.CSI.Driver)
		// The cache shows it now (or it is gone): indexCSIHandle covers it.
		c.handles.forget(handleKey(pv.Spec.CSI.Driver, pv.Spec.CSI.VolumeHandle), pv.Name)
	}
	// A claim waiting for its PV to show up in the cache (or for the PV to go).
	if ref := pv.Spec.ClaimRef; ref != nil {
		c.claimQueue.Add(ref.Namespace + "/" + ref.Name)
	}
}

func (c *Controller) onClass(obj interface{}) {
	sc, ok := obj.(*storagev1.StorageClass)
	if !ok {
		return
	}
	c.enqueueClaimsWhere(func(pvc *corev1.PersistentVolumeClaim) bool {
		return pvc.Spec.StorageClassName != nil && *pvc.Spec.StorageClassName == sc.Name
	})
	// Its provisioner's metrics start (or drop) the class's series.
	if c.provisioner(sc.Provisioner) != nil {
		c.provisionerQueue.Add(sc.Provisioner)
	}
}

func (c *Controller) onCSIDriver(obj interface{}) {
	if d, ok := obj.(*storagev1.CSIDriver); ok {
		c.provisionerQueue.Add(d.Name)
	}
}

func (c *Controller) onPod(obj interface{}) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	l := pod.Labels
	if p := l[protocol.LabelProvisioner]; p != "" {
		c.provisionerQueue.Add(p)
	}
	if pvc := pod.Annotations[protocol.AnnotationClaim]; pvc != "" && protocol.Phase(l[protocol.LabelPhase]) != protocol.PhaseStaging && protocol.Phase(l[protocol.LabelPhase]) != protocol.PhaseUnstaging {
		c.claimQueue.Add(pvc)
	}
	if v := l[protocol.LabelVolume]; v != "" {
		c.volumeQueue.Add(v)
	}
	if content := pod.Annotations[protocol.AnnotationSnapshotContent]; content != "" && l[protocol.LabelSnapshotContentUID] != "" {
		c.contentQueue.Add(content)
	}
	if content := pod.Annotations[protocol.AnnotationGroupSnapshotContent]; content != "" && l[protocol.LabelSnapshotContentUID] != "" {
		c.groupContentQueue.Add(content)
	}
}

func (c *Controller) onProvisioner(obj interface{}) {
	p, ok := obj.(*v1alpha1.PavProvisioner)
	if !ok {
		return
	}
	c.provisionerQueue.Add(p.Name)
	if c.contents != nil {
		if all, err := c.contents.List(everything); err == nil {
			for _, content := range all {
				if content.Spec.Driver == p.Name {
					c.contentQueue.Add(content.Name)
				}
			}
		}
	}
	if c.groupContents != nil {
		if all, err := c.groupContents.List(everything); err == nil {
			for _, content := range all {
				if content.Spec.Driver == p.Name {
					c.groupContentQueue.Add(content.Name)
				}
			}
		}
	}
	// Claims may have been waiting for this provisioner (or must now learn
	// that it is going away), or for it to allow an expansion.
	c.enqueueClaimsWhere(func(pvc *corev1.PersistentVolumeClaim) bool {
		return pvc.Spec.VolumeName == "" || pvc.DeletionTimestamp != nil ||
			pvc.Status.AllocatedResourceStatuses[corev1.ResourceStorage] == corev1.PersistentVolumeClaimControllerResizeInfeasible
	})
}

// provisionerFuncs handles PavProvisioner events. Any change may call for a
// new status; only a spec change (a new generation) or the start of its
// deletion matters to claims, so PaV's own status and finalizer writes requeue
// none.
func (c *Controller) provisionerFuncs() cache.ResourceEventHandlerFuncs {
	h := c.funcs(c.onProvisioner)
	h.UpdateFunc = func(o, n interface{}) {
		old, okOld := o.(*v1alpha1.PavProvisioner)
		p, ok := n.(*v1alpha1.PavProvisioner)
		if !ok {
			return
		}
		if okOld && old.Generation == p.Generation && (old.DeletionTimestamp == nil) == (p.DeletionTimestamp == nil) {
			c.provisionerQueue.Add(p.Name)
			return
		}
		c.onProvisioner(p)
	}
	return h
}

func (c *Controller) enqueueClaimsWhere(pred func(*corev1.PersistentVolumeClaim) bool) {
	all, err := c.claims.List(everything)
	if err != nil {
		return
	}
	for _, pvc := range all {
		if pred(pvc) {
			c.enqueueClaim(pvc)
		}
	}
}

// forgetProvisioner drops the compiled templates of a deleted provisioner.
func (c *Controller) forgetProvisioner(obj interface{}) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if p, ok := obj.(*v1alpha1.PavProvisioner); ok {
		c.engine.Forget(p)
	}
}

// provisioner returns the PavProvisioner named name from the cache, or nil.
func (c *Controller) provisioner(name string) *v1alpha1.PavProvisioner {
	if name == "" {
		return nil
	}
	p, err := c.provisioners.Get(name)
	if err != nil {
		return nil
	}
	return p
}

// podsBy lists PaV pods from the index.
func (c *Controller) podsBy(index, value string) []*corev1.Pod {
	objs, err := c.podIndexer.ByIndex(index, value)
	if err != nil {
		return nil
	}
	out := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			out = append(out, p)
		}
	}
	return out
}
