package nodeagent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	mount "k8s.io/mount-utils"

	"github.com/albertofaria/pav/crds/v1alpha1"
	pavcsi "github.com/albertofaria/pav/csi"
	"github.com/albertofaria/pav/templating"
)

// Index names.
const (
	// podsByStaging indexes PaV pods by "<phase>/<staging ID>".
	podsByStaging = "pav-staging"
	// pvsByHandle indexes PVs by "<csi driver>/<volume handle>".
	pvsByHandle = "pav-handle"
)

// AnnotationProvisionedBy is set on PVs by dynamic provisioners.
const annotationProvisionedBy = "pv.kubernetes.io/provisioned-by"

// logTailLines is how much of a failed container's log goes into a message.
const logTailLines = 10

// PodIndexers are the indexers the stager needs on the pod informer.
func PodIndexers() cache.Indexers {
	return cache.Indexers{podsByStaging: func(obj interface{}) ([]string, error) {
		pod, ok := obj.(*corev1.Pod)
		if !ok || pod.Labels[templating.LabelStagingID] == "" {
			return nil, nil
		}
		return []string{pod.Labels[templating.LabelPhase] + "/" + pod.Labels[templating.LabelStagingID]}, nil
	}}
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

// StagingID identifies one staging of a volume: kubelet publishes a volume
// once per client pod, at a target path unique to that pod and volume.
func StagingID(volumeID, targetPath string) string {
	sum := sha256.Sum256([]byte(volumeID + "\x00" + targetPath))
	return hex.EncodeToString(sum[:])[:20]
}

// Stager implements csi.Stager with staging and unstaging pods.
type Stager struct {
	kube         kubernetes.Interface
	engine       Engine
	node         string
	root         string
	mounter      mount.Interface
	pods         cache.Indexer
	podLister    corelisters.PodLister
	pvs          cache.Indexer
	provisioners cache.Indexer
	events       *podEvents
	metrics      *metrics
	recorder     record.EventRecorder // Events on client pods; nil: none
	health       *volumeHealth
	// informers behind the caches above, by resource (Ready)
	informers map[string]cache.SharedIndexInformer
}

// StagerConfig wires a Stager. The pod informer must only see PaV pods on
// this node and carry PodIndexers; the PV informer carries PVIndexers.
type StagerConfig struct {
	Kube         kubernetes.Interface
	Engine       Engine
	NodeName     string
	PodDirRoot   string
	Mounter      mount.Interface
	Pods         cache.SharedIndexInformer
	PVs          cache.SharedIndexInformer
	Provisioners cache.SharedIndexInformer
	Metrics      *metrics
	// Recorder, if set, reports volumes turning abnormal on their client pods.
	Recorder record.EventRecorder
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
		provisioners: cfg.Provisioners.GetIndexer(),
		events:       newPodEvents(),
		metrics:      cfg.Metrics,
		recorder:     cfg.Recorder,
		health:       newVolumeHealth(),
		informers: map[string]cache.SharedIndexInformer{
			"pods": cfg.Pods, "persistentvolumes": cfg.PVs, "pavprovisioners": cfg.Provisioners,
		},
	}
	if s.metrics == nil {
		s.metrics = newMetrics(nil)
	}
	_, _ = cfg.Pods.AddEventHandler(s.events.handler())
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
	defer func() { s.metrics.observe("publish", start, err) }()
	id := StagingID(req.VolumeID, req.TargetPath)
	logger := klog.FromContext(ctx).WithValues("driver", driver, "volume", req.VolumeID, "stagingID", id)

	pod, err := s.findPod(ctx, templating.PhaseStaging, id)
	if err != nil {
		return err
	}
	if err := s.checkTarget(req, pod); err != nil {
		return err
	}
	pv, err := s.findPV(ctx, driver, req.VolumeID, req.VolumeContext)
	if err != nil {
		return err
	}
	if pod != nil && pod.DeletionTimestamp != nil {
		// A previous attempt failed and its unstaging did not finish: finish it first.
		logger.Info("Finishing the unstaging of a previous staging pod", "pod", klog.KObj(pod))
		if err := s.teardown(ctx, driver, pod); err != nil {
			return err
		}
		pod = nil
	}
	if pod == nil {
		// No new staging for a provisioner being deleted (as in the original
		// PaV): the client pod stays Pending with this message. A staging that
		// exists already is answered as before (kubelet may call again).
		if prov, err := s.provisioner(driver); err == nil && prov.DeletionTimestamp != nil {
			return status.Errorf(codes.FailedPrecondition, "PavProvisioner %s is being deleted: no new volume is staged", driver)
		}
		if pod, err = s.createStagingPod(ctx, driver, id, pv, req); err != nil {
			return err
		}
		logger.V(2).Info("Created staging pod", "pod", klog.KObj(pod))
	}
	dir, err := podHostDir(pod, s.root)
	if err != nil {
		return status.Errorf(codes.Internal, "staging pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}

	waitCtx, cancel := beforeDeadline(ctx, 3*time.Second)
	defer cancel()
	var state stagingState
	last, err := s.wait(waitCtx, pod, dir, func(p *corev1.Pod) bool {
		state = stagingStateOf(p, dir)
		return state != stagingPending
	})
	if last != nil {
		pod = last
	}
	switch {
	case err != nil && state == stagingPending:
		return status.Errorf(codes.DeadlineExceeded, "staging pod %s/%s is not done yet (kubelet will call again): %s",
			pod.Namespace, pod.Name, describePod(pod))
	case state == stagingGone:
		return status.Errorf(codes.Aborted, "staging pod %s/%s was deleted before the volume was staged", pod.Namespace, pod.Name)
	case state == stagingFailed:
		msg := s.failureMessage(ctx, pod, dir)
		return s.failStaging(ctx, driver, pod, fmt.Sprintf("staging pod %s/%s failed: %s", pod.Namespace, pod.Name, msg))
	}

	capacity := int64(0)
	if q, ok := pv.Spec.Capacity[corev1.ResourceStorage]; ok {
		capacity = q.Value()
	}
	src, err := openInPav(dir, templating.FileVolume)
	if err == nil {
		defer src.Close()
		err = checkVolume(src, req.Block, capacity, podDevices(pod))
	}
	if err != nil {
		return s.failStaging(ctx, driver, pod, fmt.Sprintf("staging pod %s/%s did not provide a usable volume: %v", pod.Namespace, pod.Name, err))
	}
	if err := publishTarget(s.mounter, src, req.TargetPath, req.Block, req.ReadOnly); err != nil {
		return status.Errorf(codes.Internal, "mounting the volume at %s: %v", req.TargetPath, err)
	}
	logger.V(1).Info("Volume staged", "pod", klog.KObj(pod), "target", req.TargetPath, "readOnly", req.ReadOnly,
		"block", req.Block, "duration", time.Since(start))
	return nil
}

// checkTarget refuses, with ALREADY_EXISTS as CSI requires, a publish at a
// target that is already published incompatibly: with the other read-only
// flag (recorded on the staging pod), as the other volume mode (a block
// volume's target is a file, a filesystem's a directory), or for another
// volume (mounted, but not by this volume's staging, pod).
func (s *Stager) checkTarget(req *pavcsi.PublishRequest, pod *corev1.Pod) error {
	if pod != nil && pod.DeletionTimestamp == nil {
		if was, err := strconv.ParseBool(pod.Annotations[templating.AnnotationReadOnly]); err == nil && was != req.ReadOnly {
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
	defer func() { s.metrics.observe("unpublish", start, err) }()
	id := StagingID(volumeID, targetPath)
	s.health.forget(id)
	if err := unmountUnder(s.mounter, targetPath); err != nil {
		return status.Errorf(codes.Internal, "unmounting %s: %v", targetPath, err)
	}
	pod, err := s.findPod(ctx, templating.PhaseStaging, id)
	if err != nil {
		return err
	}
	if pod != nil {
		if err := s.teardown(ctx, driver, pod); err != nil {
			return err
		}
	} else if err := s.removeUnstagingPods(ctx, id); err != nil {
		return err
	}
	if err := unpublishTarget(s.mounter, targetPath); err != nil {
		return status.Errorf(codes.Internal, "%v", err)
	}
	klog.FromContext(ctx).V(1).Info("Volume unstaged", "driver", driver, "volume", volumeID, "target", targetPath, "duration", time.Since(start))
	return nil
}

// teardown stops a staging pod, runs the unstaging pod, cleans up the
// staging pod's directory and finally releases the pod. Every step can be
// repeated: the staging pod's finalizer and annotations record progress.
func (s *Stager) teardown(ctx context.Context, driver string, pod *corev1.Pod) error {
	id := pod.Labels[templating.LabelStagingID]
	if pod.DeletionTimestamp == nil {
		if err := s.deletePod(ctx, pod); err != nil {
			return err
		}
	}
	waitCtx, cancel := beforeDeadline(ctx, 2*time.Second)
	defer cancel()
	last, err := s.wait(waitCtx, pod, "", func(p *corev1.Pod) bool { return p == nil || stopped(p) })
	if err != nil {
		return status.Errorf(codes.DeadlineExceeded, "waiting for staging pod %s/%s to stop: %s", pod.Namespace, pod.Name, describePod(last))
	}
	current, err := s.livePod(ctx, pod.Namespace, pod.Name)
	if err != nil {
		return err
	}
	if current != nil {
		pod = current
	}
	if pod.Annotations[templating.AnnotationUnstaged] != "true" {
		if err := s.runUnstaging(ctx, driver, pod, id); err != nil {
			return err
		}
		if current != nil {
			if err := s.patchAnnotations(ctx, pod, map[string]interface{}{templating.AnnotationUnstaged: "true"}); err != nil {
				return err
			}
		}
	}
	if err := s.removeUnstagingPods(ctx, id); err != nil {
		return err
	}
	if dir, err := podHostDir(pod, s.root); err == nil {
		if err := cleanupDir(s.mounter, dir); err != nil {
			return status.Errorf(codes.Internal, "cleaning up the staging pod's /pav: %v", err)
		}
	}
	if current != nil {
		if err := s.removeFinalizer(ctx, pod); err != nil {
			return err
		}
	}
	return nil
}

// runUnstaging runs the provisioner's unstaging pod, if it has one, for a
// stopped staging pod, and waits until it succeeded.
func (s *Stager) runUnstaging(ctx context.Context, driver string, stagingPod *corev1.Pod, id string) error {
	p, err := s.provisioner(driver)
	if err != nil {
		return err
	}
	req, err := s.unstagingRequest(ctx, stagingPod)
	if err != nil {
		return err
	}
	tmpl, err := s.engine.Unstaging(ctx, p, req)
	if err != nil {
		return status.Errorf(codes.FailedPrecondition, "evaluating spec.volumeUnstaging of PavProvisioner %s: %v", p.Name, err)
	}
	if tmpl == nil {
		return nil
	}
	pod, err := s.findPod(ctx, templating.PhaseUnstaging, id)
	if err != nil {
		return err
	}
	if pod != nil && pod.DeletionTimestamp != nil {
		// The remains of a failed attempt: wait until it is gone, then start afresh.
		waitCtx, cancel := beforeDeadline(ctx, 2*time.Second)
		defer cancel()
		if _, err := s.wait(waitCtx, pod, "", func(p *corev1.Pod) bool { return p == nil }); err != nil {
			return status.Errorf(codes.DeadlineExceeded, "waiting for the previous unstaging pod %s/%s to go away", pod.Namespace, pod.Name)
		}
		pod = nil
	}
	if pod == nil {
		name := s.engine.PodName(templating.PhaseUnstaging, id)
		dir := s.engine.NewHostDir(name)
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return status.Errorf(codes.Internal, "creating %s: %v", dir, err)
		}
		built := s.engine.BuildPod(tmpl, PodOptions{
			Provisioner: p.Name,
			Phase:       templating.PhaseUnstaging,
			Name:        name,
			Volume:      req.PV.Name,
			ClaimUID:    string(req.PVC.UID),
			StagingID:   id,
			NodeName:    s.node,
			HostDir:     dir,
			Annotations: map[string]string{
				templating.AnnotationClaim:      stagingPod.Annotations[templating.AnnotationClaim],
				templating.AnnotationTargetPath: stagingPod.Annotations[templating.AnnotationTargetPath],
				templating.AnnotationReadOnly:   strconv.FormatBool(req.ReadOnly),
			},
		})
		pod, err = s.createPod(ctx, built, dir)
		if err != nil {
			return err
		}
	}
	dir, err := podHostDir(pod, s.root)
	if err != nil {
		return status.Errorf(codes.Internal, "unstaging pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	waitCtx, cancel := beforeDeadline(ctx, 2*time.Second)
	defer cancel()
	last, err := s.wait(waitCtx, pod, "", func(p *corev1.Pod) bool { return p == nil || terminated(p) || failedNever(p) })
	if err != nil {
		return status.Errorf(codes.DeadlineExceeded, "unstaging pod %s/%s is not done yet: %s", pod.Namespace, pod.Name, describePod(last))
	}
	if last == nil {
		return status.Errorf(codes.Aborted, "unstaging pod %s/%s was deleted before it completed", pod.Namespace, pod.Name)
	}
	if last.Status.Phase != corev1.PodSucceeded {
		msg := s.failureMessage(ctx, last, dir)
		// Remove the failed pod so that the next call (kubelet retries) runs a new one.
		if err := s.deletePod(ctx, last); err != nil {
			klog.FromContext(ctx).Error(err, "Deleting failed unstaging pod")
		}
		return status.Errorf(codes.Internal, "unstaging pod %s/%s failed: %s", last.Namespace, last.Name, msg)
	}
	return nil
}

// removeUnstagingPods deletes the (terminated) unstaging pods of a staging
// and their directories.
func (s *Stager) removeUnstagingPods(ctx context.Context, id string) error {
	objs, err := s.pods.ByIndex(podsByStaging, string(templating.PhaseUnstaging)+"/"+id)
	if err != nil {
		return err
	}
	for _, obj := range objs {
		pod := obj.(*corev1.Pod)
		if !terminated(pod) && pod.DeletionTimestamp == nil {
			continue // not ours to stop; it was created for a staging we still track
		}
		if err := s.deletePod(ctx, pod); err != nil {
			return err
		}
		if dir, err := podHostDir(pod, s.root); err == nil {
			if err := cleanupDir(s.mounter, dir); err != nil {
				return status.Errorf(codes.Internal, "cleaning up the unstaging pod's /pav: %v", err)
			}
		}
	}
	return nil
}

// createStagingPod evaluates volumeStaging (after static validation for
// statically provisioned PVs) and creates the staging pod, pinned to this
// node. A pod of the same name that already exists is reused.
func (s *Stager) createStagingPod(ctx context.Context, driver, id string, pv *corev1.PersistentVolume, req *pavcsi.PublishRequest) (*corev1.Pod, error) {
	p, err := s.provisioner(driver)
	if err != nil {
		return nil, err
	}
	if pv.Annotations[annotationProvisionedBy] != driver {
		if !p.HasMode(v1alpha1.Static) {
			return nil, status.Errorf(codes.FailedPrecondition,
				"PersistentVolume %s was not provisioned by PavProvisioner %s, which does not support static provisioning (provisioningModes lacks Static)", pv.Name, p.Name)
		}
		if err := s.engine.CheckStatic(ctx, p, pv); err != nil {
			return nil, status.Errorf(codes.FailedPrecondition, "PersistentVolume %s is not valid for PavProvisioner %s: %v", pv.Name, p.Name, err)
		}
	}
	if pv.Spec.ClaimRef == nil {
		return nil, status.Errorf(codes.FailedPrecondition, "PersistentVolume %s is not bound to a claim", pv.Name)
	}
	pvc, err := s.kube.CoreV1().PersistentVolumeClaims(pv.Spec.ClaimRef.Namespace).Get(ctx, pv.Spec.ClaimRef.Name, metav1.GetOptions{})
	if err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "getting claim %s/%s of PersistentVolume %s: %v", pv.Spec.ClaimRef.Namespace, pv.Spec.ClaimRef.Name, pv.Name, err)
	}
	node, err := s.kube.CoreV1().Nodes().Get(ctx, s.node, metav1.GetOptions{})
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "getting node %s: %v", s.node, err)
	}
	tmpl, err := s.engine.Staging(ctx, p, StagingRequest{PVC: pvc, PV: pv, Node: node, ReadOnly: req.ReadOnly})
	if err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "evaluating spec.volumeStaging of PavProvisioner %s: %v", p.Name, err)
	}
	if tmpl == nil {
		return nil, status.Errorf(codes.FailedPrecondition, "PavProvisioner %s has no spec.volumeStaging.podTemplate", p.Name)
	}
	name := s.engine.PodName(templating.PhaseStaging, id)
	dir := s.engine.NewHostDir(name)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, status.Errorf(codes.Internal, "creating %s: %v", dir, err)
	}
	ann := map[string]string{
		templating.AnnotationClaim:      pvc.Namespace + "/" + pvc.Name,
		templating.AnnotationTargetPath: req.TargetPath,
		templating.AnnotationReadOnly:   strconv.FormatBool(req.ReadOnly),
	}
	if b, err := json.Marshal(trimPVC(pvc)); err == nil {
		ann[templating.AnnotationClaimSnapshot] = string(b)
	}
	if b, err := json.Marshal(trimPV(pv)); err == nil {
		ann[templating.AnnotationVolumeSnapshot] = string(b)
	}
	pod := s.engine.BuildPod(tmpl, PodOptions{
		Provisioner: p.Name,
		Phase:       templating.PhaseStaging,
		Name:        name,
		Volume:      pv.Name,
		ClaimUID:    string(pvc.UID),
		StagingID:   id,
		NodeName:    s.node,
		HostDir:     dir,
		Annotations: ann,
	})
	pod.Finalizers = append(pod.Finalizers, templating.FinalizerStaging)
	return s.createPod(ctx, pod, dir)
}

