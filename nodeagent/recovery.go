// Recovery: staging again a volume whose staging stopped serving clients
// that still use it, and replacing it in those clients' running containers.

package nodeagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	mount "k8s.io/mount-utils"

	"github.com/albertofaria/pav/crds/v1alpha1"
	pavcsi "github.com/albertofaria/pav/csi"
	"github.com/albertofaria/pav/kubelet"
	"github.com/albertofaria/pav/nodeagent/mounts"
	"github.com/albertofaria/pav/nodeagent/nodepods"
	"github.com/albertofaria/pav/nodeagent/volstats"
	"github.com/albertofaria/pav/protocol"
)

// Reasons of the Events recovery puts on client pods.
const (
	ReasonVolumeLost           = "VolumeLost"
	ReasonVolumeRecovered      = "VolumeRecovered"
	ReasonVolumeRecoveryFailed = "VolumeRecoveryFailed"
	// ReasonVolumeNotReplaced: a client container keeps the old volume
	// (mounts.ErrOwnNamespace); recovery and rollout go on without it.
	ReasonVolumeNotReplaced = "VolumeNotReplaced"
	// ReasonVolumeNotRecovered: a block volume is not recovered under
	// running clients (keepForBlockClients).
	ReasonVolumeNotRecovered = "VolumeNotRecovered"
)

// recoveryTimeout bounds one attempt to recover a staging.
const recoveryTimeout = 2 * time.Minute

// ContainerProcesses finds the processes of a pod's running containers
// (containerd.Processes).
type ContainerProcesses interface {
	PodPIDs(ctx context.Context, uid types.UID) ([]int, error)
}

// recoveryRecord is what a restaging staging pod records
// (protocol.AnnotationRecovering): the mounts of the volume it replaces, to
// be found on the node and in the client containers, the client pods that
// used it, and when the volume was found lost.
type recoveryRecord struct {
	Replaces []string `json:"replaces"` // mounts.VolumeMount.String()
	// FSType is the replaced mounts' file system type (mountinfo's): with
	// the device number it names them (mounts.VolumeMount).
	FSType  string      `json:"fsType,omitempty"`
	Clients []types.UID `json:"clients"`
	Since   time.Time   `json:"since"`
	// Device is a block volume's device number, which the clients'
	// containers see as device nodes.
	Device uint64 `json:"device,omitempty"`
}

func (r *recoveryRecord) annotations() map[string]string {
	if r == nil {
		return nil
	}
	b, _ := json.Marshal(r)
	return map[string]string{protocol.AnnotationRecovering: string(b)}
}

func (s *Stager) recordRecovery(ctx context.Context, pod *corev1.Pod, rec *recoveryRecord) error {
	return s.patchAnnotations(ctx, pod, map[string]interface{}{protocol.AnnotationRecovering: rec.annotations()[protocol.AnnotationRecovering]})
}

func recoveryOf(pod *corev1.Pod) (*recoveryRecord, error) {
	raw, ok := pod.Annotations[protocol.AnnotationRecovering]
	if !ok {
		return nil, nil
	}
	var r recoveryRecord
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return nil, fmt.Errorf("annotation %s of staging pod %s/%s: %w", protocol.AnnotationRecovering, pod.Namespace, pod.Name, err)
	}
	return &r, nil
}

// showsAt says whether the mount at target (in the node plugin's mount
// table) is one the recovery replaces.
func (r *recoveryRecord) showsAt(target string) bool {
	if r == nil {
		return false
	}
	top, err := mounts.MountAt("self", target)
	if err != nil {
		return false
	}
	now := mounts.VolumeMount{Major: top.Major, Minor: top.Minor, Root: mounts.MountRoot(*top)}.String()
	for _, old := range r.Replaces {
		if old == now {
			return true
		}
	}
	return false
}

func (r *recoveryRecord) mounts() ([]mounts.VolumeMount, error) {
	var out []mounts.VolumeMount
	for _, s := range r.Replaces {
		m, err := mounts.ParseVolumeMount(s)
		if err != nil {
			return nil, err
		}
		m.FSType = r.FSType
		out = append(out, m)
	}
	return out, nil
}

// recoveryQueue holds the staging IDs to look at, each retried with
// exponential backoff (1 s to 2 min) while its recovery fails.
func newRecoveryQueue() workqueue.TypedRateLimitingInterface[string] {
	return workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, 2*time.Minute),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "pav-recovery"})
}

