package nodeagent

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	mount "k8s.io/mount-utils"

	pavlisters "github.com/albertofaria/pav/crds/generated/listers/crds/v1alpha1"
	"github.com/albertofaria/pav/crds/v1alpha1"
	pavcsi "github.com/albertofaria/pav/csi"
	"github.com/albertofaria/pav/kubeclient"
	"github.com/albertofaria/pav/kubelet"
	"github.com/albertofaria/pav/nodeagent/inline"
	"github.com/albertofaria/pav/nodeagent/mounts"
	"github.com/albertofaria/pav/nodeagent/nodepods"
	"github.com/albertofaria/pav/nodeagent/volstats"
	"github.com/albertofaria/pav/protocol"
)

// Index names.
const (
	// pvsByHandle indexes PVs by "<csi driver>/<volume handle>".
	pvsByHandle = "pav-handle"
)

// AnnotationProvisionedBy is set on PVs by dynamic provisioners.

// PodIndexers are the indexers the stager and Exits need on the pod informer.
func PodIndexers() cache.Indexers {
	return cache.Indexers{
		nodepods.ByStaging: nodepods.IndexByStaging,
		podsByUID:          indexPodUID,
	}
}

// PVIndexers are the indexers the stager needs on the PV informer.
func PVIndexers() cache.Indexers {
	return cache.Indexers{pvsByHandle: func(obj interface{}) ([]string, error) {
		pv, ok := obj.(*corev1.PersistentVolume)
		if !ok || pv.Spec.CSI == nil {
			return nil, nil
		}
		return []string{pv.Spec.CSI.Driver + "/" + pv.Spec.CSI.VolumeHandle}, nil
	}}
}

// Stager implements csi.Stager with staging and unstaging pods.
type Stager struct {
	kube         kubeclient.Interface
	engine       Engine
	node         string
	root         string
	mounter      mount.Interface
	pods         cache.Indexer
	podLister    corelisters.PodLister
	pvs          cache.Indexer
	provisioners pavlisters.PavProvisionerLister
	nodePods     *nodepods.Pods  // PaV's pods on this node: created, found, waited on
	inline       *inline.Volumes // CSI inline ephemeral volumes, created and deleted
	exits        *Exits          // nil: only pod status tells that a pod succeeded
	metrics      *metrics
	recorder     record.EventRecorder // Events on client pods; nil: none
	health       *volumeHealth
	// probes and readStats read volumes' usage (Stats); readStats is
	// volstats.Read but in tests.
	probes    *volstats.Probes
	readStats func(volumePath string) (*pavcsi.VolumeStats, error)
	// one Publish or Unpublish per staging at a time: kubelet serializes its
	// own calls, but the abandoned-staging sweep also unpublishes
	locks stagingLocks
	// the sweep's unpublishes of stagings kubelet forgot (abandoned.go)
	abandoned abandonedUnpublishes
	// recoveries queues stagings to recover (recovery.go); nil: none
	recoveries workqueue.TypedRateLimitingInterface[string]
	// processes finds client containers' processes; nil: recovery cannot
	// reach into them
	processes ContainerProcesses
	// deviceAt reads a block volume's device number (blockDeviceAt);
	// deviceCgroupV2 tells whether the node's device cgroups are v2
	// (nodeDeviceCgroupV2): both but in tests
	deviceAt       func(path string) (uint64, error)
	deviceCgroupV2 func() bool
	// own is the node plugin's mount namespace, as a rollout reads and
	// changes it (hostMounts but in tests)
	own ownMounts
	// keptBlockStagings: the stopped block stagings kept on cgroup v2
	// whose clients were told (keepForBlockClients), by staging pod UID
	keptBlockStagings sync.Map
	// informers behind the caches above, by resource (Ready)
	informers map[string]cache.SharedIndexInformer
}