// createPod creates a PaV pod, or finds the one an earlier attempt (maybe by
// a previous incarnation of the node plugin) created; a pod that merely holds
// its name is ignored (templating.CreatePod) and reported in the log and as
// an Event on itself, where its owner looks.
func (s *Stager) createPod(ctx context.Context, pod *corev1.Pod, dir string) (*corev1.Pod, error) {
	got, squatter, err := templating.CreatePod(ctx, s.kube.CoreV1().Pods(pod.Namespace), pod)
	if squatter != nil {
		msg := fmt.Sprintf("pod %s/%s has the name of PaV's %s pod but was not created by PaV: it is ignored", squatter.Namespace, squatter.Name, pod.Labels[templating.LabelPhase])
		klog.FromContext(ctx).Info(msg)
		if s.recorder != nil {
			s.recorder.Event(squatter, corev1.EventTypeWarning, "PodNameTaken", msg)
		}
	}
	if err != nil {
		_ = os.Remove(dir)
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	if used, _ := podHostDir(got, s.root); used != dir {
		_ = os.Remove(dir) // an earlier attempt's pod, with its own /pav
	}
	if got.Spec.NodeName != s.node {
		return nil, status.Errorf(codes.FailedPrecondition, "pod %s/%s exists but runs on node %q", got.Namespace, got.Name, got.Spec.NodeName)
	}
	return got, nil
}

// findPod finds the pod of a phase for a staging ID, first in the cache,
// then (in case the cache lags behind a create) in the API.
func (s *Stager) findPod(ctx context.Context, phase templating.Phase, id string) (*corev1.Pod, error) {
	objs, err := s.pods.ByIndex(podsByStaging, string(phase)+"/"+id)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	var pod *corev1.Pod
	for _, obj := range objs {
		p := obj.(*corev1.Pod)
		if pod == nil || p.CreationTimestamp.After(pod.CreationTimestamp.Time) {
			pod = p
		}
	}
	if pod != nil {
		return pod, nil
	}
	sel := labels.Set{templating.LabelPhase: string(phase), templating.LabelStagingID: id}.AsSelector().String()
	list, err := s.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{
		LabelSelector: sel,
		FieldSelector: "spec.nodeName=" + s.node,
	})
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "listing %s pods: %v", phase, err)
	}
	for i := range list.Items {
		if pod == nil || list.Items[i].CreationTimestamp.After(pod.CreationTimestamp.Time) {
			pod = &list.Items[i]
		}
	}
	return pod, nil
}

