// Package collector hands the result files that PaV pods leave in /pav to
// the controller (Collector), reading them safely (ReadResultFile).
package collector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	mount "k8s.io/mount-utils"

	"github.com/albertofaria/pav/kubeclient"
	"github.com/albertofaria/pav/nodeagent/mounts"
	"github.com/albertofaria/pav/protocol"
)

// Collector hands the files that validation, creation, deletion and
// expansion pods leave in /pav to the controller: once such a pod on this
// node has terminated, it copies /pav/handle, /pav/capacity, /pav/error, /pav/infeasible and
// /pav/volume-attributes into the pod's annotations, marks the pod collected, and
// removes the pod's host directory. The controller only reads the annotations, so it never needs
// access to the node's filesystem.
type Collector struct {
	kube       kubeclient.Interface
	pods       corelisters.PodLister
	podsSynced cache.InformerSynced
	mounter    mount.Interface
	root       string
	// orphanMinAge protects directories of pods being created right now
	// (the staging code creates the directory before the pod).
	orphanMinAge time.Duration
	queue        workqueue.TypedRateLimitingInterface[string]
	// gone holds the host directories of pods deleted before their results
	// were collected (the controller stopped waiting for a node plugin that
	// was down): removed at once rather than at the next sweep.
	gone  workqueue.TypedRateLimitingInterface[string]
	exits Exits // nil: only pod status tells that a pod terminated
}

// collectedPhases are the phases whose results the controller reads.
var collectedPhases = map[protocol.Phase]bool{
	protocol.PhaseValidation: true,
	protocol.PhaseCreation:   true,
	protocol.PhaseDeletion:   true,
	protocol.PhaseExpansion:  true,
	protocol.PhaseCapacity:   true,

	protocol.PhaseSnapshotCreation: true,
	protocol.PhaseSnapshotDeletion: true,
	protocol.PhaseModification:     true,

	protocol.PhaseGroupSnapshotCreation: true,
	protocol.PhaseGroupSnapshotDeletion: true,

	// read by this node plugin itself (nodeagent/inline), as the controller would
	protocol.PhaseInlineCreation: true,
	protocol.PhaseInlineDeletion: true,
}

// Exits tells of a pod's success before kubelet does, from the container
// runtime's exit events (nodeagent.Exits).
type Exits interface {
	// Succeeded: every container of pod exited 0 for good.
	Succeeded(pod *corev1.Pod) bool
	// OnExit adds f to what is called after an exit of one of a pod's
	// containers.
	OnExit(f func(pod *corev1.Pod))
}

// New registers on podInformer, which must only see PaV pods bound to this
// node, and on exits (may be nil). root is the directory of the pods' /pav
// directories (protocol.PodDirRoot).
func New(kube kubeclient.Interface, podInformer cache.SharedIndexInformer, mounter mount.Interface, root string, exits Exits) *Collector {
	c := &Collector{
		kube:         kube,
		pods:         corelisters.NewPodLister(podInformer.GetIndexer()),
		podsSynced:   podInformer.HasSynced,
		mounter:      mounter,
		root:         root,
		orphanMinAge: time.Minute,
		exits:        exits,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "results"}),
		gone: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "gone-pod-dirs"}),
	}
	enqueue := func(obj interface{}) {
		pod, ok := obj.(*corev1.Pod)
		if !ok || !collectedPhases[protocol.Phase(pod.Labels[protocol.LabelPhase])] || !(protocol.Terminated(pod) || c.runtimeSucceeded(pod)) {
			return
		}
		if key, err := cache.MetaNamespaceKeyFunc(pod); err == nil {
			c.queue.Add(key)
		}
	}
	_, _ = podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj interface{}) { enqueue(obj) },
		DeleteFunc: func(obj interface{}) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			pod, ok := obj.(*corev1.Pod)
			if !ok || !collectedPhases[protocol.Phase(pod.Labels[protocol.LabelPhase])] {
				return // staging and unstaging directories are the stager's
			}
			if dir, err := protocol.PodHostDir(pod, c.root); err == nil {
				c.gone.Add(dir) // each pod has its own directory: no later pod reuses it
			}
		},
	})
	if exits != nil {
		exits.OnExit(func(pod *corev1.Pod) { enqueue(pod) })
	}
	return c
}

// runtimeSucceeded: the runtime says pod succeeded (kubelet may not yet).
func (c *Collector) runtimeSucceeded(pod *corev1.Pod) bool {
	return c.exits != nil && c.exits.Succeeded(pod)
}

