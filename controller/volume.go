package controller

import (
	"context"
	"fmt"

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
	volumeDelete                             // released with policy Delete (or PV deleted unbound): run the deletion
)

// decideVolume is the deletion protocol's decision for a PV: pure, so that
// every case is a table row (TestDecideVolume).
func decideVolume(pv *corev1.PersistentVolume) volumeStep {
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
		return volumeDelete
	}
	return volumeInUse
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
	switch decideVolume(pv) {
	case volumeNotPaVs:
		return c.collectVolumePods(ctx, name)
	case volumeInUse:
		return nil
	case volumeRetainedDeleted:
		return c.removeVolumeFinalizer(ctx, pv)
	case volumeRetainedReleased:
		c.announceRetained(pv)
		return nil
	}
	if d := c.volumeBackoff.wait(name); d > 0 {
		c.volumeQueue.AddAfter(name, d)
		return nil
	}
	var del *corev1.Pod
	for _, pod := range c.podsBy(indexVolume, protocol.LabelValue(name)) {
		switch phaseOf(pod) {
		case protocol.PhaseStaging, protocol.PhaseUnstaging:
			// Still staged somewhere: deleting now would pull the volume
			// from under a client; the pod's removal requeues us.
			klog.V(3).InfoS("Volume still staged; deletion waits", "volume", name, "pod", klog.KObj(pod))
			return nil
		case protocol.PhaseDeletion:
			del = pod
		case protocol.PhaseExpansion, protocol.PhaseModification:
			// Not while the volume changes; the claim is gone, so finish here.
			if !c.examine(ctx, pod).done {
				return nil
			}
			if err := c.deletePod(ctx, pod); err != nil {
				return err
			}
		}
	}
	provName := pv.Annotations[protocol.AnnotationProvisionedBy]
	p := c.provisioner(provName)
	fail := func(format string, args ...interface{}) error {
		msg := fmt.Sprintf(format, args...)
		c.recorder.Event(pv, corev1.EventTypeWarning, reasonVolumeFailedDelete, msg)
		d := c.volumeBackoff.failed(name)
		c.volumeQueue.AddAfter(name, d)
		c.metrics.operation(provName, "delete", "failure", 0)
		return retryScheduled{fmt.Errorf("volume %s: %s (retrying in %v)", name, msg, d)}
	}
	if del != nil {
		if del.DeletionTimestamp != nil && !protocol.Terminated(del) {
			return nil
		}
		r, ok := c.finishedPod(ctx, del, podWaiter{obj: pv, queue: c.volumeQueue, key: name})
		if !ok {
			return nil
		}
		if !r.succeeded {
			if err := c.deletePod(ctx, del); err != nil {
				return err
			}
			return fail("deletion pod %s/%s failed: %s", del.Namespace, del.Name, r.message)
		}
		return c.volumeDeleted(ctx, pv, del)
	}
	if p == nil {
		return fail("PavProvisioner %q not found; it is needed to delete the volume", provName)
	}
	req, err := requestFromVolume(pv)
	if err != nil {
		return fail("%v", err)
	}
	req.Class = c.restoreClass(req.Class)
	req.PV = pv
	if pv.Spec.CSI != nil {
		req.Handle = pv.Spec.CSI.VolumeHandle
	}
	tmpl, err := c.engine.Deletion(ctx, p, req)
	if err != nil {
		return fail("evaluating spec.volumeDeletion of PavProvisioner %q: %v", p.Name, err)
	}
	if tmpl == nil {
		return c.volumeDeleted(ctx, pv, nil)
	}
	// About to run the deletion pod, on the API server's word only: the
	// cache may still hold a PV whose deletion just ended (volumeDeleted
	// removes the PV, then its pod, and the pods' watch can be ahead of the
	// PVs', e.g. after an API server restart), which would be deleted twice.
	// (sig-storage-lib-external-provisioner re-read the PV before deleting
	// until 2020, then trusted its cache: a CSI DeleteVolume may be repeated,
	// but a deletion pod runs the admin's script, which the spec runs once.)
	// A cache behind is caught up by the watch, which requeues the PV.
	live, err := c.kube.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading PersistentVolume %s: %w", name, err)
	}
	if err != nil || live.ResourceVersion != pv.ResourceVersion {
		return nil
	}
	claim := &corev1.ObjectReference{Namespace: req.PVC.Namespace, Name: req.PVC.Name, UID: req.PVC.UID}
	if pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.UID != "" {
		claim.UID = pv.Spec.ClaimRef.UID
	}
	squatter, err := c.createPod(ctx, protocol.VolumePod(protocol.PodBase{Template: tmpl, Provisioner: p.Name, Root: c.podDirRoot()},
		protocol.VolumePodSpec{Phase: protocol.PhaseDeletion, PVName: name, Claim: claim}))
	if squatter != nil {
		c.recorder.Event(pv, corev1.EventTypeWarning, reasonPodNameTaken, squatterMessage(squatter, protocol.PhaseDeletion))
	}
	if err != nil {
		if ctx.Err() != nil {
			return err // shutting down: not a failure to report to the user
		}
		return fail("%v", err)
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
	c.metrics.operation(pv.Annotations[protocol.AnnotationProvisionedBy], "delete", "success", 0)
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