// livePod gets a pod from the API; nil if it does not exist.
func (s *Stager) livePod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	pod, err := s.kube.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "getting pod %s/%s: %v", namespace, name, err)
	}
	return pod, nil
}

// findPV finds the PV kubelet means: CSI requests carry the volume handle,
// not the PV name. Several static PVs may share a handle; then the client
// pod's claims decide.
func (s *Stager) findPV(ctx context.Context, driver, handle string, vctx map[string]string) (*corev1.PersistentVolume, error) {
	objs, err := s.pvs.ByIndex(pvsByHandle, driver+"/"+handle)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	switch len(objs) {
	case 0:
		return nil, status.Errorf(codes.NotFound, "no PersistentVolume with spec.csi.driver %q and volumeHandle %q", driver, handle)
	case 1:
		return objs[0].(*corev1.PersistentVolume), nil
	}
	ns, name := vctx[pavcsi.ContextPodNamespace], vctx[pavcsi.ContextPodName]
	if name == "" {
		return nil, status.Errorf(codes.FailedPrecondition, "%d PersistentVolumes have volumeHandle %q and the request names no pod", len(objs), handle)
	}
	pod, err := s.kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "getting client pod %s/%s: %v", ns, name, err)
	}
	claims := map[string]bool{}
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			claims[v.PersistentVolumeClaim.ClaimName] = true
		}
	}
	var match *corev1.PersistentVolume
	for _, obj := range objs {
		pv := obj.(*corev1.PersistentVolume)
		if ref := pv.Spec.ClaimRef; ref != nil && ref.Namespace == ns && claims[ref.Name] {
			if match != nil {
				return nil, status.Errorf(codes.FailedPrecondition, "pod %s/%s uses several PersistentVolumes with volumeHandle %q", ns, name, handle)
			}
			match = pv
		}
	}
	if match == nil {
		return nil, status.Errorf(codes.NotFound, "none of the PersistentVolumes with volumeHandle %q is bound to a claim of pod %s/%s", handle, ns, name)
	}
	return match, nil
}