// Run processes terminated and deleted pods until ctx ends, and sweeps
// orphan directories once the cache is synced and then every orphanMinAge
// (a directory too young at one sweep is removed at the next).
func (c *Collector) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	defer c.gone.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), c.podsSynced) {
		return
	}
	for i := 0; i < workers; i++ {
		go wait.UntilWithContext(ctx, func(ctx context.Context) {
			for c.processNext(ctx) {
			}
		}, time.Second)
	}
	go wait.UntilWithContext(ctx, func(context.Context) {
		for c.removeNextGone() {
		}
	}, time.Second)
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := c.SweepOrphans(time.Now()); err != nil {
			klog.ErrorS(err, "Sweeping orphan /pav directories")
		}
	}, c.orphanMinAge)
}

// removeNextGone removes the directory of one deleted pod.
func (c *Collector) removeNextGone() bool {
	dir, quit := c.gone.Get()
	if quit {
		return false
	}
	defer c.gone.Done(dir)
	if err := mounts.CleanupDir(c.mounter, dir); err != nil {
		klog.ErrorS(err, "Removing a deleted pod's /pav directory", "dir", dir)
		c.gone.AddRateLimited(dir)
		return true
	}
	c.gone.Forget(dir)
	return true
}

func (c *Collector) processNext(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	if err := c.sync(ctx, key); err != nil {
		klog.ErrorS(err, "Collecting pod results", "pod", key)
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

func (c *Collector) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pod, err := c.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil // its directory, if any, goes with the deletion (c.gone)
	}
	if err != nil {
		return err
	}
	return c.Collect(ctx, pod)
}

// Collect copies a terminated pod's results into its annotations, then
// removes its host directory. It is idempotent: a pod already collected
// only gets its directory removed (a crash may have come in between). A pod
// the runtime says succeeded while kubelet has not reported it terminated
// yet is collected at once, and marked succeeded in the same write
// (protocol.AnnotationSucceeded), so that the controller goes on without
// waiting for kubelet.
func (c *Collector) Collect(ctx context.Context, pod *corev1.Pod) error {
	runtimeSucceeded := !protocol.Terminated(pod) && c.runtimeSucceeded(pod)
	if !(protocol.Terminated(pod) || runtimeSucceeded) || !collectedPhases[protocol.Phase(pod.Labels[protocol.LabelPhase])] {
		return nil
	}
	dir, err := protocol.PodHostDir(pod, c.root)
	if err != nil {
		// Not ours to read; still mark it so the controller does not wait.
		klog.InfoS("Not reading pod's /pav", "pod", klog.KObj(pod), "reason", err)
		dir = ""
	}
	if pod.Annotations[protocol.AnnotationResultsCollected] != "true" {
		ann := map[string]interface{}{protocol.AnnotationResultsCollected: "true"}
		if runtimeSucceeded {
			ann[protocol.AnnotationSucceeded] = "true"
		}
		if dir != "" {
			results, err := readResults(dir)
			if err != nil {
				return err
			}
			for k, v := range results {
				ann[k] = v
			}
		}
		patch, _ := json.Marshal(map[string]interface{}{
			"metadata": map[string]interface{}{"annotations": ann},
		})
		_, err := c.kube.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		if apierrors.IsNotFound(err) {
			// Gone already (the controller gave up waiting): drop the directory.
		} else if err != nil {
			return fmt.Errorf("annotating pod %s/%s with its results: %w", pod.Namespace, pod.Name, err)
		} else {
			klog.V(2).InfoS("Collected pod results", "pod", klog.KObj(pod), "dir", dir, "beforeKubelet", runtimeSucceeded)
		}
	}
	if dir == "" {
		return nil
	}
	return mounts.CleanupDir(c.mounter, dir)
}

