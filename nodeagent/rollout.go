// Rolling out a changed spec.volumeStaging: replacing outdated staging pods
// under running clients, make-before-break.

package nodeagent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	mount "k8s.io/mount-utils"

	"github.com/albertofaria/pav/crds/v1alpha1"
	pavcsi "github.com/albertofaria/pav/csi"
	"github.com/albertofaria/pav/kubelet"
	"github.com/albertofaria/pav/nodeagent/mounts"
	"github.com/albertofaria/pav/nodeagent/nodepods"
	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/templating"
)

// ReasonStagingReplaced is the Event on client pods whose staging was
// replaced by one from the provisioner's current spec.volumeStaging.
const ReasonStagingReplaced = "StagingReplaced"

// rollingUpdate: p replaces outdated staging pods (updateStrategy).
func rollingUpdate(p *v1alpha1.PavProvisioner) bool {
	return p.Spec.VolumeStaging != nil && p.Spec.VolumeStaging.UpdateStrategy == v1alpha1.UpdateRollingUpdate
}

// outdated: the staging pod was made from another spec.volumeStaging than p's.
func outdated(pod *corev1.Pod, p *v1alpha1.PavProvisioner) bool {
	return pod.Annotations[protocol.AnnotationStagingRevision] != templating.StagingRevision(p)
}

// checkRollout queues this node's outdated staging pods of p, if p rolls
// its changes out; the recovery worker replaces them one at a time.
func (s *Stager) checkRollout(p *v1alpha1.PavProvisioner) {
	if s.recoveries == nil || !rollingUpdate(p) {
		return
	}
	for _, obj := range s.pods.List() {
		pod, ok := obj.(*corev1.Pod)
		if ok && pod.Labels[protocol.LabelPhase] == string(protocol.PhaseStaging) && pod.DeletionTimestamp == nil &&
			pod.Labels[protocol.LabelProvisioner] == protocol.LabelValue(p.Name) && outdated(pod, p) {
			s.recoveries.Add(pod.Labels[protocol.LabelStagingID])
		}
	}
}

// olderStagings are the staging pods of id other than newest: a replaced
// one whose teardown a node plugin restart interrupted.
func (s *Stager) olderStagings(id string, newest *corev1.Pod) []*corev1.Pod {
	pods, _ := s.nodePods.Cached(protocol.PhaseStaging, id)
	var out []*corev1.Pod
	for _, pod := range pods {
		if pod.UID != newest.UID {
			out = append(out, pod)
		}
	}
	return out
}

// startReplacement runs a new staging pod of id from the provisioner's
// current spec.volumeStaging and opens the volume it serves, once checked.
// A new staging pod that failed is stopped.
func (s *Stager) startReplacement(ctx context.Context, driver, id string, pv *corev1.PersistentVolume, req *pavcsi.PublishRequest, shared bool) (*corev1.Pod, *os.File, error) {
	p, err := s.provisioner(driver)
	if err != nil {
		return nil, nil, err
	}
	opts := publishOptions{shared: shared}
	pod, err := s.createStagingPod(ctx, driver, id, pv, req, opts.annotations(), "-"+templating.StagingRevision(p)[:10])
	if err != nil {
		return nil, nil, err
	}
	dir, err := protocol.PodHostDir(pod, s.root)
	if err != nil {
		return nil, nil, err
	}
	pod, state, err := s.awaitStaging(ctx, pod, dir)
	switch {
	case err != nil:
		return nil, nil, fmt.Errorf("the new staging pod %s/%s is not serving yet: %s", pod.Namespace, pod.Name, nodepods.Describe(pod))
	case state != stagingReady:
		msg := fmt.Sprintf("the new staging pod %s/%s failed: %s", pod.Namespace, pod.Name, s.failureMessage(ctx, pod, dir))
		if err := s.teardown(ctx, driver, pod); err != nil {
			msg += fmt.Sprintf("; stopping it did not complete yet: %v", err)
		}
		return nil, nil, status.Error(codes.Internal, msg)
	}
	if _, err := s.succeeded(ctx, pod); err != nil {
		return nil, nil, err
	}
	src, err := openStagedVolume(pod, dir, pv, false)
	if err != nil {
		return nil, nil, fmt.Errorf("the new %w", err)
	}
	return pod, src, nil
}