// checkStagingPod queues the staging of a staging pod that may need
// recovery: a long-running one that stopped, or one that records a
// recovery not finished. Called for every change of PaV's pods on this node
// and every container exit the runtime reports.
func (s *Stager) checkStagingPod(pod *corev1.Pod) {
	if pod.Labels[protocol.LabelPhase] != string(protocol.PhaseStaging) || s.recoveries == nil {
		return
	}
	id := pod.Labels[protocol.LabelStagingID]
	if _, recovering := pod.Annotations[protocol.AnnotationRecovering]; recovering {
		s.recoveries.Add(id)
		return
	}
	if longRunning(pod, s.root) && servingStopped(pod, s.exits) {
		s.recoveries.Add(id)
		return
	}
	if p, err := s.provisioner(pod.Labels[protocol.LabelProvisioner]); err == nil && pod.DeletionTimestamp == nil && rollingUpdate(p) && outdated(pod, p) {
		s.recoveries.Add(id)
	}
}

// longRunning: the staging pod signalled /pav/ready, so its volume needs it
// running.
func longRunning(pod *corev1.Pod, root string) bool {
	dir, err := protocol.PodHostDir(pod, root)
	if err != nil {
		return false
	}
	_, err = os.Lstat(filepath.Join(dir, protocol.FileReady))
	return err == nil
}

// servingStopped: a container of the pod has stopped (or the pod is going),
// as kubelet or the runtime tells.
func servingStopped(pod *corev1.Pod, exits *Exits) bool {
	if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return true
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Terminated != nil {
			return true
		}
	}
	return exits.anyExited(pod)
}

// RunRecovery recovers queued stagings, one at a time, until ctx ends.
func (s *Stager) RunRecovery(ctx context.Context) {
	if s.recoveries == nil {
		return
	}
	go func() {
		<-ctx.Done()
		s.recoveries.ShutDown()
	}()
	for {
		id, quit := s.recoveries.Get()
		if quit {
			return
		}
		klog.FromContext(ctx).V(2).Info("Checking whether a staging needs recovery", "stagingID", id)
		// Bounded, as kubelet bounds a publish: a step that hangs (a staging
		// pod that never gets ready) is retried with backoff.
		attemptCtx, cancel := context.WithTimeout(ctx, recoveryTimeout)
		err := s.recover(attemptCtx, id)
		cancel()
		if err != nil {
			klog.FromContext(ctx).Info("Recovering a volume failed; retrying", "stagingID", id, "err", err)
			s.recoveries.AddRateLimited(id)
		} else {
			s.recoveries.Forget(id)
		}
		s.recoveries.Done(id)
	}
}

// recover restages the volume of staging id if its staging stopped serving
// clients that still use it, then replaces the volume wherever the clients
// see it: kubelet's directories of each client pod on the node and the
// running containers. Each step can be repeated: the new staging pod records
// what it replaces until the clients have it.
func (s *Stager) recover(ctx context.Context, id string) error {
	defer s.locks.lock(id)()
	pod, err := s.nodePods.Find(ctx, protocol.PhaseStaging, id)
	if err != nil || pod == nil {
		return err
	}
	driver := pod.Labels[protocol.LabelProvisioner]
	if dir, err := protocol.PodHostDir(pod, s.root); err == nil && stagingStateOf(pod, dir, s.exits) == stagingReady {
		if err := s.finishReplacement(ctx, driver, id, pod); err != nil {
			return err
		}
	}
	p, err := s.provisioner(driver)
	if err != nil {
		return err
	}
	recorded, finished, err := s.recordedRecovery(ctx, pod)
	if err != nil || finished {
		return err
	}
	req, err := s.republishRequest(pod)
	if err != nil {
		return err
	}
	opts := publishOptions{rec: recorded, shared: pod.Annotations[protocol.AnnotationShared] == "true"}
	if recorded == nil {
		recoveryOff := p.Spec.VolumeStaging != nil && p.Spec.VolumeStaging.Recovery == v1alpha1.RecoveryNone
		if !recoveryOff {
			if opts.rec, err = s.lost(ctx, pod, s.seenAt(pod, req, opts.shared), req.Block); err != nil {
				return err
			}
		}
		if opts.rec == nil {
			if rollingUpdate(p) && outdated(pod, p) && !servingStopped(pod, s.exits) {
				return s.replace(ctx, driver, pod)
			}
			return nil
		}
		if req.Block && s.deviceCgroupV2() {
			s.keepForBlockClients(ctx, pod, req, opts.rec)
			return nil
		}
	}
	return s.restageAndReplace(ctx, driver, id, pod, req, opts, recorded != nil)
}