// StagerConfig wires a Stager. The pod informer must only see PaV pods on
// this node and carry PodIndexers; the PV informer carries PVIndexers.
type StagerConfig struct {
	Kube         kubeclient.Interface
	Engine       Engine
	NodeName     string
	PodDirRoot   string
	Mounter      mount.Interface
	Pods         cache.SharedIndexInformer
	PVs          cache.SharedIndexInformer
	Provisioners cache.SharedIndexInformer
	Metrics      *metrics
	// Exits, if set, tells of a pod's success before kubelet does.
	Exits *Exits
	// Recorder, if set, reports volumes turning abnormal on their client pods.
	Recorder record.EventRecorder
	// Processes, if set, finds client containers for recovery.
	Processes ContainerProcesses
	// Recovery turns on the recovery of stagings that stop serving (RunRecovery).
	Recovery bool
	// ownMounts: nil, the node plugin's real mount namespace; tests' fake.
	ownMounts ownMounts
}

// NewStager registers on the pod informer and returns the stager.
func NewStager(cfg StagerConfig) *Stager {
	s := &Stager{
		kube:         cfg.Kube,
		engine:       cfg.Engine,
		node:         cfg.NodeName,
		root:         cfg.PodDirRoot,
		mounter:      cfg.Mounter,
		pods:         cfg.Pods.GetIndexer(),
		podLister:    corelisters.NewPodLister(cfg.Pods.GetIndexer()),
		pvs:          cfg.PVs.GetIndexer(),
		provisioners: pavlisters.NewPavProvisionerLister(cfg.Provisioners.GetIndexer()),
		nodePods:     nodepods.New(cfg.Kube, cfg.NodeName, cfg.PodDirRoot, cfg.Pods, cfg.Recorder),
		exits:        cfg.Exits,
		metrics:      cfg.Metrics,
		recorder:     cfg.Recorder,
		health:       newVolumeHealth(),
		probes:       volstats.NewProbes(volstats.DefaultTimeout),
		informers: map[string]cache.SharedIndexInformer{
			"pods": cfg.Pods, "persistentvolumes": cfg.PVs, "pavprovisioners": cfg.Provisioners,
		},
	}
	s.readStats = func(path string) (*pavcsi.VolumeStats, error) { return volstats.Read(cfg.Mounter, path) }
	s.inline = inline.New(inline.Config{Kube: cfg.Kube, Engine: cfg.Engine, Pods: s.nodePods, Provisioners: s.provisioners,
		NodeName: cfg.NodeName, PodDirRoot: cfg.PodDirRoot})
	if s.own = cfg.ownMounts; s.own == nil {
		s.own = hostMounts{mounter: cfg.Mounter}
	}
	s.deviceAt, s.deviceCgroupV2 = blockDeviceAt, nodeDeviceCgroupV2
	if s.metrics == nil {
		s.metrics = newMetrics(nil)
	}
	if cfg.Recovery {
		s.recoveries = newRecoveryQueue()
		s.processes = cfg.Processes
	}
	onPod := func(obj interface{}) {
		if pod, ok := obj.(*corev1.Pod); ok {
			s.checkStagingPod(pod)
		}
	}
	_, _ = cfg.Pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onPod, UpdateFunc: func(_, obj interface{}) { onPod(obj) },
	})
	onProvisioner := func(obj interface{}) {
		if p, ok := obj.(*v1alpha1.PavProvisioner); ok {
			s.checkRollout(p)
		}
	}
	_, _ = cfg.Provisioners.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onProvisioner, UpdateFunc: func(_, obj interface{}) { onProvisioner(obj) },
	})
	if cfg.Exits != nil {
		cfg.Exits.OnExit(func(pod *corev1.Pod) {
			s.nodePods.Notify(pod)
			s.checkStagingPod(pod)
		})
	}
	return s
}

var _ pavcsi.Stager = (*Stager)(nil)

// Ready is nil once the stager's caches have synced, as long as their
// informers run: Publish and Unpublish answer from those caches.
func (s *Stager) Ready() error {
	for _, name := range slices.Sorted(maps.Keys(s.informers)) {
		switch inf := s.informers[name]; {
		case inf.IsStopped():
			return fmt.Errorf("the %s informer stopped", name)
		case !inf.HasSynced():
			return fmt.Errorf("the %s cache has not synced yet", name)
		}
	}
	return nil
}