// swapClients replaces the volume oldMount by src under its clients: the
// node's mounts in client pods' directories, then the clients' containers.
// It returns the clients and the mount points replaced.
func (s *Stager) swapClients(ctx context.Context, infos []mount.MountInfo, oldMount mounts.VolumeMount, src *os.File, bind mounts.BindOptions) ([]types.UID, []string, error) {
	var uids []types.UID
	for _, m := range mounts.StaleMounts(infos, []mounts.VolumeMount{oldMount}) {
		if uid, ok := kubelet.PodUIDInPath(m.MountPoint); ok {
			uids = append(uids, uid)
		}
	}
	replaced, err := s.own.Swap(ctx, []mounts.VolumeMount{oldMount}, src, bind, isClients)
	if err != nil {
		return uids, replaced, fmt.Errorf("swapping the volume on the node: %w", err)
	}
	rec := &recoveryRecord{Replaces: []string{oldMount.String()}, FSType: oldMount.FSType, Clients: uids}
	done, err := s.replaceInContainers(ctx, rec, src, bind)
	replaced = append(replaced, done...)
	if err != nil {
		return uids, replaced, fmt.Errorf("swapping the volume in the clients' containers: %w", err)
	}
	return uids, replaced, nil
}

// finishSwaps completes a replacement that a node plugin restart
// interrupted between the new staging pod (pod, ready) and the swap:
// clients that still show the volume of an older staging of id are moved
// to pod's before the older one is torn down (make-before-break).
// A recovery's new pod carries its record, which drives its swap; a block
// volume is never replaced by a rollout.
func (s *Stager) finishSwaps(ctx context.Context, driver, id string, pod *corev1.Pod) error {
	olders := s.olderStagings(id, pod)
	if _, recovering := pod.Annotations[protocol.AnnotationRecovering]; len(olders) == 0 || recovering {
		return nil
	}
	req, err := s.republishRequest(pod)
	if err != nil || req.Block {
		return err
	}
	infos, err := s.own.Table()
	if err != nil {
		return err
	}
	var stale []mounts.VolumeMount
	for _, older := range olders {
		dir, err := protocol.PodHostDir(older, s.root)
		if err != nil {
			continue
		}
		v, ok := mounts.VolumeMountAt(infos, filepath.Join(dir, protocol.FileVolume))
		if !ok {
			continue
		}
		for _, m := range mounts.StaleMounts(infos, []mounts.VolumeMount{v}) {
			if isClients(m.MountPoint) {
				stale = append(stale, v)
				break
			}
		}
	}
	if len(stale) == 0 {
		return nil
	}
	pv, err := s.findPV(ctx, driver, req.VolumeID, req.VolumeContext)
	if err != nil {
		return err
	}
	dir, err := protocol.PodHostDir(pod, s.root)
	if err != nil {
		return err
	}
	src, err := openStagedVolume(pod, dir, pv, false)
	if err != nil {
		return err
	}
	defer src.Close()
	for _, v := range stale {
		_, replaced, err := s.swapClients(ctx, infos, v, src, s.bindOptions(driver, false, req.ReadOnly))
		if err != nil {
			return err
		}
		klog.FromContext(ctx).Info("Interrupted replacement finished", "staging", klog.KObj(pod), "mounts", replaced)
	}
	return nil
}

// isClients: mountPoint is in a client pod's directory (not, say, the dead
// mount left in an old staging pod's directory).
func isClients(mountPoint string) bool {
	_, ok := kubelet.PodUIDInPath(mountPoint)
	return ok
}

// isMountPoint: something is mounted at path.
func isMountPoint(infos []mount.MountInfo, path string) bool {
	for _, m := range infos {
		if mounts.UnescapeMountInfo(m.MountPoint) == path {
			return true
		}
	}
	return false
}

