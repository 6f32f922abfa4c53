package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/albertofaria/pav/protocol"
)

// Volume modification (a PaV-Go addition), as external-resizer's modify
// controller does it for a CSI driver's ControllerModifyVolume: when a bound
// claim's spec.volumeAttributesClassName differs from its
// status.currentVolumeAttributesClassName, the controller records the
// modification in status.modifyVolumeStatus (InProgress, target class,
// condition ModifyingVolume), runs the provisioner's modification pod with
// the new class's parameters, then sets the PV's
// spec.volumeAttributesClassName and the claim's current class and clears
// the status. The modification pod is the record of an attempt: until its
// outcome is in the claim's status it is not deleted, so it runs once.
//
// A class that does not exist leaves the status Pending (retried with
// backoff). A class of another driver, a provisioner without
// volumeModification, and a class the pod reports infeasible
// (/pav/infeasible) end Infeasible (condition ModifyVolumeError); the last is
// tried again only at the slowest retry interval (the claims' RetryMax), as
// external-resizer retries an infeasible class, or at once if the claim asks
// for another class. Setting the claim
// back to its current class (a rollback) clears an Infeasible or Pending
// status without a pod, since nothing changed the volume; from InProgress
// it runs the pod with the current class, as external-resizer calls
// ControllerModifyVolume with it. A failed pod keeps InProgress with a
// ModifyVolumeError condition and is retried with backoff.
// A claim whose class is set back to none while nothing is in progress only
// loses its ModifyingVolume condition (external-resizer's "rolled back").

const (
	reasonModify          = "VolumeModify"
	reasonModifyFailed    = "VolumeModifyFailed"
	reasonModifySucceeded = "VolumeModifySuccessful"
	reasonModifyCancelled = "VolumeModifyCanceled"
)

// Reasons of the ModifyVolumeError condition.
const (
	// modifyNotAllowed: the class is another driver's, or the provisioner
	// cannot modify volumes. Judged again at every sync.
	modifyNotAllowed = "ModificationNotAllowed"
	// modifyInfeasibleByPod: the modification pod wrote /pav/infeasible.
	// That class is tried again after the slowest retry interval.
	modifyInfeasibleByPod = "ModificationPodInfeasible"
	// modifyPodFailed: the modification pod failed; retried with backoff.
	modifyPodFailed = "ModificationPodFailed"
)

// modifyStep is what a bound claim's volume needs next for its class.
type modifyStep int

const (
	modifyNothing    modifyStep = iota // the volume has the claim's class
	modifyWait                         // the pod found the target infeasible: try it again when its slow retry is due
	modifyPodState                     // a modification pod exists: act on its outcome
	modifyCancelled                    // the claim is back to its current class and nothing is in progress
	modifyRolledBack                   // the claim names no class and nothing is in progress
	modifyPending                      // the target class does not exist
	modifyInfeasible                   // the target is not allowed: record it, and say why
	modifyStart                        // start a modification to the target
)

// modificationView is what a modification sync observed of a bound claim.
type modificationView struct {
	pvc *corev1.PersistentVolumeClaim
	pod bool // a modification pod exists
	// classMissing: the target class does not exist; notAllowed says why
	// the provisioner cannot give the volume the target class. Both are
	// only judged without a pod and with a target.
	classMissing bool
	notAllowed   string
	// infeasibleRetryIn: how long until a target the modification pod found
	// infeasible is tried again (≤ 0: now).
	infeasibleRetryIn time.Duration
}

// modificationTarget is the class a claim's volume is to be given: its
// spec's, or, when the spec names none, the target of a modification in
// progress (which is carried on, as external-resizer does). "" for none.
func modificationTarget(pvc *corev1.PersistentVolumeClaim) string {
	if spec := ptrString(pvc.Spec.VolumeAttributesClassName); spec != "" {
		return spec
	}
	if st := pvc.Status.ModifyVolumeStatus; st != nil && st.Status == corev1.PersistentVolumeClaimModifyVolumeInProgress {
		return st.TargetVolumeAttributesClassName
	}
	return ""
}