// Publish stages a volume for one client pod: it runs (or finds) the staging
// pod, waits until the pod completed or signalled /pav/ready, checks
// /pav/volume and bind-mounts it at the target path.
func (s *Stager) Publish(ctx context.Context, driver string, req *pavcsi.PublishRequest) (err error) {
	start := time.Now()
	defer func() { s.metrics.observe("publish", driver, start, err) }()
	defer s.locks.lock(protocol.StagingID(req.VolumeID, req.TargetPath))()
	// kubelet passes a staging path for block volumes even to drivers
	// that do not stage: only a sharing driver's publishes bind a staging.
	if req.StagingPath != "" && s.SharedStaging(driver) {
		return s.publishStaged(ctx, driver, req)
	}
	return s.publish(ctx, driver, req, publishOptions{})
}

// publishOptions are what a publish that is not a client's own differs by.
type publishOptions struct {
	// rec: a recovery restages a volume still in use (recovery.go): the new
	// staging pod records it, the mount at the target is replaced, and a
	// failed staging pod stays as the record of the recovery, for the next
	// attempt to replace.
	rec *recoveryRecord
	// shared: the staging serves every client on the node (Stage).
	shared bool
}

func (o publishOptions) annotations() map[string]string {
	ann := o.rec.annotations()
	if o.shared {
		if ann == nil {
			ann = map[string]string{}
		}
		ann[protocol.AnnotationShared] = "true"
	}
	return ann
}

// SharedStaging: the provisioner asks for one staging per node, or a
// staging pod of the driver on this node still serves so (the provisioner
// changed since: kubelet must still be told to unstage it).
func (s *Stager) SharedStaging(driver string) bool {
	if p, err := s.provisioner(driver); err == nil && p.Spec.VolumeStaging != nil && p.Spec.VolumeStaging.Shared {
		return true
	}
	for _, obj := range s.pods.List() {
		pod := obj.(*corev1.Pod)
		if pod.Labels[protocol.LabelProvisioner] == driver && pod.Labels[protocol.LabelPhase] == string(protocol.PhaseStaging) &&
			pod.Annotations[protocol.AnnotationShared] == "true" {
			return true
		}
	}
	return false
}

// Stage stages a volume once for every client on the node (NodeStageVolume):
// the shared staging pod is run and checked like a client's own, with
// kubelet's staging path as its target, but nothing is mounted there:
// publishes bind the staging pod's /pav/volume itself. (A mount at the
// staging path would share its file system with the staging pod's /pav
// mount, and kubelet refuses to unstage a staging path still mounted
// elsewhere.)
func (s *Stager) Stage(ctx context.Context, driver string, req *pavcsi.PublishRequest) (err error) {
	start := time.Now()
	defer func() { s.metrics.observe("stage", driver, start, err) }()
	defer s.locks.lock(protocol.StagingID(req.VolumeID, req.TargetPath))()
	return s.publish(ctx, driver, req, publishOptions{shared: true})
}

// Unstage stops a shared staging once kubelet unpublished its last client:
// the staging pod stops and the unstaging pod runs, as for a client's own.
func (s *Stager) Unstage(ctx context.Context, driver, volumeID, stagingPath string) (err error) {
	start := time.Now()
	defer func() { s.metrics.observe("unstage", driver, start, err) }()
	id := protocol.StagingID(volumeID, stagingPath)
	defer s.locks.lock(id)()
	s.health.forget(id)
	pod, err := s.nodePods.Find(ctx, protocol.PhaseStaging, id)
	if err != nil {
		return err
	}
	if pod == nil {
		return s.removeUnstagingPods(ctx, id)
	}
	// a replaced staging pod too, whose teardown a restart interrupted
	for _, p := range append(s.olderStagings(id, pod), pod) {
		if err := s.teardown(ctx, driver, p); err != nil {
			return err
		}
	}
	return nil
}

