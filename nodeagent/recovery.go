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
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/albertofaria/pav/crds/v1alpha1"
	pavcsi "github.com/albertofaria/pav/csi"
	"github.com/albertofaria/pav/protocol"
)

// Reasons of the Events recovery puts on client pods.
const (
	ReasonVolumeLost           = "VolumeLost"
	ReasonVolumeRecovered      = "VolumeRecovered"
	ReasonVolumeRecoveryFailed = "VolumeRecoveryFailed"
)

// recoveryTimeout bounds one attempt to recover a staging.
const recoveryTimeout = 2 * time.Minute

// ContainerProcesses finds the processes of a pod's running containers
// (ContainerdProcesses).
type ContainerProcesses interface {
	PodPIDs(ctx context.Context, uid types.UID) ([]int, error)
}

// recoveryRecord is what a restaging staging pod records
// (protocol.AnnotationRecovering): the mounts of the volume it replaces, to
// be found in the client containers, and when the volume was found lost.
type recoveryRecord struct {
	Replaces []string  `json:"replaces"` // volumeMount.String()
	Since    time.Time `json:"since"`
}

func (r *recoveryRecord) annotations() map[string]string {
	if r == nil {
		return nil
	}
	b, _ := json.Marshal(r)
	return map[string]string{protocol.AnnotationRecovering: string(b)}
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
	top, err := mountAt("self", target)
	if err != nil {
		return false
	}
	now := volumeMount{Major: top.Major, Minor: top.Minor, Root: unescapeMountInfo(top.Root)}.String()
	for _, old := range r.Replaces {
		if old == now {
			return true
		}
	}
	return false
}

func (r *recoveryRecord) mounts() ([]volumeMount, error) {
	var out []volumeMount
	for _, s := range r.Replaces {
		m, err := parseVolumeMount(s)
		if err != nil {
			return nil, err
		}
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
	}
}

// longRunning: the staging pod signalled /pav/ready, so its volume needs it
// running.
func longRunning(pod *corev1.Pod, root string) bool {
	dir, err := podHostDir(pod, root)
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
// a client that still uses it, then replaces the volume in the client's
// running containers. Each step can be repeated: the new staging pod
// records what it replaces until the clients have it.
func (s *Stager) recover(ctx context.Context, id string) error {
	defer s.locks.lock(id)()
	pod, err := s.findPod(ctx, protocol.PhaseStaging, id)
	if err != nil || pod == nil {
		return err
	}
	driver := pod.Labels[protocol.LabelProvisioner]
	p, err := s.provisioner(driver)
	if err != nil {
		return err
	}
	if p.Spec.VolumeStaging != nil && p.Spec.VolumeStaging.Recovery == v1alpha1.RecoveryNone {
		return nil
	}
	rec, err := recoveryOf(pod)
	if err != nil {
		return err
	}
	target := pod.Annotations[protocol.AnnotationTargetPath]
	if rec == nil && !s.stagingLost(ctx, pod, target) {
		return nil // e.g. a pod stopped by an unpublish: looked up nothing in the API
	}
	client, err := s.clientPod(ctx, target)
	if err != nil || client == nil {
		klog.FromContext(ctx).V(2).Info("Not recovering: no client pod", "stagingID", id, "target", target, "err", err)
		return err // no client: kubelet or the abandoned-staging sweep unpublishes
	}
	if rec == nil || servingStopped(pod, s.exits) {
		if rec, err = s.restage(ctx, driver, pod, rec, client); err != nil || rec == nil {
			if err != nil && s.recorder != nil {
				s.recorder.Eventf(client, corev1.EventTypeWarning, ReasonVolumeRecoveryFailed, "restaging the volume at %s failed (retried with backoff): %v", target, err)
			}
			return err
		}
		if pod, err = s.findPod(ctx, protocol.PhaseStaging, id); err != nil || pod == nil {
			return err
		}
	} else {
		// A recovery a previous attempt (or incarnation) left after
		// creating the new staging pod: publish again, which waits until
		// the pod serves and binds it at the target if the old volume is
		// still there.
		req, err := s.republishRequest(pod)
		if err != nil {
			return err
		}
		if err := s.publish(ctx, driver, req, rec); err != nil {
			return err
		}
	}
	replaced, err := s.replaceInClient(ctx, driver, pod, rec, client)
	if err != nil {
		if s.recorder != nil {
			s.recorder.Eventf(client, corev1.EventTypeWarning, ReasonVolumeRecoveryFailed, "replacing the volume in the running containers failed (retried with backoff): %v", err)
		}
		return err
	}
	if err := s.patchAnnotations(ctx, pod, map[string]interface{}{protocol.AnnotationRecovering: nil}); err != nil {
		return err
	}
	took := time.Since(rec.Since).Round(10 * time.Millisecond)
	klog.FromContext(ctx).Info("Volume recovered", "stagingID", id, "pod", klog.KObj(pod), "took", took, "containerMounts", replaced)
	if s.recorder != nil {
		s.recorder.Eventf(client, corev1.EventTypeNormal, ReasonVolumeRecovered,
			"the volume at %s works again after %v: staging pod %s/%s serves it, replaced in %d container mount(s)", target, took, pod.Namespace, pod.Name, len(replaced))
	}
	s.health.forget(id)
	return nil
}

// restage replaces a staging that stopped serving: it records the mount at
// the target, tears the old staging down (its unstaging pod runs) and
// stages again. It returns nil if there is nothing to recover: the target
// is no longer published (an unpublish is under way) or its volume works.
func (s *Stager) restage(ctx context.Context, driver string, pod *corev1.Pod, rec *recoveryRecord, client *corev1.Pod) (*recoveryRecord, error) {
	target := pod.Annotations[protocol.AnnotationTargetPath]
	if rec == nil {
		if !s.stagingLost(ctx, pod, target) {
			klog.FromContext(ctx).V(2).Info("Not recovering: the staging still serves", "pod", klog.KObj(pod))
			return nil, nil
		}
		top, err := mountAt("self", target)
		if err != nil {
			klog.FromContext(ctx).V(2).Info("Not recovering: the target is not published", "pod", klog.KObj(pod), "err", err)
			return nil, nil // unpublished meanwhile
		}
		rec = &recoveryRecord{Since: time.Now(), Replaces: []string{volumeMount{Major: top.Major, Minor: top.Minor, Root: unescapeMountInfo(top.Root)}.String()}}
		msg := fmt.Sprintf("the volume at %s stopped working (staging pod %s/%s: %s); staging it again", target, pod.Namespace, pod.Name, describePod(pod))
		klog.FromContext(ctx).Info("Volume lost; restaging it", "pod", klog.KObj(pod), "target", target)
		if s.recorder != nil {
			s.recorder.Event(client, corev1.EventTypeWarning, ReasonVolumeLost, msg)
		}
	}
	req, err := s.republishRequest(pod)
	if err != nil {
		return nil, err
	}
	if err := s.teardown(ctx, driver, pod); err != nil {
		return nil, err
	}
	// The new staging pod has the old one's name: wait until the cache no
	// longer holds the old one, or publish would wait on it.
	if _, err := s.wait(ctx, pod, "", func(p *corev1.Pod) bool { return p == nil }); err != nil {
		return nil, fmt.Errorf("waiting for the stopped staging pod %s/%s to go: %w", pod.Namespace, pod.Name, err)
	}
	if err := s.publish(ctx, driver, req, rec); err != nil {
		return nil, err
	}
	return rec, nil
}

// stagingLost: the staging no longer serves its volume. A long-running
// staging pod has stopped; a run-to-completion one's volume no longer
// answers at the target (the health check's verdict).
func (s *Stager) stagingLost(ctx context.Context, pod *corev1.Pod, target string) bool {
	if longRunning(pod, s.root) {
		return servingStopped(pod, s.exits)
	}
	stats, answered, err := s.probes.run(ctx, target, s.readStats)
	return err == nil && answered && stats.Abnormal && stats.Reason == ReasonVolumeUnreachable
}

// republishRequest is the publish kubelet made, as the staging pod recorded it.
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
	}, nil
}