func (s *Stager) provisioner(name string) (*v1alpha1.PavProvisioner, error) {
	obj, exists, err := s.provisioners.GetByKey(name)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	if !exists {
		return nil, status.Errorf(codes.FailedPrecondition, "PavProvisioner %s does not exist", name)
	}
	return obj.(*v1alpha1.PavProvisioner), nil
}

// unstagingRequest rebuilds the staging context for unstaging: live objects
// where they still exist, else the snapshots on the staging pod.
func (s *Stager) unstagingRequest(ctx context.Context, stagingPod *corev1.Pod) (StagingRequest, error) {
	ann := stagingPod.Annotations
	req := StagingRequest{ReadOnly: ann[templating.AnnotationReadOnly] == "true"}

	snapPVC := &corev1.PersistentVolumeClaim{}
	if err := json.Unmarshal([]byte(ann[templating.AnnotationClaimSnapshot]), snapPVC); err != nil {
		snapPVC = nil
	}
	if ns, name, ok := strings.Cut(ann[templating.AnnotationClaim], "/"); ok {
		pvc, err := s.kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case err == nil && (snapPVC == nil || pvc.UID == snapPVC.UID):
			req.PVC = pvc
		case err != nil && !apierrors.IsNotFound(err):
			return req, status.Errorf(codes.Unavailable, "getting claim %s/%s: %v", ns, name, err)
		}
		if req.PVC == nil && snapPVC == nil {
			snapPVC = &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		}
	}
	if req.PVC == nil {
		if snapPVC == nil {
			return req, status.Errorf(codes.FailedPrecondition, "staging pod %s/%s does not say which claim it staged", stagingPod.Namespace, stagingPod.Name)
		}
		klog.FromContext(ctx).Info("Claim is gone; unstaging with the copy taken at staging time", "claim", klog.KObj(snapPVC))
		req.PVC = snapPVC
	}

	snapPV := &corev1.PersistentVolume{}
	if err := json.Unmarshal([]byte(ann[templating.AnnotationVolumeSnapshot]), snapPV); err != nil || snapPV.Name == "" {
		return req, status.Errorf(codes.FailedPrecondition, "staging pod %s/%s has no PersistentVolume snapshot", stagingPod.Namespace, stagingPod.Name)
	}
	pv, err := s.kube.CoreV1().PersistentVolumes().Get(ctx, snapPV.Name, metav1.GetOptions{})
	switch {
	case err == nil && pv.UID == snapPV.UID:
		req.PV = pv
	case err != nil && !apierrors.IsNotFound(err):
		return req, status.Errorf(codes.Unavailable, "getting PersistentVolume %s: %v", snapPV.Name, err)
	default:
		klog.FromContext(ctx).Info("PersistentVolume is gone; unstaging with the copy taken at staging time", "pv", snapPV.Name)
		req.PV = snapPV
	}

	node, err := s.kube.CoreV1().Nodes().Get(ctx, s.node, metav1.GetOptions{})
	if err != nil {
		return req, status.Errorf(codes.Unavailable, "getting node %s: %v", s.node, err)
	}
	req.Node = node
	return req, nil
}