// publishStaged binds, at a client's target path, the volume the shared
// staging pod of req.StagingPath serves.
func (s *Stager) publishStaged(ctx context.Context, driver string, req *pavcsi.PublishRequest) error {
	pod, err := s.nodePods.Find(ctx, protocol.PhaseStaging, protocol.StagingID(req.VolumeID, req.StagingPath))
	if err != nil {
		return err
	}
	if pod == nil || pod.DeletionTimestamp != nil {
		return status.Errorf(codes.FailedPrecondition, "volume %s is not staged on this node (kubelet stages it first)", req.VolumeID)
	}
	pv, err := s.findPV(ctx, driver, req.VolumeID, req.VolumeContext)
	if err != nil {
		return err
	}
	if err := checkStagedFor(pod, pv); err != nil {
		return err
	}
	if req.SingleWriter {
		if err := checkSingleWriterTargets(s.mounter, pv.Name, req.TargetPath); err != nil {
			return err
		}
	}
	dir, err := protocol.PodHostDir(pod, s.root)
	if err != nil {
		return status.Errorf(codes.Internal, "staging pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	src, err := mounts.OpenInPav(dir, protocol.PavMountPath, protocol.FileVolume)
	if err != nil {
		return status.Errorf(codes.Internal, "staging pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	defer src.Close()
	if err := mounts.PublishTarget(s.mounter, src, req.TargetPath, s.bindOptions(driver, req.Block, req.ReadOnly)); err != nil {
		return status.Errorf(codes.Internal, "mounting the volume at %s: %v", req.TargetPath, err)
	}
	return nil
}

// publish is Publish with the staging's lock held.
func (s *Stager) publish(ctx context.Context, driver string, req *pavcsi.PublishRequest, opts publishOptions) error {
	rec := opts.rec
	start := time.Now()
	id := protocol.StagingID(req.VolumeID, req.TargetPath)
	logger := klog.FromContext(ctx).WithValues("driver", driver, "volume", req.VolumeID, "stagingID", id)

	pod, err := s.nodePods.Find(ctx, protocol.PhaseStaging, id)
	if err != nil {
		return err
	}
	if rec == nil { // a recovery's target holds the old volume, by design
		if err := s.checkTarget(req, pod); err != nil {
			return err
		}
	}
	pv, err := s.findPV(ctx, driver, req.VolumeID, req.VolumeContext)
	if err != nil {
		return err
	}
	if opts.shared && pod != nil && pod.DeletionTimestamp == nil {
		if err := checkStagedFor(pod, pv); err != nil {
			return err
		}
	}
	if pod, err = s.stagingPodFor(ctx, driver, id, pod, pv, req, opts); err != nil {
		return err
	}
	dir, err := protocol.PodHostDir(pod, s.root)
	if err != nil {
		return status.Errorf(codes.Internal, "staging pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}

	if pod, err = s.awaitPublishing(ctx, driver, pod, dir, rec); err != nil {
		return err
	}
	src, err := openStagedVolume(pod, dir, pv, req.Block)
	if err != nil {
		if rec != nil {
			return status.Error(codes.Internal, err.Error())
		}
		return s.failStaging(ctx, driver, pod, err.Error())
	}
	defer src.Close()
	if opts.shared {
		logger.V(1).Info("Volume staged for the node's clients", "pod", klog.KObj(pod), "duration", time.Since(start))
		return nil // clients bind the staging pod's volume (publishStaged)
	}
	if rec.showsAt(req.TargetPath) {
		// The target still holds the volume that stopped working.
		if err := mounts.UnmountUnder(s.mounter, req.TargetPath); err != nil {
			return status.Errorf(codes.Internal, "unmounting the stopped volume at %s: %v", req.TargetPath, err)
		}
	}
	if err := mounts.PublishTarget(s.mounter, src, req.TargetPath, s.bindOptions(driver, req.Block, req.ReadOnly)); err != nil {
		return status.Errorf(codes.Internal, "mounting the volume at %s: %v", req.TargetPath, err)
	}
	logger.V(1).Info("Volume staged", "pod", klog.KObj(pod), "target", req.TargetPath, "readOnly", req.ReadOnly,
		"block", req.Block, "duration", time.Since(start))
	return nil
}

// awaitPublishing waits until the staging pod of a publish is ready, and
// returns it as last seen. A failed one fails the staging (a recovery's is
// left to the recovery worker).
func (s *Stager) awaitPublishing(ctx context.Context, driver string, pod *corev1.Pod, dir string, rec *recoveryRecord) (*corev1.Pod, error) {
	waitCtx, cancel := nodepods.BeforeDeadline(ctx, 3*time.Second)
	defer cancel()
	pod, state, err := s.awaitStaging(waitCtx, pod, dir)
	switch {
	case err != nil && state == stagingPending:
		return pod, status.Errorf(codes.DeadlineExceeded, "staging pod %s/%s is not done yet (kubelet will call again): %s",
			pod.Namespace, pod.Name, nodepods.Describe(pod))
	case state == stagingGone:
		return pod, status.Errorf(codes.Aborted, "staging pod %s/%s was deleted before the volume was staged", pod.Namespace, pod.Name)
	case state == stagingFailed && rec != nil:
		return pod, status.Errorf(codes.Internal, "staging pod %s/%s failed: %s", pod.Namespace, pod.Name, s.failureMessage(ctx, pod, dir))
	case state == stagingFailed:
		msg := s.failureMessage(ctx, pod, dir)
		return pod, s.failStaging(ctx, driver, pod, fmt.Sprintf("staging pod %s/%s failed: %s", pod.Namespace, pod.Name, msg))
	}
	if _, err := s.succeeded(ctx, pod); err != nil { // records the runtime's word before acting on it
		return pod, err
	}
	return pod, nil
}

// openStagedVolume opens the volume a ready staging pod serves (its host
// directory is dir) and checks it is usable as pv; the caller mounts what
// it checked, through the returned descriptor.
func openStagedVolume(pod *corev1.Pod, dir string, pv *corev1.PersistentVolume, block bool) (*os.File, error) {
	capacity := int64(0)
	if q, ok := pv.Spec.Capacity[corev1.ResourceStorage]; ok {
		capacity = q.Value()
	}
	src, err := mounts.OpenInPav(dir, protocol.PavMountPath, protocol.FileVolume)
	if err == nil {
		if err = mounts.CheckVolume(src, block, capacity, mounts.PodDevices(pod)); err != nil {
			src.Close()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("staging pod %s/%s did not provide a usable volume: %w", pod.Namespace, pod.Name, err)
	}
	return src, nil
}

// awaitStaging waits until a staging pod is no longer pending, and returns
// it as last seen (or as given, if it was not seen again) with its state.
func (s *Stager) awaitStaging(ctx context.Context, pod *corev1.Pod, dir string) (*corev1.Pod, stagingState, error) {
	var state stagingState
	last, err := s.nodePods.Wait(ctx, pod, dir, func(p *corev1.Pod) bool {
		state = stagingStateOf(p, dir, s.exits)
		return state != stagingPending
	})
	if last != nil {
		pod = last
	}
	return pod, state, err
}

// stagingPodFor is the staging pod a publish waits for: pod (found), or a
// new one if there is none or only one whose unstaging a failed attempt left
// unfinished (finished first).
func (s *Stager) stagingPodFor(ctx context.Context, driver, id string, pod *corev1.Pod, pv *corev1.PersistentVolume, req *pavcsi.PublishRequest, opts publishOptions) (*corev1.Pod, error) {
	logger := klog.FromContext(ctx).WithValues("driver", driver, "volume", req.VolumeID, "stagingID", id)
	if pod != nil && pod.DeletionTimestamp != nil {
		logger.Info("Finishing the unstaging of a previous staging pod", "pod", klog.KObj(pod))
		if err := s.teardown(ctx, driver, pod); err != nil {
			return nil, err
		}
		// A newer staging pod may exist beside it (a recovery's
		// replacement, which the cache showed after the old one).
		var err error
		if pod, err = s.nodePods.Find(ctx, protocol.PhaseStaging, id); err != nil {
			return nil, err
		}
		if pod != nil && pod.DeletionTimestamp != nil {
			return nil, status.Errorf(codes.Aborted, "staging pod %s/%s is still being deleted (kubelet will call again)", pod.Namespace, pod.Name)
		}
	}
	if pod != nil {
		return pod, nil
	}
	// No new staging for a provisioner being deleted (as in the original
	// PaV): the client pod stays Pending with this message. A staging that
	// exists already is answered as before (kubelet may call again).
	if prov, err := s.provisioner(driver); err == nil && prov.DeletionTimestamp != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "PavProvisioner %s is being deleted: no new volume is staged", driver)
	}
	if req.SingleWriter {
		if err := s.checkSingleWriter(pv.Name, id); err != nil {
			return nil, err
		}
	}
	pod, err := s.createStagingPod(ctx, driver, id, pv, req, opts.annotations(), "")
	if err != nil {
		return nil, err
	}
	logger.V(2).Info("Created staging pod", "pod", klog.KObj(pod))
	return pod, nil
}

// checkStagedFor refuses, with FAILED_PRECONDITION, to serve pv from a
// shared staging made for another PV or claim. Kubelet's staging path, and
// so the staging ID, depend only on the driver and handle: a second PV with
// the handle (a static PV an admin made with an existing handle) would
// otherwise join the first one's staging, made with the first claim and
// the first PV's attributes.
func checkStagedFor(pod *corev1.Pod, pv *corev1.PersistentVolume) error {
	staged := &corev1.PersistentVolume{}
	if err := json.Unmarshal([]byte(pod.Annotations[protocol.AnnotationVolumeSnapshot]), staged); err != nil || staged.Name == "" {
		return status.Errorf(codes.FailedPrecondition, "staging pod %s/%s does not say which PersistentVolume it stages", pod.Namespace, pod.Name)
	}
	sameClaim := true
	if ref, staged := pv.Spec.ClaimRef, pod.Labels[protocol.LabelClaimUID]; ref != nil && ref.UID != "" && staged != "" {
		sameClaim = staged == protocol.LabelValue(string(ref.UID))
	}
	if staged.Name == pv.Name && staged.UID == pv.UID && sameClaim {
		return nil
	}
	return status.Errorf(codes.FailedPrecondition,
		"PersistentVolume %s (claim %s) has volume handle %q, which this node already stages for PersistentVolume %s (claim %s, staging pod %s/%s): a staging serves one PersistentVolume, so each needs a handle of its own",
		pv.Name, claimName(pv), pv.Spec.CSI.VolumeHandle, staged.Name, pod.Annotations[protocol.AnnotationClaim], pod.Namespace, pod.Name)
}

// claimName is "<namespace>/<name>" of the claim pv is bound to, "none" if none.
func claimName(pv *corev1.PersistentVolume) string {
	if ref := pv.Spec.ClaimRef; ref != nil {
		return ref.Namespace + "/" + ref.Name
	}
	return "none"
}

// checkTarget refuses, with ALREADY_EXISTS as CSI requires, a publish at a
// target that is already published incompatibly: with the other read-only
// flag (recorded on the staging pod), as the other volume mode (a block
// volume's target is a file, a filesystem's a directory), or for another
// volume (mounted, but not by this volume's staging, pod).
func (s *Stager) checkTarget(req *pavcsi.PublishRequest, pod *corev1.Pod) error {
	if pod != nil && pod.DeletionTimestamp == nil {
		if was, err := strconv.ParseBool(pod.Annotations[protocol.AnnotationReadOnly]); err == nil && was != req.ReadOnly {
			return status.Errorf(codes.AlreadyExists, "volume %s is already published at %s with read-only %v", req.VolumeID, req.TargetPath, was)
		}
	}
	fi, err := os.Stat(req.TargetPath)
	if err != nil {
		return nil // nothing there yet (or a broken mount, which publishing repairs)
	}
	mounted, err := s.mounter.IsMountPoint(req.TargetPath)
	if err != nil || !mounted {
		return nil
	}
	switch {
	case fi.IsDir() && req.Block:
		return status.Errorf(codes.AlreadyExists, "%s is already published as a filesystem volume, not a block one", req.TargetPath)
	case !fi.IsDir() && !req.Block:
		return status.Errorf(codes.AlreadyExists, "%s is already published as a block volume, not a filesystem one", req.TargetPath)
	case pod == nil:
		return status.Errorf(codes.AlreadyExists, "%s is already published, not for volume %s", req.TargetPath, req.VolumeID)
	}
	return nil
}

// checkSingleWriter refuses, with FAILED_PRECONDITION as CSI asks, to stage
// a SINGLE_NODE_SINGLE_WRITER (ReadWriteOncePod) volume that a staging pod
// on this node already stages for another target. The scheduler keeps a
// second pod of such a claim off every node; this is the node's own check.
func (s *Stager) checkSingleWriter(pvName, id string) error {
	sel := labels.SelectorFromSet(labels.Set{
		protocol.LabelPhase:  string(protocol.PhaseStaging),
		protocol.LabelVolume: protocol.LabelValue(pvName),
	})
	pods, err := s.podLister.List(sel)
	if err != nil {
		return status.Errorf(codes.Internal, "listing staging pods of volume %s: %v", pvName, err)
	}
	for _, p := range pods {
		if p.Labels[protocol.LabelStagingID] != id && p.DeletionTimestamp == nil {
			return status.Errorf(codes.FailedPrecondition, "volume %s is ReadWriteOncePod and already published on this node at %s (staging pod %s/%s)",
				pvName, p.Annotations[protocol.AnnotationTargetPath], p.Namespace, p.Name)
		}
	}
	return nil
}

// checkSingleWriterTargets is checkSingleWriter for a shared staging, which
// serves every client from one pod: it refuses a SINGLE_NODE_SINGLE_WRITER
// publish while the volume is mounted at another of kubelet's target paths
// on this node (a pod bound to the node by its spec.nodeName skips the
// scheduler's check).
func checkSingleWriterTargets(m mount.Interface, pvName, target string) error {
	mounts, err := m.List()
	if err != nil {
		return status.Errorf(codes.Internal, "listing mounts: %v", err)
	}
	for _, mp := range mounts {
		if p := filepath.Clean(mp.Path); p != filepath.Clean(target) && kubelet.IsPublishPathOf(p, pvName) {
			return status.Errorf(codes.FailedPrecondition, "volume %s is ReadWriteOncePod and already published on this node at %s", pvName, p)
		}
	}
	return nil
}

// failStaging unstages after a failed staging and returns the error for kubelet.
func (s *Stager) failStaging(ctx context.Context, driver string, pod *corev1.Pod, msg string) error {
	klog.FromContext(ctx).Info("Volume staging failed; unstaging", "pod", klog.KObj(pod), "message", msg)
	if err := s.teardown(ctx, driver, pod); err != nil {
		msg += fmt.Sprintf("; unstaging afterwards did not complete yet: %v", err)
	}
	return status.Error(codes.Internal, msg)
}

// Unpublish unstages: unmount the target, stop the staging pod, run the
// unstaging pod, remove leftover mounts and the pod's host directory.
func (s *Stager) Unpublish(ctx context.Context, driver, volumeID, targetPath string) (err error) {
	start := time.Now()
	defer func() { s.metrics.observe("unpublish", driver, start, err) }()
	id := protocol.StagingID(volumeID, targetPath)
	defer s.locks.lock(id)()
	s.health.forget(id)
	if err := mounts.UnmountUnder(s.mounter, targetPath); err != nil {
		return status.Errorf(codes.Internal, "unmounting %s: %v", targetPath, err)
	}
	pod, err := s.nodePods.Find(ctx, protocol.PhaseStaging, id)
	if err != nil {
		return err
	}
	if pod != nil {
		// Every staging pod of the target: a replaced one too, whose teardown
		// a restart interrupted.
		for _, p := range append(s.olderStagings(id, pod), pod) {
			if err := s.teardown(ctx, driver, p); err != nil {
				return err
			}
		}
	} else if err := s.removeUnstagingPods(ctx, id); err != nil {
		return err
	}
	if err := s.inline.Delete(ctx, driver, volumeID); err != nil {
		return err
	}
	if err := mounts.UnpublishTarget(s.mounter, targetPath); err != nil {
		return status.Errorf(codes.Internal, "%v", err)
	}
	klog.FromContext(ctx).V(1).Info("Volume unstaged", "driver", driver, "volume", volumeID, "target", targetPath, "duration", time.Since(start))
	return nil
}