// decideModification is the modification protocol for one bound claim:
// pure, so that every case is a table row (TestDecideModification).
// message explains modifyInfeasible.
func decideModification(v modificationView) (step modifyStep, message string) {
	pvc := v.pvc
	st := pvc.Status.ModifyVolumeStatus
	target := modificationTarget(pvc)
	switch {
	case v.pod:
		return modifyPodState, ""
	case st == nil && ptrString(pvc.Spec.VolumeAttributesClassName) == ptrString(pvc.Status.CurrentVolumeAttributesClassName):
		return modifyNothing, ""
	case ptrString(pvc.Spec.VolumeAttributesClassName) == ptrString(pvc.Status.CurrentVolumeAttributesClassName) && st.Status != corev1.PersistentVolumeClaimModifyVolumeInProgress:
		return modifyCancelled, ""
	case target == "":
		return modifyRolledBack, ""
	case modifyErrorRecord(pvc, target, corev1.PersistentVolumeClaimModifyVolumeInfeasible, modifyInfeasibleByPod) != nil && v.infeasibleRetryIn > 0:
		return modifyWait, ""
	case v.classMissing:
		return modifyPending, ""
	case v.notAllowed != "":
		return modifyInfeasible, v.notAllowed
	}
	return modifyStart, ""
}

// modifyErrorRecord is the ModifyVolumeError condition of a claim whose
// status records a modification to target in state, with reason; nil if it
// does not.
func modifyErrorRecord(pvc *corev1.PersistentVolumeClaim, target string, state corev1.PersistentVolumeClaimModifyVolumeStatus, reason string) *corev1.PersistentVolumeClaimCondition {
	st := pvc.Status.ModifyVolumeStatus
	if st == nil || st.Status != state || st.TargetVolumeAttributesClassName != target {
		return nil
	}
	for i, c := range pvc.Status.Conditions {
		if c.Type == corev1.PersistentVolumeClaimVolumeModifyVolumeError && c.Reason == reason {
			return &pvc.Status.Conditions[i]
		}
	}
	return nil
}

// volumeAttributesClass reads a VolumeAttributesClass (nil, nil if it does
// not exist). Classes are read when a claim names one, not cached: few
// claims change theirs.
func (s *claimSync) volumeAttributesClass(ctx context.Context, name string) (*storagev1.VolumeAttributesClass, error) {
	vac, err := s.c.kube.StorageV1().VolumeAttributesClasses().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading VolumeAttributesClass %q: %w", name, err)
	}
	return vac, nil
}

// classNotAllowed says why the provisioner cannot give a volume class vac;
// "" if it can.
func (s *claimSync) classNotAllowed(vac *storagev1.VolumeAttributesClass) string {
	switch {
	case vac.DriverName != s.p.Name:
		return fmt.Sprintf("VolumeAttributesClass %q is for driver %q, not PavProvisioner %q", vac.Name, vac.DriverName, s.p.Name)
	case s.p.Spec.VolumeModification == nil:
		return fmt.Sprintf("PavProvisioner %q cannot modify volumes (it has no spec.volumeModification)", s.p.Name)
	}
	return ""
}