func trimPVC(pvc *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
	c := pvc.DeepCopy()
	c.ManagedFields = nil
	delete(c.Annotations, "kubectl.kubernetes.io/last-applied-configuration")
	return c
}

func trimPV(pv *corev1.PersistentVolume) *corev1.PersistentVolume {
	c := pv.DeepCopy()
	c.ManagedFields = nil
	for _, k := range []string{templating.AnnotationClaimSnapshot, templating.AnnotationClassSnapshot, "kubectl.kubernetes.io/last-applied-configuration"} {
		delete(c.Annotations, k)
	}
	return c
}

// wait waits until done(pod) holds, re-checking on every informer event for
// the pod and, if dir is set, every change in that directory (for
// /pav/ready). done gets nil once the pod is gone. It returns the last state
// seen (nil if gone). Until the cache has seen the pod (just created), the
// given object stands in for it.
func (s *Stager) wait(ctx context.Context, pod *corev1.Pod, dir string, done func(*corev1.Pod) bool) (*corev1.Pod, error) {
	events, unsubscribe := s.events.subscribe(pod.Namespace, pod.Name)
	defer unsubscribe()
	var fsEvents chan fsnotify.Event
	var fsErrors chan error
	if dir != "" {
		w, err := fsnotify.NewWatcher()
		if err == nil {
			defer w.Close()
			if err := w.Add(dir); err != nil {
				klog.FromContext(ctx).Error(err, "Watching the pod's /pav; relying on pod events only", "dir", dir)
			} else {
				fsEvents, fsErrors = w.Events, w.Errors
			}
		}
	}
	last := pod
	seen := false
	for {
		cached, err := s.podLister.Pods(pod.Namespace).Get(pod.Name)
		switch {
		case err == nil && cached.UID == pod.UID:
			seen, last = true, cached
		case err == nil: // a new pod of the same name: ours is gone
			last = nil
		case apierrors.IsNotFound(err) && seen:
			last = nil
		}
		if done(last) {
			return last, nil
		}
		if last == nil {
			return nil, nil
		}
		select {
		case <-events:
		case <-fsEvents:
		case err := <-fsErrors:
			klog.FromContext(ctx).Error(err, "Watching the pod's /pav", "dir", dir)
		case <-ctx.Done():
			return last, ctx.Err()
		}
	}
}