// replace replaces an outdated staging pod that still serves: a new staging
// pod from the current spec.volumeStaging runs beside it; once it serves,
// the volume is swapped under every client (on the node and in their
// containers, each mount replaced in one step: the clients see the old
// volume or the new one, never none); then the old staging stops and its
// unstaging pod runs. A block volume is not replaced: make-before-break
// would give its backend two devices of one volume at once, and the old
// staging's unstaging pod, run last, may take both down (loop-block's
// detaches every loop device of its file).
func (s *Stager) replace(ctx context.Context, driver string, old *corev1.Pod) error {
	id := old.Labels[protocol.LabelStagingID]
	req, err := s.republishRequest(old)
	if err != nil || req.Block {
		return err
	}
	shared := old.Annotations[protocol.AnnotationShared] == "true"
	oldDir, err := protocol.PodHostDir(old, s.root)
	if err != nil {
		return err
	}
	seen := req.TargetPath
	if shared {
		seen = filepath.Join(oldDir, protocol.FileVolume)
	}
	infos, err := s.own.Table()
	if err != nil {
		return err
	}
	oldMount, ok := mounts.VolumeMountAt(infos, seen)
	if !ok || (!shared && !isMountPoint(infos, seen)) {
		return nil // unpublished meanwhile
	}
	start := time.Now()
	pv, err := s.findPV(ctx, driver, req.VolumeID, req.VolumeContext)
	if err != nil {
		return err
	}
	pod, src, err := s.startReplacement(ctx, driver, id, pv, req, shared)
	if err != nil {
		return err
	}
	defer src.Close()

	uids, replaced, err := s.swapClients(ctx, infos, oldMount, src, s.bindOptions(driver, false, req.ReadOnly))
	if err != nil {
		return err
	}
	if err := s.teardown(ctx, driver, old); err != nil {
		return err
	}
	clients, err := s.podsOnThisNode(ctx, uids)
	if err == nil {
		s.eventOn(clients, corev1.EventTypeNormal, ReasonStagingReplaced,
			"staging pod %s/%s replaced %s/%s (a new spec.volumeStaging) under the running containers in %v (%d mounts swapped)",
			pod.Namespace, pod.Name, old.Namespace, old.Name, time.Since(start).Round(10*time.Millisecond), len(replaced))
	}
	klog.FromContext(ctx).Info("Outdated staging replaced", "old", klog.KObj(old), "new", klog.KObj(pod), "mounts", replaced, "took", time.Since(start))
	return nil
}

// ownMounts is the node plugin's own mount namespace (kubelet's directory
// in it is shared with the host), as a rollout reads and changes it. Tests
// put a fake in its place: they must make no real mounts.
type ownMounts interface {
	// Table is the namespace's mount table.
	Table() ([]mount.MountInfo, error)
	// Swap replaces the mounts that show one of old (and that keep keeps)
	// by src, and returns the mount points replaced.
	Swap(ctx context.Context, old []mounts.VolumeMount, src *os.File, opts mounts.BindOptions, keep func(mountPoint string) bool) ([]string, error)
}

// hostMounts is the real ownMounts.
type hostMounts struct{ mounter mount.Interface }

func (hostMounts) Table() ([]mount.MountInfo, error) {
	return mount.ParseMountInfo("/proc/self/mountinfo")
}

// Swap replaces each mount in one step; if that fails, it unmounts and
// binds instead: containers with HostToContainer propagation see the
// volume go for a moment.
func (h hostMounts) Swap(ctx context.Context, old []mounts.VolumeMount, src *os.File, opts mounts.BindOptions, keep func(string) bool) ([]string, error) {
	self, err := mounts.OpenProcess(os.Getpid())
	if err != nil {
		return nil, err
	}
	replaced, err := mounts.ReplaceInNamespace(self, old, src, opts, keep)
	self.Close()
	if err == nil {
		return replaced, nil
	}
	klog.FromContext(ctx).Info("Swapping the volume on the node in one step failed; rebinding", "err", err)
	done, err := mounts.RebindOnNode(h.mounter, old, src, opts, keep)
	return append(replaced, done...), err
}
