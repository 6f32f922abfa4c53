package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/albertofaria/pav/protocol"
)

const (
	reasonVolumeFailedDelete = "VolumeFailedDelete"
	reasonVolumeRetained     = "VolumeRetained"
)

// volumeStep is what a PV needs from PaV.
type volumeStep int

const (
	volumeNotPaVs          volumeStep = iota // PaV will not delete it (no finalizer): only its finished pods to collect
	volumeInUse                              // bound, or not yet released: nothing
	volumeRetainedReleased                   // released, kept by its reclaim policy: tell the user
	volumeRetainedDeleted                    // kept by its reclaim policy, PV object deleted: let it go
	volumeBackoff                            // to be deleted, but a failed attempt holds the next one back
	volumeWait                               // to be deleted once a pod is done (its events requeue the PV)
	volumeEndChanges                         // remove the finished expansion and modification pods first
	volumeDeletionFailed                     // the deletion pod failed: report, retry with backoff
	volumeDeletionDone                       // the deletion pod succeeded: remove the PV
	volumeCannotDelete                       // nothing can run now: report, retry with backoff
	volumeStartDeletion                      // run the deletion (pod, or none)
)

// volumeView is what a volume sync observed of a PV and its pods.
type volumeView struct {
	pv      *corev1.PersistentVolume
	backoff time.Duration // left before the next attempt may start
	// staged: a staging or unstaging pod of the volume exists.
	staged bool
	// changes are its expansion and modification pods; changesDone whether
	// all of them are done.
	changes     []*corev1.Pod
	changesDone bool
	deletion    *corev1.Pod
	// outcome is the deletion pod's, once it is done (nil before).
	outcome     *podOutcome
	provisioner bool // its PavProvisioner exists
}

// decideVolume is the deletion protocol for a PV: pure, so that every case is
// a table row (TestDecideVolume). message explains volumeDeletionFailed and
// volumeCannotDelete.
func decideVolume(v volumeView) (step volumeStep, message string) {
	if step := volumeNeed(v.pv); step != volumeStartDeletion {
		return step, ""
	}
	switch {
	case v.backoff > 0:
		return volumeBackoff, ""
	case v.staged:
		// Still staged somewhere: deleting now would pull the volume
		// from under a client; the pod's removal requeues the PV.
		return volumeWait, ""
	case len(v.changes) > 0 && !v.changesDone:
		// Not while the volume changes; the claim is gone, so let it finish.
		return volumeWait, ""
	case len(v.changes) > 0:
		return volumeEndChanges, ""
	case v.deletion != nil && v.outcome == nil:
		return volumeWait, ""
	case v.deletion != nil && !v.outcome.succeeded:
		return volumeDeletionFailed, fmt.Sprintf("deletion pod %s/%s failed: %s", v.deletion.Namespace, v.deletion.Name, v.outcome.message)
	case v.deletion != nil:
		return volumeDeletionDone, ""
	case !v.provisioner:
		return volumeCannotDelete, fmt.Sprintf("PavProvisioner %q not found; it is needed to delete the volume", v.pv.Annotations[protocol.AnnotationProvisionedBy])
	}
	return volumeStartDeletion, ""
}

// volumeNeed is what the PV alone says: volumeStartDeletion when it is to be
// deleted.
func volumeNeed(pv *corev1.PersistentVolume) volumeStep {
	released := pv.Status.Phase == corev1.VolumeReleased || pv.Status.Phase == corev1.VolumeFailed
	switch {
	case !protocol.HasFinalizer(pv, protocol.FinalizerVolume):
		return volumeNotPaVs
	case pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete:
		// Retain (or anything else): the volume is the user's to deal with;
		// only don't stand in the way of deleting the PV object.
		if pv.DeletionTimestamp != nil {
			return volumeRetainedDeleted
		}
		if released {
			return volumeRetainedReleased
		}
		return volumeInUse
	case released, pv.DeletionTimestamp != nil && pv.Status.Phase != corev1.VolumeBound:
		return volumeStartDeletion
	}
	return volumeInUse
}