type stagingState int

const (
	stagingPending stagingState = iota
	stagingReady
	stagingFailed
	stagingGone
)

// stagingStateOf: a staging pod is done when it succeeded, or while it runs
// once it created /pav/ready; it failed when it failed, or when a container
// failed that will not be restarted.
func stagingStateOf(pod *corev1.Pod, dir string) stagingState {
	switch {
	case pod == nil:
		return stagingGone
	case pod.DeletionTimestamp != nil:
		return stagingGone
	case pod.Status.Phase == corev1.PodFailed || failedNever(pod):
		return stagingFailed
	case pod.Status.Phase == corev1.PodSucceeded:
		return stagingReady
	}
	if _, err := os.Lstat(filepath.Join(dir, templating.FileReady)); err == nil {
		return stagingReady
	}
	return stagingPending
}

// failedNever: a container exited with an error and will not be restarted.
func failedNever(pod *corev1.Pod) bool {
	if pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
		return false
	}
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range list {
			if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
				return true
			}
		}
	}
	return false
}

// stopped: no container of the pod runs any more.
func stopped(pod *corev1.Pod) bool {
	if terminated(pod) {
		return true
	}
	if pod.Status.Phase != corev1.PodRunning && pod.Status.Phase != corev1.PodPending {
		return false
	}
	n := 0
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range list {
			if cs.State.Running != nil {
				return false
			}
			if cs.State.Terminated != nil {
				n++
			}
		}
	}
	return n > 0 && n == len(pod.Status.ContainerStatuses)+len(pod.Status.InitContainerStatuses)
}