// modify gives the claim's volume the class the claim asks for.
func (s *claimSync) modify(ctx context.Context) error {
	pv, static := s.boundVolume()
	if pv == nil {
		return nil
	}
	var pod *corev1.Pod
	for _, p := range s.c.podsBy(indexVolume, protocol.LabelValue(pv.Name)) {
		if phaseOf(p) == protocol.PhaseModification {
			pod = p
		}
	}
	v := modificationView{pvc: s.pvc, pod: pod != nil}
	target := modificationTarget(s.pvc)
	var vac *storagev1.VolumeAttributesClass
	if pod == nil && target != "" {
		var err error
		if vac, err = s.volumeAttributesClass(ctx, target); err != nil {
			return s.modificationFailed("%v", err)
		}
		if v.classMissing = vac == nil; vac != nil {
			v.notAllowed = s.classNotAllowed(vac)
		}
		if static && !v.classMissing && v.notAllowed == "" {
			v.notAllowed = fmt.Sprintf("volume %s was not provisioned by PaV (a PersistentVolume made for an existing volume of PavProvisioner %q): PaV modifies only the volumes it provisioned", pv.Name, s.p.Name)
		}
	}
	if c := modifyErrorRecord(s.pvc, target, corev1.PersistentVolumeClaimModifyVolumeInfeasible, modifyInfeasibleByPod); c != nil {
		v.infeasibleRetryIn = c.LastProbeTime.Add(s.c.claimBackoff.max).Sub(s.c.claimBackoff.now())
	}
	step, msg := decideModification(v)
	switch step {
	case modifyNothing:
		return nil
	case modifyWait:
		s.c.claimQueue.AddAfter(s.key, v.infeasibleRetryIn)
		return nil
	case modifyPodState:
		return s.modificationPodState(ctx, pv, pod)
	case modifyCancelled:
		return s.modificationCancelled(ctx)
	case modifyRolledBack:
		return s.modificationRolledBack(ctx)
	case modifyPending:
		return s.modificationPending(ctx, target)
	case modifyInfeasible:
		_, err := s.modificationInfeasible(ctx, target, modifyNotAllowed, msg)
		return err
	}
	return s.startModification(ctx, pv, vac)
}

// startModification records the modification to vac as in progress and
// runs the modification pod (or, without a pod template, records the class
// at once).
func (s *claimSync) startModification(ctx context.Context, pv *corev1.PersistentVolume, vac *storagev1.VolumeAttributesClass) error {
	req, ok := s.volumeRequest(pv)
	if !ok {
		return s.modificationFailed("StorageClass %q not found", ptrString(s.pvc.Spec.StorageClassName))
	}
	req.VolumeAttributesClass = vac
	if cur := ptrString(s.pvc.Status.CurrentVolumeAttributesClassName); cur != "" {
		var err error
		if req.CurrentVolumeAttributesClass, err = s.volumeAttributesClass(ctx, cur); err != nil {
			return s.modificationFailed("%v", err)
		}
	}
	tmpl, _, err := s.c.engine.Modification(ctx, s.p, req)
	if err != nil {
		return s.modificationFailed("evaluating spec.volumeModification of PavProvisioner %q: %v", s.p.Name, err)
	}
	recorded, err := s.modifyStatus(ctx, func(pvc *corev1.PersistentVolumeClaim) {
		pvc.Status.ModifyVolumeStatus = &corev1.ModifyVolumeStatus{TargetVolumeAttributesClassName: vac.Name, Status: corev1.PersistentVolumeClaimModifyVolumeInProgress}
		pvc.Status.Conditions = append(withoutModifyConditions(pvc.Status.Conditions), modifyingCondition(fmt.Sprintf("Modifying volume to %q is in progress.", vac.Name)))
	}, func(pvc *corev1.PersistentVolumeClaim) bool {
		st := pvc.Status.ModifyVolumeStatus
		return st != nil && st.Status == corev1.PersistentVolumeClaimModifyVolumeInProgress && st.TargetVolumeAttributesClassName == vac.Name &&
			hasCondition(pvc, corev1.PersistentVolumeClaimVolumeModifyingVolume) && !hasCondition(pvc, corev1.PersistentVolumeClaimVolumeModifyVolumeError)
	})
	if err != nil || !recorded {
		return err
	}
	s.event(corev1.EventTypeNormal, reasonModify, "PavProvisioner %q is modifying volume %s to VolumeAttributesClass %q", s.p.Name, pv.Name, vac.Name)
	if tmpl == nil {
		_, err := s.modified(ctx, pv, vac.Name)
		return err
	}
	claim := &corev1.ObjectReference{Namespace: s.pvc.Namespace, Name: s.pvc.Name, UID: s.pvc.UID}
	squatter, err := s.c.createPod(ctx, protocol.VolumePod(protocol.PodBase{Template: tmpl, Provisioner: s.p.Name, Root: s.c.podDirRoot()},
		protocol.VolumePodSpec{Phase: protocol.PhaseModification, PVName: pv.Name, Claim: claim,
			Extra: map[string]string{protocol.AnnotationModificationTarget: vac.Name}}))
	if squatter != nil {
		s.event(corev1.EventTypeWarning, reasonPodNameTaken, "%s", squatterMessage(squatter, protocol.PhaseModification))
	}
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		return s.modificationFailed("%v", err)
	}
	return nil
}