// replaceInClient replaces the volume rec recorded by the one the staging
// pod serves now, in every running container of the client pod; it returns
// the mount points replaced. A block volume reaches containers as a device
// node, not a mount: there is nothing to replace (see docs/architecture.md).
func (s *Stager) replaceInClient(ctx context.Context, driver string, pod *corev1.Pod, rec *recoveryRecord, client *corev1.Pod) ([]string, error) {
	req, err := s.republishRequest(pod)
	if err != nil || client == nil || req.Block {
		return nil, err
	}
	old, err := rec.mounts()
	if err != nil {
		return nil, err
	}
	if s.processes == nil {
		return nil, errNoProcesses
	}
	pids, err := s.processes.PodPIDs(ctx, client.UID)
	if err != nil {
		return nil, err
	}
	dir, err := podHostDir(pod, s.root)
	if err != nil {
		return nil, err
	}
	src, err := openInPav(dir, protocol.FileVolume)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	opts := s.bindOptions(driver, false, req.ReadOnly)
	var replaced []string
	var errs []error
	for _, pid := range pids {
		done, err := replaceInNamespace(pid, old, src, opts)
		replaced = append(replaced, done...)
		if err != nil {
			errs = append(errs, fmt.Errorf("container process %d: %w", pid, err))
		}
	}
	return replaced, errors.Join(errs...)
}

// bindOptions are the flags of the provisioner's published volumes.
func (s *Stager) bindOptions(driver string, block, readOnly bool) BindOptions {
	allowSetuid := false
	if p, err := s.provisioner(driver); err == nil && p.Spec.VolumeStaging != nil {
		allowSetuid = p.Spec.VolumeStaging.AllowSetuidAndDevices
	}
	return BindOptions{Block: block, ReadOnly: readOnly, NoSetuidNoDevices: !block && !allowSetuid}
}

var errNoProcesses = errors.New("the node plugin cannot find the client's containers (it runs without --runtime-endpoint): only containers with mountPropagation HostToContainer see the volume again")