// describePod summarises why a pod is not done, for messages kubelet shows.
func describePod(pod *corev1.Pod) string {
	if pod == nil {
		return "the pod is gone"
	}
	parts := []string{"phase " + string(pod.Status.Phase)}
	if pod.Status.Phase == "" {
		parts = []string{"not yet started"}
	}
	if pod.Status.Reason != "" || pod.Status.Message != "" {
		parts = append(parts, strings.TrimSpace(pod.Status.Reason+" "+pod.Status.Message))
	}
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range list {
			switch {
			case cs.State.Waiting != nil && cs.State.Waiting.Reason != "":
				parts = append(parts, fmt.Sprintf("container %s waiting: %s %s", cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message))
			case cs.State.Running != nil:
				parts = append(parts, fmt.Sprintf("container %s running", cs.Name))
			case cs.State.Terminated != nil:
				parts = append(parts, fmt.Sprintf("container %s exited with code %d", cs.Name, cs.State.Terminated.ExitCode))
			}
			if t := cs.LastTerminationState.Terminated; t != nil && t.ExitCode != 0 {
				parts = append(parts, fmt.Sprintf("container %s last exited with code %d %s", cs.Name, t.ExitCode, strings.TrimSpace(t.Message)))
			}
		}
	}
	return strings.TrimSpace(strings.Join(parts, "; "))
}