// observeVolume reads what decideVolume needs from the caches. The deletion
// pod is examined (reporting it stuck, scheduling a recheck) only when it
// is the PV's next concern.
func (c *Controller) observeVolume(ctx context.Context, pv *corev1.PersistentVolume) volumeView {
	v := volumeView{pv: pv, changesDone: true, provisioner: c.provisioner(pv.Annotations[protocol.AnnotationProvisionedBy]) != nil}
	if volumeNeed(pv) != volumeStartDeletion {
		return v
	}
	v.backoff = c.volumeBackoff.wait(pv.Name)
	for _, pod := range c.podsBy(indexVolume, protocol.LabelValue(pv.Name)) {
		switch phaseOf(pod) {
		case protocol.PhaseStaging, protocol.PhaseUnstaging:
			v.staged = true
		case protocol.PhaseDeletion:
			v.deletion = pod
		case protocol.PhaseExpansion, protocol.PhaseModification:
			v.changes = append(v.changes, pod)
			v.changesDone = v.changesDone && c.examine(ctx, pod).done
		}
	}
	if v.backoff > 0 || v.staged || len(v.changes) > 0 || v.deletion == nil {
		return v
	}
	if v.deletion.DeletionTimestamp != nil && !protocol.Terminated(v.deletion) {
		return v
	}
	if r, ok := c.finishedPod(ctx, v.deletion, podWaiter{obj: pv, queue: c.volumeQueue, key: pv.Name}); ok {
		v.outcome = &r
	}
	return v
}

// syncVolume deletes released PVs that PaV provisioned with reclaim policy
// Delete: deletion pod (if any), then the PV. A failed deletion pod is
// retried with backoff: the spec leaves such a volume to manual
// intervention, and retrying (as Kubernetes' own deleters do) keeps that
// possible (fix the backend or the PavProvisioner, and the next try
// succeeds) while an Event on the PV says what went wrong.
func (c *Controller) syncVolume(ctx context.Context, name string) error {
	pv, err := c.volumes.Get(name)
	if apierrors.IsNotFound(err) {
		c.volumeBackoff.succeeded(name)
		c.retained.Delete(name)
		if err := c.releaseStagingsOnGoneNodes(ctx, name, nil); err != nil {
			return err
		}
		return c.collectVolumePods(ctx, name)
	}
	if err != nil {
		return err
	}
	if err := c.releaseStagingsOnGoneNodes(ctx, name, pv); err != nil {
		return err
	}
	v := c.observeVolume(ctx, pv)
	step, msg := decideVolume(v)
	switch step {
	case volumeNotPaVs:
		return c.collectVolumePods(ctx, name)
	case volumeRetainedDeleted:
		return c.removeVolumeFinalizer(ctx, pv)
	case volumeRetainedReleased:
		c.announceRetained(pv)
	case volumeBackoff:
		c.volumeQueue.AddAfter(name, v.backoff)
	case volumeWait:
		if v.staged {
			klog.V(3).InfoS("Volume still staged; deletion waits", "volume", name)
		}
	case volumeEndChanges:
		return c.deletePods(ctx, v.changes)
	case volumeDeletionFailed:
		return c.podFailed(ctx, v.deletion, msg, func(msg string) error { return c.volumeFailed(pv, msg) })
	case volumeDeletionDone:
		return c.volumeDeleted(ctx, pv, v.deletion)
	case volumeCannotDelete:
		return c.volumeFailed(pv, msg)
	case volumeStartDeletion:
		return c.startVolumeDeletion(ctx, pv)
	}
	return nil
}

// volumeFailed reports a failed deletion on the PV and schedules the next
// attempt with backoff.
func (c *Controller) volumeFailed(pv *corev1.PersistentVolume, msg string) error {
	c.recorder.Event(pv, corev1.EventTypeWarning, reasonVolumeFailedDelete, msg)
	d := c.volumeBackoff.failed(pv.Name)
	c.volumeQueue.AddAfter(pv.Name, d)
	c.metrics.operation(pv.Annotations[protocol.AnnotationProvisionedBy], pv.Spec.StorageClassName, "delete", "failure", 0)
	return retryScheduled{fmt.Errorf("volume %s: %s (retrying in %v)", pv.Name, msg, d)}
}