// recordedRecovery is the recovery a staging pod records, if it is still
// under way (finished: the live pod no longer records it, the cache lags).
func (s *Stager) recordedRecovery(ctx context.Context, pod *corev1.Pod) (rec *recoveryRecord, finished bool, err error) {
	if rec, err = recoveryOf(pod); err != nil || rec == nil {
		return nil, false, err
	}
	live, err := s.nodePods.Live(ctx, pod.Namespace, pod.Name)
	if err != nil || live == nil || live.UID != pod.UID {
		return nil, true, err
	}
	if _, recovering := live.Annotations[protocol.AnnotationRecovering]; !recovering {
		return nil, true, nil
	}
	return rec, false, nil
}

// seenAt is where the node sees a staging's volume: a client's own staging
// publishes it at its target; a shared one serves it from its /pav/volume.
func (s *Stager) seenAt(pod *corev1.Pod, req *pavcsi.PublishRequest, shared bool) string {
	if !shared {
		return req.TargetPath
	}
	dir, err := protocol.PodHostDir(pod, s.root)
	if err != nil {
		return "" // nothing is seen there: nothing to recover
	}
	return filepath.Join(dir, protocol.FileVolume)
}

// finishReplacement completes a replacement by pod (ready) that a node
// plugin restart interrupted: clients still on an older staging of id are
// moved to pod's volume (finishSwaps), then the older ones torn down.
func (s *Stager) finishReplacement(ctx context.Context, driver, id string, pod *corev1.Pod) error {
	if err := s.finishSwaps(ctx, driver, id, pod); err != nil {
		return err
	}
	return s.tearDownOlder(ctx, driver, id, pod)
}

// tearDownOlder tears down the staging pods of id other than pod.
func (s *Stager) tearDownOlder(ctx context.Context, driver, id string, pod *corev1.Pod) error {
	for _, older := range s.olderStagings(id, pod) {
		if err := s.teardown(ctx, driver, older); err != nil {
			return err
		}
	}
	return nil
}

// restageAndReplace carries out the recovery opts.rec records (resumed: it
// was recorded by an earlier attempt): the old staging stopped and a new one
// started if not done yet, the new one waited for, and the volume replaced
// where the clients see it.
func (s *Stager) restageAndReplace(ctx context.Context, driver, id string, pod *corev1.Pod, req *pavcsi.PublishRequest, opts publishOptions, resumed bool) error {
	clients, err := s.podsOnThisNode(ctx, opts.rec.Clients)
	if err != nil {
		return err
	}
	failed := func(what string, err error) error {
		s.eventOn(clients, corev1.EventTypeWarning, ReasonVolumeRecoveryFailed, "%s failed (retried with backoff): %v", what, err)
		return err
	}
	stopped := servingStopped(pod, s.exits)
	if resumed && stopped && len(clients) == 0 {
		// The clients went while no node plugin ran: nothing to recover.
		return s.teardown(ctx, driver, pod)
	}
	if !resumed {
		s.eventOn(clients, corev1.EventTypeWarning, ReasonVolumeLost, "volume %s stopped working (staging pod %s/%s: %s); staging it again",
			req.VolumeID, pod.Namespace, pod.Name, nodepods.Describe(s.exits.withReportedExits(pod)))
		// Recorded on the old pod first: a node plugin restarted from here
		// on finds the recovery there.
		if err := s.recordRecovery(ctx, pod, opts.rec); err != nil {
			return err
		}
	}
	if !resumed || stopped {
		if err := s.restage(ctx, driver, id, pod, req, opts); err != nil {
			return failed("staging the volume again", err)
		}
	}
	// Finds the new staging pod and waits until it serves; binds it at the
	// target if the old volume is still there.
	if err := s.publish(ctx, driver, req, opts); err != nil {
		return failed("staging the volume again", err)
	}
	if pod, err = s.nodePods.Find(ctx, protocol.PhaseStaging, id); err != nil || pod == nil {
		return err
	}
	replaced, err := s.replaceForClients(ctx, driver, pod, req, opts.rec)
	if err != nil {
		return failed("replacing the volume where its clients see it", err)
	}
	if err := s.tearDownOlder(ctx, driver, id, pod); err != nil {
		return err
	}
	if err := s.patchAnnotations(ctx, pod, map[string]interface{}{protocol.AnnotationRecovering: nil}); err != nil {
		return err
	}
	took := time.Since(opts.rec.Since).Round(10 * time.Millisecond)
	klog.FromContext(ctx).Info("Volume recovered", "stagingID", id, "pod", klog.KObj(pod), "took", took, "mounts", replaced)
	s.eventOn(clients, corev1.EventTypeNormal, ReasonVolumeRecovered,
		"volume %s works again after %v: staging pod %s/%s serves it (%d mounts replaced on the node and in containers)", req.VolumeID, took, pod.Namespace, pod.Name, len(replaced))
	s.health.forget(id)
	return nil
}