// failureMessage explains a failed pod in its own words: /pav/error if it
// wrote one, else the failed container's exit code and termination message
// (BuildPod sets FallbackToLogsOnError), else the tail of its log.
func (s *Stager) failureMessage(ctx context.Context, pod *corev1.Pod, dir string) string {
	if dir != "" {
		if msg, _, err := readResultFile(dir, templating.FileError, maxErrorBytes); err == nil && msg != "" {
			return msg
		}
	}
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range list {
			t := cs.State.Terminated
			if t == nil {
				t = cs.LastTerminationState.Terminated
			}
			if t == nil || t.ExitCode == 0 {
				continue
			}
			head := fmt.Sprintf("container %q exited with code %d", cs.Name, t.ExitCode)
			if t.Reason != "" && t.Reason != "Error" {
				head += " (" + t.Reason + ")"
			}
			if msg := strings.TrimSpace(t.Message); msg != "" {
				return head + ": " + msg
			}
			if tail := s.logTail(ctx, pod, cs.Name); tail != "" {
				return head + "; last lines of its log:\n" + tail
			}
			return head
		}
	}
	if pod.Status.Reason != "" || pod.Status.Message != "" {
		return strings.TrimSpace(pod.Status.Reason + ": " + pod.Status.Message)
	}
	return "the pod failed without saying why"
}

func (s *Stager) logTail(ctx context.Context, pod *corev1.Pod, container string) string {
	lines, limit := int64(logTailLines), int64(4096)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rc, err := s.kube.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{
		Container: container, TailLines: &lines, LimitBytes: &limit,
	}).Stream(ctx)
	if err != nil {
		return ""
	}
	defer rc.Close()
	b, _ := io.ReadAll(rc)
	return strings.TrimRight(string(b), "\n")
}

// deletePod deletes a pod (at once if it already terminated).
func (s *Stager) deletePod(ctx context.Context, pod *corev1.Pod) error {
	opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}}
	if terminated(pod) {
		zero := int64(0)
		opts.GracePeriodSeconds = &zero
	}
	err := s.kube.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, opts)
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return status.Errorf(codes.Unavailable, "deleting pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	return nil
}

func (s *Stager) patchAnnotations(ctx context.Context, pod *corev1.Pod, ann map[string]interface{}) error {
	patch, _ := json.Marshal(map[string]interface{}{"metadata": map[string]interface{}{"annotations": ann}})
	_, err := s.kube.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return status.Errorf(codes.Unavailable, "annotating pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	return nil
}

// removeFinalizer releases the staging pod, which then disappears. A JSON
// patch that tests the finalizer's position leaves other finalizers alone.
func (s *Stager) removeFinalizer(ctx context.Context, pod *corev1.Pod) error {
	for attempt := 0; ; attempt++ {
		live, err := s.livePod(ctx, pod.Namespace, pod.Name)
		if err != nil || live == nil || live.UID != pod.UID {
			return err
		}
		i := -1
		for j, f := range live.Finalizers {
			if f == templating.FinalizerStaging {
				i = j
			}
		}
		if i < 0 {
			return nil
		}
		path := fmt.Sprintf("/metadata/finalizers/%d", i)
		patch, _ := json.Marshal([]map[string]interface{}{
			{"op": "test", "path": path, "value": templating.FinalizerStaging},
			{"op": "remove", "path": path},
		})
		_, err = s.kube.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.JSONPatchType, patch, metav1.PatchOptions{})
		if err == nil || apierrors.IsNotFound(err) {
			return nil
		}
		if attempt >= 3 {
			return status.Errorf(codes.Unavailable, "removing the finalizer of pod %s/%s: %v", pod.Namespace, pod.Name, err)
		}
	}
}

// beforeDeadline returns a context that ends margin before ctx's deadline,
// so that a wait that runs out still leaves time to answer kubelet with a
// useful message instead of a bare DeadlineExceeded.
func beforeDeadline(ctx context.Context, margin time.Duration) (context.Context, context.CancelFunc) {
	d, ok := ctx.Deadline()
	if !ok || time.Until(d) < 2*margin {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, d.Add(-margin))
}