// modificationPodState acts on the modification pod's outcome; the pod goes
// only once the claim's status records it.
func (s *claimSync) modificationPodState(ctx context.Context, pv *corev1.PersistentVolume, pod *corev1.Pod) error {
	if pod.DeletionTimestamp != nil && !protocol.Terminated(pod) {
		return nil
	}
	r, ok := s.finishedPod(ctx, pod)
	if !ok {
		return nil
	}
	target := pod.Annotations[protocol.AnnotationModificationTarget]
	var recorded bool
	var err error
	switch {
	case target == "":
		// Not a pod this controller made: nothing to record.
		s.event(corev1.EventTypeWarning, reasonModifyFailed, "modification pod %s/%s has no %s annotation", pod.Namespace, pod.Name, protocol.AnnotationModificationTarget)
		recorded = true
	case r.infeasible != nil:
		msg := fmt.Sprintf("modification pod %s/%s reports that volume %s cannot take VolumeAttributesClass %q", pod.Namespace, pod.Name, pv.Name, target)
		if why := strings.TrimSpace(*r.infeasible); why != "" {
			msg += ": " + why
		}
		recorded, err = s.modificationInfeasible(ctx, target, modifyInfeasibleByPod, msg)
	case !r.succeeded:
		msg := fmt.Sprintf("modification pod %s/%s failed: %s", pod.Namespace, pod.Name, r.message)
		recorded, err = s.modifyStatus(ctx, func(pvc *corev1.PersistentVolumeClaim) {
			pvc.Status.ModifyVolumeStatus = &corev1.ModifyVolumeStatus{TargetVolumeAttributesClassName: target, Status: corev1.PersistentVolumeClaimModifyVolumeInProgress}
			pvc.Status.Conditions = append(withoutModifyConditions(pvc.Status.Conditions),
				modifyingCondition(fmt.Sprintf("Modifying volume to %q failed. Waiting for retry.", target)),
				modifyErrorCondition(modifyPodFailed, msg, s.c.claimBackoff.now()))
		}, func(pvc *corev1.PersistentVolumeClaim) bool {
			return modifyErrorRecord(pvc, target, corev1.PersistentVolumeClaimModifyVolumeInProgress, modifyPodFailed) != nil
		})
		if err == nil && recorded {
			return s.c.podFailed(ctx, pod, msg, func(msg string) error { return s.modificationFailed("%s", msg) })
		}
	default:
		recorded, err = s.modified(ctx, pv, target)
	}
	if err != nil || !recorded {
		return err
	}
	return s.c.deletePod(ctx, pod)
}

// modified records that the volume has class target: on the PV first (so
// that the claim never says more than the volume), then in the claim's
// status. recorded is false while the claim's status does not hold it yet.
func (s *claimSync) modified(ctx context.Context, pv *corev1.PersistentVolume, target string) (recorded bool, err error) {
	if ptrString(pv.Spec.VolumeAttributesClassName) != target {
		cur := pv.DeepCopy()
		cur.Spec.VolumeAttributesClassName = &target
		if _, err := s.c.kube.CoreV1().PersistentVolumes().Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			return false, fmt.Errorf("recording VolumeAttributesClass %q on PersistentVolume %s: %w", target, pv.Name, err)
		}
	}
	recorded, err = s.modifyStatus(ctx, func(pvc *corev1.PersistentVolumeClaim) {
		pvc.Status.ModifyVolumeStatus = nil
		pvc.Status.CurrentVolumeAttributesClassName = &target
		pvc.Status.Conditions = withoutModifyConditions(pvc.Status.Conditions)
	}, func(pvc *corev1.PersistentVolumeClaim) bool {
		return pvc.Status.ModifyVolumeStatus == nil && ptrString(pvc.Status.CurrentVolumeAttributesClassName) == target
	})
	if err != nil || !recorded {
		return recorded, err
	}
	s.event(corev1.EventTypeNormal, reasonModifySucceeded, "volume %s now has VolumeAttributesClass %q", pv.Name, target)
	klog.V(2).InfoS("Modified volume", "claim", s.key, "volume", pv.Name, "class", target)
	s.c.metrics.operation(s.provName, claimClassName(s.pvc), "modify", "success", 0)
	s.c.claimBackoff.succeeded(s.key)
	return true, nil
}