// restage replaces a stopped staging pod: the old staging goes as for an
// unpublish (its unstaging pod runs: a backend may allow one daemon only),
// then a new staging pod with the recovery record starts beside the old
// pod, which is released only then, so that the record is always in a pod.
// The new pod's name comes from the old one's UID: a repeated attempt finds
// the pod it made.
func (s *Stager) restage(ctx context.Context, driver, id string, old *corev1.Pod, req *pavcsi.PublishRequest, opts publishOptions) error {
	kept, err := s.stopStaging(ctx, driver, old)
	if err != nil {
		return fmt.Errorf("stopping the old staging: %w", err)
	}
	pv, err := s.findPV(ctx, driver, req.VolumeID, req.VolumeContext)
	if err != nil {
		return err
	}
	if _, err := s.createStagingPod(ctx, driver, id, pv, req, opts.annotations(), replacementSuffix(old)); err != nil {
		return err
	}
	if kept != nil {
		return s.removeFinalizer(ctx, kept)
	}
	return nil
}

// replacementSuffix ends the name of the pod that restages old's volume.
func replacementSuffix(old *corev1.Pod) string {
	uid := string(old.UID)
	return "-" + uid[:min(8, len(uid))]
}

// keepForBlockClients keeps the stopped staging of a block volume on a node
// whose device cgroups are v2 (mounts.ErrDeviceCgroupV2): a new device could not
// be given to the running clients, nor the old number taken from them, and
// once the old staging's unstaging gave that number back it could become
// another volume's device, which the clients could open. So the old
// staging is neither torn down nor replaced until the client pods go
// (kubelet unpublishes then); they get a Warning Event, once per staging pod.
func (s *Stager) keepForBlockClients(ctx context.Context, pod *corev1.Pod, req *pavcsi.PublishRequest, rec *recoveryRecord) {
	if _, told := s.keptBlockStagings.LoadOrStore(pod.UID, true); told {
		return
	}
	clients, err := s.podsOnThisNode(ctx, rec.Clients)
	if err != nil {
		klog.FromContext(ctx).Info("Not recovering a block volume on cgroup v2; its clients are unknown", "pod", klog.KObj(pod), "err", err)
		s.keptBlockStagings.Delete(pod.UID)
		return
	}
	klog.FromContext(ctx).Info("Not recovering a block volume: the node's device cgroups are v2", "pod", klog.KObj(pod), "clients", rec.Clients)
	s.eventOn(clients, corev1.EventTypeWarning, ReasonVolumeNotRecovered,
		"block volume %s stopped working (staging pod %s/%s: %s) and is not staged again while this pod runs: the node's device cgroups are cgroup v2, where PaV can neither let the running containers open a new device nor take the old device number from them; delete and recreate the pod to use the volume again",
		req.VolumeID, pod.Namespace, pod.Name, nodepods.Describe(s.exits.withReportedExits(pod)))
}

// nodeDeviceCgroupV2: this node's device cgroups are cgroup v2 (the node
// plugin's own process has no v1 devices controller).
func nodeDeviceCgroupV2() bool {
	self, err := mounts.OpenProcess(os.Getpid())
	if err != nil {
		return false
	}
	defer self.Close()
	_, err = mounts.DeviceCgroup(self)
	return errors.Is(err, mounts.ErrDeviceCgroupV2)
}