// readResults reads handle, capacity, error, infeasible,
// volume-attributes, snapshot-handle, restore-size, ready-to-use,
// snapshot-handles and maximum-volume-size from a pod's host directory. A file the pod did not
// write (or left empty) yields no annotation, except infeasible, whose
// presence is the result, and volume-attributes, which the controller
// parses (and refuses if empty). A file PaV
// refuses to read becomes the error annotation, so the failure is explained.
func readResults(dir string) (map[string]string, error) {
	out := map[string]string{}
	files := []struct {
		name, annotation string
		max              int
		evenEmpty        bool
		// evenRefused: a file PaV refuses to read still yields an empty
		// annotation, so that the controller does not take it for absent.
		evenRefused bool
	}{
		{protocol.FileHandle, protocol.AnnotationResultHandle, maxHandleBytes, false, false},
		{protocol.FileCapacity, protocol.AnnotationResultCapacity, maxCapacityBytes, false, false},
		{protocol.FileError, protocol.AnnotationResultError, MaxErrorBytes, false, false},
		{protocol.FileInfeasible, protocol.AnnotationResultInfeasible, MaxErrorBytes, true, false},
		{protocol.FileVolumeAttributes, protocol.AnnotationResultVolumeAttributes, protocol.MaxVolumeAttributesBytes, true, true},
		{protocol.FileSnapshotHandle, protocol.AnnotationResultSnapshotHandle, maxHandleBytes, false, false},
		{protocol.FileRestoreSize, protocol.AnnotationResultRestoreSize, maxCapacityBytes, false, false},
		{protocol.FileReadyToUse, protocol.AnnotationResultReadyToUse, maxCapacityBytes, false, false},
		// Even empty: the controller then says the group's volumes are missing.
		{protocol.FileSnapshotHandles, protocol.AnnotationResultSnapshotHandles, protocol.MaxSnapshotHandlesBytes, true, false},
		{protocol.FileMaximumVolumeSize, protocol.AnnotationResultMaximumVolumeSize, maxCapacityBytes, false, false},
	}
	var refused []string
	for _, f := range files {
		s, exists, err := ReadResultFile(dir, f.name, f.max)
		if err != nil {
			if exists {
				refused = append(refused, err.Error())
				if f.evenRefused {
					out[f.annotation] = ""
				}
				continue
			}
			return nil, err
		}
		if s != "" || (exists && f.evenEmpty) {
			out[f.annotation] = s
		}
	}
	if len(refused) > 0 {
		msg := fmt.Sprintf("PaV refused to read the pod's results: %v", refused)
		if e := out[protocol.AnnotationResultError]; e != "" {
			msg = e + "\n" + msg
		}
		out[protocol.AnnotationResultError] = msg
	}
	return out, nil
}

// SweepOrphans removes directories under the root that no PaV pod on this
// node references any more (their pod was deleted before its results were
// collected, or the node plugin crashed in between). Directories younger
// than orphanMinAge are kept: their pod may be being created right now.
func (c *Collector) SweepOrphans(now time.Time) error {
	entries, err := os.ReadDir(c.root)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("listing %s: %w", c.root, err)
	}
	pods, err := c.pods.List(labels.Everything())
	if err != nil {
		return err
	}
	inUse := map[string]bool{}
	for _, pod := range pods {
		if dir, err := protocol.PodHostDir(pod, c.root); err == nil {
			inUse[dir] = true
		}
	}
	var errs []error
	for _, e := range entries {
		dir := filepath.Join(c.root, e.Name())
		if inUse[dir] {
			continue
		}
		info, err := os.Lstat(dir)
		if err != nil || now.Sub(info.ModTime()) < c.orphanMinAge {
			continue
		}
		klog.InfoS("Removing orphan /pav directory", "dir", dir)
		if err := mounts.CleanupDir(c.mounter, dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Size caps for what a pod's /pav files may put into annotations.
const (
	maxHandleBytes   = protocol.MaxHandleBytes + 1 // plus a trailing newline
	maxCapacityBytes = 256
	MaxErrorBytes    = 8 << 10
)

// ReadResultFile reads a small regular file a pod left in its /pav. It
// refuses symlinks and other special files (the node plugin runs as root and
// must not be tricked into copying host files into annotations) and caps the
// size. ok is false if the file does not exist.
func ReadResultFile(dir, name string, max int) (content string, ok bool, err error) {
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, os.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return "", true, fmt.Errorf("/pav/%s is a symbolic link; PaV only reads regular files", name)
		}
		return "", false, fmt.Errorf("opening /pav/%s: %w", name, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", false, err
	}
	if !st.Mode().IsRegular() {
		return "", true, fmt.Errorf("/pav/%s is not a regular file", name)
	}
	b, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		return "", false, fmt.Errorf("reading /pav/%s: %w", name, err)
	}
	s := string(b)
	if len(b) > max {
		if name == protocol.FileVolumeAttributes {
			// One byte over: protocol.ParseVolumeAttributes, the home of
			// its bounds, refuses it with the limit in the message.
			return s, true, nil
		}
		if name != protocol.FileError && name != protocol.FileInfeasible {
			// A cut handle or capacity would be a different one: refuse.
			return "", true, fmt.Errorf("/pav/%s is longer than %d bytes", name, max)
		}
		s = string(b[:max]) + "… (truncated)"
	}
	return strings.TrimSpace(s), true, nil
}