// modificationInfeasible records that the volume cannot take class target,
// as external-resizer does for an infeasible modification: status
// Infeasible, conditions ModifyingVolume and ModifyVolumeError (reason, msg),
// and a VolumeModifyFailed Event.
func (s *claimSync) modificationInfeasible(ctx context.Context, target, reason, msg string) (recorded bool, err error) {
	done := func(pvc *corev1.PersistentVolumeClaim) bool {
		c := modifyErrorRecord(pvc, target, corev1.PersistentVolumeClaimModifyVolumeInfeasible, reason)
		return c != nil && c.Message == msg
	}
	if done(s.pvc) {
		return true, nil
	}
	// The Event before the status: once the status holds it, nothing reports it again.
	s.event(corev1.EventTypeWarning, reasonModifyFailed, "%s", msg)
	s.c.metrics.operation(s.provName, claimClassName(s.pvc), "modify", "infeasible", 0)
	s.c.claimBackoff.succeeded(s.key) // nothing to retry: another class is handled at once
	return s.modifyStatus(ctx, func(pvc *corev1.PersistentVolumeClaim) {
		pvc.Status.ModifyVolumeStatus = &corev1.ModifyVolumeStatus{TargetVolumeAttributesClassName: target, Status: corev1.PersistentVolumeClaimModifyVolumeInfeasible}
		pvc.Status.Conditions = append(withoutModifyConditions(pvc.Status.Conditions),
			modifyingCondition(fmt.Sprintf("Modifying volume to %q failed. Waiting for retry.", target)),
			modifyErrorCondition(reason, msg, s.c.claimBackoff.now()))
	}, done)
}

// modificationPending records that the class the claim asks for does not
// exist (status Pending, conditions kept, as external-resizer does) and
// looks again later.
func (s *claimSync) modificationPending(ctx context.Context, target string) error {
	if st := s.pvc.Status.ModifyVolumeStatus; st == nil || st.Status != corev1.PersistentVolumeClaimModifyVolumePending {
		if _, err := s.modifyStatus(ctx, func(pvc *corev1.PersistentVolumeClaim) {
			if pvc.Status.ModifyVolumeStatus == nil {
				pvc.Status.ModifyVolumeStatus = &corev1.ModifyVolumeStatus{}
			}
			pvc.Status.ModifyVolumeStatus.Status = corev1.PersistentVolumeClaimModifyVolumePending
		}, func(*corev1.PersistentVolumeClaim) bool { return false }); err != nil {
			return err
		}
	}
	return s.modificationFailed("VolumeAttributesClass %q does not exist", target)
}

// modificationCancelled clears the status of a claim set back to the class
// its volume has while no modification was in progress (the last one was
// infeasible or pending: it changed nothing), so no pod needs to run.
func (s *claimSync) modificationCancelled(ctx context.Context) error {
	s.event(corev1.EventTypeNormal, reasonModifyCancelled, "Cancelled modify: the claim asks for the class its volume has.")
	_, err := s.modifyStatus(ctx, func(pvc *corev1.PersistentVolumeClaim) {
		pvc.Status.ModifyVolumeStatus = nil
		pvc.Status.Conditions = withoutModifyConditions(pvc.Status.Conditions)
	}, func(pvc *corev1.PersistentVolumeClaim) bool { return pvc.Status.ModifyVolumeStatus == nil })
	return err
}

