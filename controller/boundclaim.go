package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/templating"
)

// changeVolume is the step of a bound claim: what provisioning left (pods,
// the claim's finalizer) goes, then its volume follows the claim's size
// (expand, expansion.go) and VolumeAttributesClass (modify,
// modification.go).
func (s *claimSync) changeVolume(ctx context.Context) error {
	if len(s.pods) > 0 || protocol.HasFinalizer(s.pvc, protocol.FinalizerClaim) {
		if err := s.finish(ctx); err != nil {
			return err
		}
	}
	if err := s.expand(ctx); err != nil {
		return err
	}
	return s.modify(ctx)
}

// boundVolume is the PV of a bound claim that is a volume of the claim's
// provisioner; nil if there is none. static: PaV did not provision it (a
// PV made by hand for a volume that already existed), so it has none of
// what expansion and modification pods need (the claim and class it was
// created for): those are refused as infeasible, with external-resizer's
// status and Event, rather than ignored.
func (s *claimSync) boundVolume() (pv *corev1.PersistentVolume, static bool) {
	pvc := s.pvc
	if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "" || s.p == nil {
		return nil, false
	}
	pv, err := s.c.volumes.Get(pvc.Spec.VolumeName)
	if err != nil || pv.Spec.CSI == nil || pv.Spec.CSI.Driver != s.p.Name {
		return nil, false
	}
	return pv, pv.Annotations[protocol.AnnotationProvisionedBy] != s.p.Name
}

// staticVolumeProvisioner is the PavProvisioner of the PV a claim is bound
// to, if PaV did not provision it (nil otherwise): the claim names no PaV
// class, but changes of its size or VolumeAttributesClass are reported.
func (c *Controller) staticVolumeProvisioner(pvc *corev1.PersistentVolumeClaim) *v1alpha1.PavProvisioner {
	if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "" {
		return nil
	}
	pv, err := c.volumes.Get(pvc.Spec.VolumeName)
	if err != nil || pv.Spec.CSI == nil || pv.Annotations[protocol.AnnotationProvisionedBy] == pv.Spec.CSI.Driver {
		return nil
	}
	return c.provisioner(pv.Spec.CSI.Driver)
}

// volumeRequest is the dynamic request of a phase that works on the claim's
// existing volume (expansion, modification): the claim's, with pv and its
// handle, and the class the PV recorded if the claim's is gone. ok is false without any class.
func (s *claimSync) volumeRequest(pv *corev1.PersistentVolume) (req templating.DynamicRequest, ok bool) {
	req = s.request()
	req.PV = pv
	req.Handle = pv.Spec.CSI.VolumeHandle
	if req.Class == nil {
		if rec, err := requestFromVolume(pv); err == nil {
			req.Class = rec.Class
		}
	}
	return req, req.Class != nil
}