// startVolumeDeletion evaluates the provisioner's volumeDeletion for the PV
// and runs its pod, or removes the PV at once when there is none.
func (c *Controller) startVolumeDeletion(ctx context.Context, pv *corev1.PersistentVolume) error {
	p := c.provisioner(pv.Annotations[protocol.AnnotationProvisionedBy])
	req, err := requestFromVolume(pv)
	if err != nil {
		return c.volumeFailed(pv, err.Error())
	}
	req.Class = c.restoreClass(req.Class)
	req.PV = pv
	if pv.Spec.CSI != nil {
		req.Handle = pv.Spec.CSI.VolumeHandle
	}
	tmpl, err := c.engine.Deletion(ctx, p, req)
	if err != nil {
		return c.volumeFailed(pv, fmt.Sprintf("evaluating spec.volumeDeletion of PavProvisioner %q: %v", p.Name, err))
	}
	if tmpl == nil {
		return c.volumeDeleted(ctx, pv, nil)
	}
	// About to run the deletion pod, on the API server's word only: the
	// cache may still hold a PV whose deletion just ended (volumeDeleted
	// removes the PV, then its pod, and the pods' watch can be ahead of the
	// PVs', e.g. after an API server restart), which would be deleted twice.
	// A CSI DeleteVolume may be repeated, but a deletion pod runs the
	// admin's script, which the spec runs once. A cache behind is caught up
	// by the watch, which requeues the PV.
	live, err := c.kube.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading PersistentVolume %s: %w", pv.Name, err)
	}
	if err != nil || live.ResourceVersion != pv.ResourceVersion {
		return nil
	}
	claim := &corev1.ObjectReference{Namespace: req.PVC.Namespace, Name: req.PVC.Name, UID: req.PVC.UID}
	if pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.UID != "" {
		claim.UID = pv.Spec.ClaimRef.UID
	}
	squatter, err := c.createPod(ctx, protocol.VolumePod(protocol.PodBase{Template: tmpl, Provisioner: p.Name, Root: c.podDirRoot()},
		protocol.VolumePodSpec{Phase: protocol.PhaseDeletion, PVName: pv.Name, Claim: claim}))
	if squatter != nil {
		c.recorder.Event(pv, corev1.EventTypeWarning, reasonPodNameTaken, squatterMessage(squatter, protocol.PhaseDeletion))
	}
	if err != nil {
		if ctx.Err() != nil {
			return err // shutting down: not a failure to report to the user
		}
		return c.volumeFailed(pv, err.Error())
	}
	return nil
}

// volumeDeleted removes the PV of a deleted volume: delete the object (it
// stays, held by our finalizer), drop the finalizer, then the deletion pod.
// A crash before the last step leaves only a finished pod, which
// collectVolumePods removes once the PV is gone.
func (c *Controller) volumeDeleted(ctx context.Context, pv *corev1.PersistentVolume, del *corev1.Pod) error {
	if pv.DeletionTimestamp == nil {
		err := c.kube.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pv.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting PersistentVolume %s: %w", pv.Name, err)
		}
	}
	if err := c.removeVolumeFinalizer(ctx, pv); err != nil {
		return err
	}
	if del != nil {
		if err := c.deletePod(ctx, del); err != nil {
			return err
		}
	}
	klog.InfoS("Deleted volume", "volume", pv.Name)
	if pv.Spec.CSI != nil {
		if p := c.provisioner(pv.Spec.CSI.Driver); p != nil && p.Spec.StorageCapacity != nil {
			c.refreshCapacity(p.Name)
		}
	}
	c.volumeBackoff.succeeded(pv.Name)
	c.metrics.operation(pv.Annotations[protocol.AnnotationProvisionedBy], pv.Spec.StorageClassName, "delete", "success", 0)
	return nil
}

func (c *Controller) removeVolumeFinalizer(ctx context.Context, pv *corev1.PersistentVolume) error {
	if !protocol.HasFinalizer(pv, protocol.FinalizerVolume) {
		return nil
	}
	// Re-read: the Delete above changed the object.
	cur, err := c.kube.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = protocol.RemoveFinalizer(ctx, c.kube.CoreV1().PersistentVolumes().Patch, cur, protocol.FinalizerVolume)
	return err
}

// collectVolumePods removes finished deletion pods of a PV that is gone.
func (c *Controller) collectVolumePods(ctx context.Context, name string) error {
	for _, pod := range c.podsBy(indexVolume, protocol.LabelValue(name)) {
		if ph := phaseOf(pod); (ph == protocol.PhaseDeletion || ph == protocol.PhaseExpansion || ph == protocol.PhaseModification) && c.examine(ctx, pod).done {
			if err := c.deletePod(ctx, pod); err != nil {
				return err
			}
		}
	}
	return nil
}

// announceRetained tells the user, once per PV and process, that PaV keeps a
// released volume whose reclaim policy is not Delete, and will not delete it:
// `kubectl describe pv` then says why nothing happens.
func (c *Controller) announceRetained(pv *corev1.PersistentVolume) {
	if prev, loaded := c.retained.Swap(pv.Name, pv.UID); loaded && prev == pv.UID {
		return
	}
	c.recorder.Eventf(pv, corev1.EventTypeNormal, reasonVolumeRetained,
		"the claim is gone and the reclaim policy is %s: PaV keeps the volume and will not run its deletion; delete the PersistentVolume when done with it",
		pv.Spec.PersistentVolumeReclaimPolicy)
}