// modificationRolledBack drops the ModifyingVolume condition of a claim
// that names no class any more; the last modification's status stays, as
// external-resizer leaves it.
func (s *claimSync) modificationRolledBack(ctx context.Context) error {
	if !hasCondition(s.pvc, corev1.PersistentVolumeClaimVolumeModifyingVolume) {
		return nil
	}
	s.event(corev1.EventTypeNormal, reasonModifyCancelled, "Cancelled modify.")
	_, err := s.modifyStatus(ctx, func(pvc *corev1.PersistentVolumeClaim) {
		pvc.Status.Conditions = slices.DeleteFunc(pvc.Status.Conditions, func(c corev1.PersistentVolumeClaimCondition) bool {
			return c.Type == corev1.PersistentVolumeClaimVolumeModifyingVolume
		})
	}, func(pvc *corev1.PersistentVolumeClaim) bool {
		return !hasCondition(pvc, corev1.PersistentVolumeClaimVolumeModifyingVolume)
	})
	return err
}

// modifyStatus changes the claim's status with change unless done says it
// already holds what change writes; recorded says whether it holds it now.
func (s *claimSync) modifyStatus(ctx context.Context, change func(*corev1.PersistentVolumeClaim), done func(*corev1.PersistentVolumeClaim) bool) (recorded bool, err error) {
	if done(s.pvc) {
		return true, nil
	}
	pvc := s.pvc.DeepCopy()
	change(pvc)
	if equality.Semantic.DeepEqual(pvc.Status, s.pvc.Status) {
		return true, nil
	}
	before := s.pvc
	if err := s.updateClaimStatus(ctx, pvc); err != nil {
		return false, err
	}
	return s.pvc != before, nil // unchanged: a conflict requeued the claim
}

// modificationFailed reports a failed modification and retries it with
// backoff (the claim keeps its status, as external-resizer does for errors
// that may pass).
func (s *claimSync) modificationFailed(format string, args ...interface{}) error {
	msg := fmt.Sprintf(format, args...)
	s.event(corev1.EventTypeWarning, reasonModifyFailed, "%s", msg)
	d := s.c.claimBackoff.failed(s.key)
	s.c.claimQueue.AddAfter(s.key, d)
	s.c.metrics.operation(s.provName, claimClassName(s.pvc), "modify", "failure", 0)
	return retryScheduled{fmt.Errorf("modifying the volume of claim %s: %s (retrying in %v)", s.key, msg, d)}
}

func modifyingCondition(msg string) corev1.PersistentVolumeClaimCondition {
	return corev1.PersistentVolumeClaimCondition{Type: corev1.PersistentVolumeClaimVolumeModifyingVolume, Status: corev1.ConditionTrue,
		LastProbeTime: metav1.Now(), Message: msg}
}

func modifyErrorCondition(reason, msg string, now time.Time) corev1.PersistentVolumeClaimCondition {
	return corev1.PersistentVolumeClaimCondition{Type: corev1.PersistentVolumeClaimVolumeModifyVolumeError, Status: corev1.ConditionTrue,
		LastProbeTime: metav1.NewTime(now), Reason: reason, Message: msg}
}

func hasCondition(pvc *corev1.PersistentVolumeClaim, t corev1.PersistentVolumeClaimConditionType) bool {
	return slices.ContainsFunc(pvc.Status.Conditions, func(c corev1.PersistentVolumeClaimCondition) bool { return c.Type == t })
}

// withoutModifyConditions drops the modification conditions, as
// external-resizer replaces them when a modification starts or ends.
func withoutModifyConditions(list []corev1.PersistentVolumeClaimCondition) []corev1.PersistentVolumeClaimCondition {
	return slices.DeleteFunc(slices.Clone(list), func(c corev1.PersistentVolumeClaimCondition) bool {
		return c.Type == corev1.PersistentVolumeClaimVolumeModifyingVolume || c.Type == corev1.PersistentVolumeClaimVolumeModifyVolumeError
	})
}