// lost says whether the staging no longer serves its volume while client
// pods still use it, and if so returns the record of the recovery to come:
// the mount at the staging's target and the client pods whose directories
// on this node show it. A long-running staging pod has stopped; a
// run-to-completion one's volume no longer answers at the target (the
// health check's verdict). Nil: nothing to recover (the volume works, the
// target is no longer published, or no client uses it: kubelet unpublishes).
// Nothing here waits on the volume's file system: a block volume's device
// number is read with a bound (a hung file system holding the node does
// not hold the recovery worker).
func (s *Stager) lost(ctx context.Context, pod *corev1.Pod, target string, block bool) (*recoveryRecord, error) {
	if longRunning(pod, s.root) {
		if !servingStopped(pod, s.exits) {
			return nil, nil
		}
	} else if stats, answered, err := s.probes.Run(ctx, target, s.readStats); err != nil || !answered || !stats.Abnormal || stats.Reason != volstats.ReasonVolumeUnreachable {
		return nil, nil
	}
	infos, err := mount.ParseMountInfo("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	old, ok := mounts.VolumeMountAt(infos, target)
	if !ok {
		return nil, nil // unpublished meanwhile
	}
	rec := &recoveryRecord{Since: time.Now(), Replaces: []string{old.String()}, FSType: old.FSType}
	if block {
		dev, answered, err := volstats.Bounded(ctx, s.probes.Timeout, func() (uint64, error) { return s.deviceAt(target) })
		if !answered {
			return nil, fmt.Errorf("reading the device number of the block volume at %s: no answer in %v", target, s.probes.Timeout)
		} else if err != nil {
			return nil, fmt.Errorf("reading the device number of the block volume at %s: %w", target, err)
		}
		rec.Device = dev
	}
	for _, m := range mounts.StaleMounts(infos, []mounts.VolumeMount{old}) {
		if uid, ok := kubelet.PodUIDInPath(m.MountPoint); ok && !slices.Contains(rec.Clients, uid) {
			rec.Clients = append(rec.Clients, uid)
		}
	}
	if len(rec.Clients) == 0 {
		klog.FromContext(ctx).V(2).Info("Not recovering: no client pod uses the volume", "pod", klog.KObj(pod), "target", target)
		return nil, nil
	}
	klog.FromContext(ctx).Info("Volume lost; restaging it", "pod", klog.KObj(pod), "target", target, "clients", rec.Clients)
	return rec, nil
}

// blockDeviceAt is the device number of the block device node at path.
func blockDeviceAt(path string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFBLK {
		return 0, fmt.Errorf("%s is no block device", path)
	}
	return st.Rdev, nil
}

// eventOn records an Event on each of pods.
func (s *Stager) eventOn(pods []*corev1.Pod, eventType, reason, format string, args ...interface{}) {
	if s.recorder == nil {
		return
	}
	for _, p := range pods {
		s.recorder.Eventf(p, eventType, reason, format, args...)
	}
}

// podsOnThisNode returns the pods of this node with the given UIDs.
func (s *Stager) podsOnThisNode(ctx context.Context, uids []types.UID) ([]*corev1.Pod, error) {
	list, err := s.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", s.node).String()})
	if err != nil {
		return nil, fmt.Errorf("listing this node's pods: %w", err)
	}
	var pods []*corev1.Pod
	for i := range list.Items {
		if slices.Contains(uids, list.Items[i].UID) {
			pods = append(pods, &list.Items[i])
		}
	}
	return pods, nil
}

// republishRequest is the publish (or stage) kubelet made, as the staging
// pod recorded it.
func (s *Stager) republishRequest(pod *corev1.Pod) (*pavcsi.PublishRequest, error) {
	var pv corev1.PersistentVolume
	if err := json.Unmarshal([]byte(pod.Annotations[protocol.AnnotationVolumeSnapshot]), &pv); err != nil || pv.Spec.CSI == nil {
		return nil, fmt.Errorf("staging pod %s/%s does not record its CSI volume: %v", pod.Namespace, pod.Name, err)
	}
	pub := protocol.PublicationOf(pod)
	return &pavcsi.PublishRequest{
		VolumeID:      pv.Spec.CSI.VolumeHandle,
		TargetPath:    pub.TargetPath,
		Block:         pv.Spec.VolumeMode != nil && *pv.Spec.VolumeMode == corev1.PersistentVolumeBlock,
		ReadOnly:      pub.ReadOnly,
		MountFlags:    pub.MountOptions,
		FSType:        pub.FSType,
		VolumeContext: pv.Spec.CSI.VolumeAttributes,
		ClientPodUID:  pub.ClientPodUID,
	}, nil
}

// replaceForClients replaces the volume rec recorded by the one the staging
// pod serves now wherever the clients still see the old one: in kubelet's
// directories of the client pods on this node (a client's own target, the
// binds of a shared staging, subPath binds) and in every running container
// of the client pods (for a block volume, their device nodes). It returns
// the mount points (and device nodes) replaced.
func (s *Stager) replaceForClients(ctx context.Context, driver string, pod *corev1.Pod, req *pavcsi.PublishRequest, rec *recoveryRecord) ([]string, error) {
	old, err := rec.mounts()
	if err != nil {
		return nil, err
	}
	dir, err := protocol.PodHostDir(pod, s.root)
	if err != nil {
		return nil, err
	}
	src, err := mounts.OpenInPav(dir, protocol.PavMountPath, protocol.FileVolume)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	opts := s.bindOptions(driver, req.Block, req.ReadOnly)
	replaced, err := mounts.RebindOnNode(s.mounter, old, src, opts, rec.seenBy(kubeletVolumeName(pod, req)))
	if err != nil {
		return replaced, err
	}
	var done []string
	if req.Block {
		done, err = s.replaceDevicesInContainers(ctx, rec, claimOf(pod), src)
	} else {
		done, err = s.replaceInContainers(ctx, rec, src, opts)
	}
	return append(replaced, done...), err
}

// seenBy says whether a mount point on the node is where one of the
// recorded client pods sees volume (kubelet's name of it: its target path,
// a subPath bind, a mapped device). A recovery replaces nothing else: its
// record names the old mounts by device number, which the kernel gives to
// another file system once the last of them is gone, so a replacement
// repeated after that (an attempt failed after it) would otherwise take
// another pod's volume for this one.
func (r *recoveryRecord) seenBy(volume string) func(mountPoint string) bool {
	return func(mountPoint string) bool {
		uid, v, ok := kubelet.PodVolumeOfPath(mountPoint)
		return ok && v == volume && slices.Contains(r.Clients, uid)
	}
}

// kubeletVolumeName is kubelet's name, in its client pods' paths, of the
// volume a staging pod serves: an inline volume's name in its pod, which
// the target path has, or else the PV's.
func kubeletVolumeName(stagingPod *corev1.Pod, req *pavcsi.PublishRequest) string {
	if _, name, ok := kubelet.PodVolumeOfPath(req.TargetPath); ok {
		return name
	}
	var pv metav1.PartialObjectMetadata
	_ = json.Unmarshal([]byte(stagingPod.Annotations[protocol.AnnotationVolumeSnapshot]), &pv)
	return pv.Name
}

// claimOf is the name of the claim a staging pod serves (of its client
// pods' namespace).
func claimOf(stagingPod *corev1.Pod) string {
	_, name, _ := strings.Cut(stagingPod.Annotations[protocol.AnnotationClaim], "/")
	return name
}

// replaceDevicesInContainers replaces, in every running container of rec's
// client pods, the device node of the block volume rec recorded by one of
// the device src is, and revokes the old device number in each container's
// device cgroup.
func (s *Stager) replaceDevicesInContainers(ctx context.Context, rec *recoveryRecord, claim string, src *os.File) ([]string, error) {
	if s.processes == nil {
		return nil, errNoProcesses
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(src.Fd()), &st); err != nil {
		return nil, fmt.Errorf("the new volume: %w", err)
	}
	clients, err := s.podsOnThisNode(ctx, rec.Clients)
	if err != nil {
		return nil, err
	}
	var replaced []string
	var errs []error
	for _, pod := range clients {
		paths := mounts.BlockDevicePaths(pod, claim)
		errs = append(errs, s.inContainers(ctx, pod, func(proc *mounts.ClientProcess) error {
			for _, p := range paths {
				ok, err := mounts.ReplaceDeviceNode(proc, p, rec.Device, st.Rdev, mounts.AllowDevice)
				if err != nil {
					return err
				} else if ok {
					replaced = append(replaced, fmt.Sprintf("%s/%s:%s", pod.Namespace, pod.Name, p))
				}
			}
			if rec.Device == st.Rdev || rec.Device == 0 {
				return nil
			}
			// Also where the node was replaced by an earlier attempt.
			return mounts.RevokeDevice(proc, rec.Device)
		}))
	}
	return replaced, errors.Join(errs...)
}

// replaceInContainers replaces the volume rec recorded by src in every
// running container of rec's client pods. A container whose process runs in
// a mount namespace of a user namespace of its own is left alone
// (mounts.ErrOwnNamespace): its pod gets a Warning Event, and it is no error
// (nothing retries it).
func (s *Stager) replaceInContainers(ctx context.Context, rec *recoveryRecord, src *os.File, opts mounts.BindOptions) ([]string, error) {
	old, err := rec.mounts()
	if err != nil {
		return nil, err
	}
	clients, err := s.podsOnThisNode(ctx, rec.Clients)
	if err != nil {
		return nil, err
	}
	var replaced []string
	var errs []error
	for _, pod := range clients {
		err := s.inContainers(ctx, pod, func(proc *mounts.ClientProcess) error {
			done, err := mounts.ReplaceInNamespace(proc, old, src, opts, nil)
			replaced = append(replaced, done...)
			if errors.Is(err, mounts.ErrOwnNamespace) {
				klog.FromContext(ctx).Info("Not replacing the volume in a mount namespace the client made", "pod", klog.KObj(pod), "pid", proc.PID(), "err", err)
				s.eventOn([]*corev1.Pod{pod}, corev1.EventTypeWarning, ReasonVolumeNotReplaced,
					"volume not replaced in container process %d: it runs in a mount namespace of a user namespace of its own (made with unshare -Urm or the like, or the pod's with hostUsers: false), where a new mount would not stay locked read-only; it keeps the old volume until the container restarts", proc.PID())
				return nil
			}
			return err
		})
		errs = append(errs, err)
	}
	return replaced, errors.Join(errs...)
}

// inContainers calls f with each running container process of pod, held by
// a pidfd (mounts.OpenProcess) and named by the runtime before and after it was
// opened.
func (s *Stager) inContainers(ctx context.Context, pod *corev1.Pod, f func(*mounts.ClientProcess) error) error {
	if s.processes == nil {
		return errNoProcesses
	}
	pids, err := s.processes.PodPIDs(ctx, pod.UID)
	if err != nil {
		return err
	}
	var procs []*mounts.ClientProcess
	defer func() {
		for _, p := range procs {
			p.Close()
		}
	}()
	for _, pid := range pids {
		proc, err := mounts.OpenProcess(pid)
		if errors.Is(err, mounts.ErrProcessGone) {
			continue // the container stopped: the runtime makes its next one from kubelet's mount
		} else if err != nil {
			return err
		}
		procs = append(procs, proc)
	}
	// A PID reused by another process between the runtime's answer and
	// pidfd_open: the runtime, asked again, no longer names it.
	again, err := s.processes.PodPIDs(ctx, pod.UID)
	if err != nil {
		return err
	}
	var errs []error
	for _, proc := range procs {
		if !slices.Contains(again, proc.PID()) {
			continue
		}
		if err := f(proc); err != nil {
			errs = append(errs, fmt.Errorf("container process %d of pod %s/%s: %w", proc.PID(), pod.Namespace, pod.Name, err))
		}
	}
	return errors.Join(errs...)
}

// bindOptions are the flags of the provisioner's published volumes.
func (s *Stager) bindOptions(driver string, block, readOnly bool) mounts.BindOptions {
	allowSetuid := false
	if p, err := s.provisioner(driver); err == nil && p.Spec.VolumeStaging != nil {
		allowSetuid = p.Spec.VolumeStaging.AllowSetuidAndDevices
	}
	return mounts.BindOptions{Block: block, ReadOnly: readOnly, NoSetuidNoDevices: !block && !allowSetuid}
}

var errNoProcesses = errors.New("the node plugin cannot find the client's containers (it runs without --runtime-endpoint): only containers with mountPropagation HostToContainer see the volume again")
