package controller

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/templating"
)

// Volume expansion (a PaV-Go addition), as external-resizer does it for CSI
// drivers: when a bound claim requests more than its volume's capacity, the
// controller records the new size in the claim's status
// (allocatedResources, allocatedResourceStatuses ControllerResizeInProgress,
// condition Resizing), runs the provisioner's expansion pod, then sets the
// PV's capacity and the claim's status.capacity. PaV's volumes need no
// node-side step (kubelet's NodeExpandVolume): a staging pod serves a
// directory or a block device whose new size the expansion pod made visible.
// A failure is an Event and is retried with backoff; the user may lower the
// request again (recovery from a failed expansion), and the next attempt
// grows to that size instead.
//
// A size the provisioner does not allow (the rules a new claim of that size
// meets: the claim's limit, volumeValidation's minCapacity and maxCapacity),
// a provisioner without volumeExpansion, and a size the expansion pod
// reports infeasible (/pav/infeasible) are not retried: the claim gets
// external-resizer's status for an infeasible resize
// (ControllerResizeInfeasible, condition ControllerResizeError) and a
// VolumeResizeFailed Event. The user recovers by lowering the request.

const (
	reasonResizing         = "Resizing"
	reasonResizeFailed     = "VolumeResizeFailed"
	reasonResizeSuccessful = "VolumeResizeSuccessful"
)

// Reasons of the ControllerResizeError condition of an infeasible expansion:
// what makes it so, and so what may end it.
const (
	// infeasibleNotAllowed: the provisioner (or the claim's limit) does not
	// allow the size. Judged again at every sync, so a provisioner changed
	// to allow it carries on.
	infeasibleNotAllowed = "ExpansionNotAllowed"
	// infeasibleByPod: the expansion pod wrote /pav/infeasible. That size is
	// not tried again; another request is.
	infeasibleByPod = "ExpansionPodInfeasible"
)

// expansionStep is what a bound claim's volume needs next.
type expansionStep int

const (
	expandNothing    expansionStep = iota // the expansion pod found this size infeasible: wait for another request
	expandPodState                        // an expansion pod exists: act on its outcome
	expandDone                            // the volume has what the claim requests: bring the claim's status in line
	expandInfeasible                      // the size is not allowed: record it, and say why
	expandStart                           // start an expansion
)

// expansionView is what an expansion sync observed of a bound claim.
type expansionView struct {
	pvc        *corev1.PersistentVolumeClaim
	want, have resource.Quantity // the claim's request, the volume's capacity
	pod        bool              // an expansion pod exists
	// notAllowed says why the provisioner does not allow growing the
	// volume to want; only judged without a pod and when want > have.
	notAllowed string
}

// decideExpansion is the expansion protocol for one bound claim: pure, so
// that every case is a table row (TestDecideExpansion). message explains
// expandInfeasible.
func decideExpansion(v expansionView) (step expansionStep, message string) {
	switch {
	case v.pod:
		return expandPodState, ""
	case v.want.Cmp(v.have) <= 0:
		return expandDone, ""
	case v.notAllowed != "":
		return expandInfeasible, v.notAllowed
	}
	if c := infeasibleRecord(v.pvc, v.want); c != nil && c.Reason == infeasibleByPod {
		return expandNothing, ""
	}
	return expandStart, ""
}

// infeasibleRecord is the ControllerResizeError condition of a claim whose
// status records growing to size as infeasible; nil if it does not.
func infeasibleRecord(pvc *corev1.PersistentVolumeClaim, size resource.Quantity) *corev1.PersistentVolumeClaimCondition {
	if pvc.Status.AllocatedResourceStatuses[corev1.ResourceStorage] != corev1.PersistentVolumeClaimControllerResizeInfeasible {
		return nil
	}
	if a, ok := pvc.Status.AllocatedResources[corev1.ResourceStorage]; !ok || a.Cmp(size) != 0 {
		return nil
	}
	for i, c := range pvc.Status.Conditions {
		if c.Type == corev1.PersistentVolumeClaimControllerResizeError {
			return &pvc.Status.Conditions[i]
		}
	}
	return nil
}

// expand grows the claim's volume if the claim requests more than it has.
func (s *claimSync) expand(ctx context.Context) error {
	pvc := s.pvc
	pv, static := s.boundVolume()
	if pv == nil {
		return nil
	}
	want := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	have := pv.Spec.Capacity[corev1.ResourceStorage]
	var pod *corev1.Pod
	for _, p := range s.c.podsBy(indexVolume, protocol.LabelValue(pv.Name)) {
		if phaseOf(p) == protocol.PhaseExpansion {
			pod = p
		}
	}
	v := expansionView{pvc: pvc, want: want, have: have, pod: pod != nil}
	var tmpl *corev1.PodTemplateSpec
	switch {
	case pod == nil && want.Cmp(have) > 0 && static:
		v.notAllowed = fmt.Sprintf("cannot expand volume %s to %s: it was not provisioned by PaV (a PersistentVolume made for an existing volume of PavProvisioner %q), and PaV expands only the volumes it provisioned", pv.Name, want.String(), s.p.Name)
	case pod == nil && want.Cmp(have) > 0:
		req, ok := s.volumeRequest(pv)
		if !ok {
			return s.expansionFailed("StorageClass %q not found", ptrString(pvc.Spec.StorageClassName))
		}
		var err error
		if tmpl, v.notAllowed, err = s.expansionPlan(ctx, req, want); err != nil {
			return s.expansionFailed("%v", err)
		}
	}
	step, msg := decideExpansion(v)
	switch step {
	case expandNothing:
		return nil
	case expandPodState:
		return s.expansionPodState(ctx, pv, pod)
	case expandDone:
		return s.expansionDone(ctx, have)
	case expandInfeasible:
		_, err := s.expansionInfeasible(ctx, want, infeasibleNotAllowed, msg)
		return err
	}
	if err := s.resizeStatus(ctx, want, corev1.PersistentVolumeClaimControllerResizeInProgress, corev1.PersistentVolumeClaimCondition{
		Type: corev1.PersistentVolumeClaimResizing, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now(),
	}); err != nil {
		return err
	}
	s.event(corev1.EventTypeNormal, reasonResizing, "PavProvisioner %q is expanding volume %s from %s to %s", s.p.Name, pv.Name, have.String(), want.String())
	if tmpl == nil {
		return s.grown(ctx, pv, want)
	}
	claim := &corev1.ObjectReference{Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID}
	squatter, err := s.c.createPod(ctx, protocol.VolumePod(protocol.PodBase{Template: tmpl, Provisioner: s.p.Name, Root: s.c.podDirRoot()},
		protocol.VolumePodSpec{Phase: protocol.PhaseExpansion, PVName: pv.Name, Claim: claim,
			Extra: map[string]string{protocol.AnnotationExpansionTarget: want.String()}}))
	if squatter != nil {
		s.event(corev1.EventTypeWarning, reasonPodNameTaken, "%s", squatterMessage(squatter, protocol.PhaseExpansion))
	}
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		return s.expansionFailed("%v", err)
	}
	return nil
}

// expansionPlan evaluates what growing the claim's volume to want takes:
// the expansion pod's template (nil: no pod, the size is only recorded), or
// notAllowed, why the provisioner does not allow it. The size meets the
// rules a new claim asking for it would: protocol.CheckClaimCapacity (at most an int64
// of bytes, not above the claim's limit) and the provisioner's
// volumeValidation (minCapacity, maxCapacity, modes), whose pod is for new
// volumes and does not run. err is a failure to evaluate, retried.
func (s *claimSync) expansionPlan(ctx context.Context, req templating.DynamicRequest, want resource.Quantity) (tmpl *corev1.PodTemplateSpec, notAllowed string, err error) {
	if err := protocol.CheckClaimCapacity(want, s.pvc); err != nil {
		return nil, fmt.Sprintf("cannot expand volume %s to %s: %v", req.PV.Name, want.String(), err), nil
	}
	vc, err := s.c.engine.Validation(ctx, s.p, req)
	if err != nil {
		return nil, "", fmt.Errorf("evaluating spec.volumeValidation of PavProvisioner %q: %w", s.p.Name, err)
	}
	if vc.Unsatisfied != nil {
		return nil, fmt.Sprintf("PavProvisioner %q does not allow expanding volume %s to %s: %v", s.p.Name, req.PV.Name, want.String(), vc.Unsatisfied), nil
	}
	tmpl, ok, err := s.c.engine.Expansion(ctx, s.p, req)
	if !ok {
		return nil, fmt.Sprintf("PavProvisioner %q cannot expand volumes (it has no spec.volumeExpansion); volume %s stays at %s", s.p.Name, req.PV.Name, req.PV.Spec.Capacity.Storage().String()), nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("evaluating spec.volumeExpansion of PavProvisioner %q: %w", s.p.Name, err)
	}
	return tmpl, "", nil
}

// expansionInfeasible records that growing the volume to size cannot
// succeed, as external-resizer does for an infeasible resize:
// allocatedResources size, allocatedResourceStatuses
// ControllerResizeInfeasible, condition ControllerResizeError (reason: one
// of the infeasible* constants, message msg), and a VolumeResizeFailed
// Event. Nothing is retried. recorded is false while the claim's status does
// not hold it yet (a conflict requeued the claim).
func (s *claimSync) expansionInfeasible(ctx context.Context, size resource.Quantity, reason, msg string) (recorded bool, err error) {
	if c := infeasibleRecord(s.pvc, size); c != nil && c.Reason == reason && c.Message == msg {
		return true, nil
	}
	// The Event before the status: once the status holds it, nothing reports it again.
	s.event(corev1.EventTypeWarning, reasonResizeFailed, "%s", msg)
	s.c.metrics.operation(s.provName, claimClassName(s.pvc), "expand", "infeasible", 0)
	s.c.claimBackoff.succeeded(s.key) // nothing to retry: a new request is handled at once
	err = s.resizeStatus(ctx, size, corev1.PersistentVolumeClaimControllerResizeInfeasible, corev1.PersistentVolumeClaimCondition{
		Type: corev1.PersistentVolumeClaimControllerResizeError, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now(),
		Reason: reason, Message: msg,
	})
	if err != nil {
		return false, err
	}
	c := infeasibleRecord(s.pvc, size)
	return c != nil && c.Reason == reason && c.Message == msg, nil
}

// expansionPodState acts on the expansion pod's outcome. A pod that grew the
// volume, or found it cannot, goes only once the claim's status records
// that: until then it is the record (else a crash in between would run it
// again).
func (s *claimSync) expansionPodState(ctx context.Context, pv *corev1.PersistentVolume, pod *corev1.Pod) error {
	if pod.DeletionTimestamp != nil && !protocol.Terminated(pod) {
		return nil
	}
	r, ok := s.finishedPod(ctx, pod)
	if !ok {
		return nil
	}
	if size, msg, ok := podFoundInfeasible(pod, r); ok {
		recorded, err := s.expansionInfeasible(ctx, size, infeasibleByPod, msg)
		if err != nil || !recorded {
			return err
		}
		return s.c.deletePod(ctx, pod)
	}
	capacity, problem := expandedCapacity(pod, r)
	if problem != "" {
		return s.c.podFailed(ctx, pod, problem, func(msg string) error { return s.expansionFailed("%s", msg) })
	}
	if err := s.grown(ctx, pv, capacity); err != nil {
		return err
	}
	return s.c.deletePod(ctx, pod)
}

// expandedCapacity is the capacity a finished expansion pod gave the volume:
// what it wrote to /pav/capacity, else the size it was asked for; problem
// says why the expansion failed instead.
func expandedCapacity(pod *corev1.Pod, r podOutcome) (capacity resource.Quantity, problem string) {
	if !r.succeeded {
		return capacity, fmt.Sprintf("expansion pod %s/%s failed: %s", pod.Namespace, pod.Name, r.message)
	}
	target, err := expansionTarget(pod)
	if err != nil {
		return capacity, err.Error()
	}
	if r.capacity == nil {
		return target, ""
	}
	v := strings.TrimSpace(*r.capacity)
	if capacity, err = resource.ParseQuantity(v); err != nil {
		return capacity, fmt.Sprintf("the expansion pod wrote %q to /pav/%s, which is not a capacity: %v", v, protocol.FileCapacity, err)
	}
	if capacity.Cmp(target) < 0 {
		return capacity, fmt.Sprintf("the expansion pod grew the volume to %s, less than the %s requested", capacity.String(), target.String())
	}
	if err := protocol.CheckClaimCapacity(capacity, &corev1.PersistentVolumeClaim{}); err != nil {
		return capacity, err.Error()
	}
	return capacity, ""
}

// podFoundInfeasible is the size a finished expansion pod found it can
// never grow the volume to, and why: it wrote /pav/infeasible (whatever its
// exit status: the file says the volume was left as it was). ok is false if
// it did not.
func podFoundInfeasible(pod *corev1.Pod, r podOutcome) (size resource.Quantity, msg string, ok bool) {
	if r.infeasible == nil {
		return size, "", false
	}
	size, err := expansionTarget(pod)
	if err != nil {
		return size, "", false // expandedCapacity reports it
	}
	msg = fmt.Sprintf("expansion pod %s/%s reports that volume %s cannot grow to %s", pod.Namespace, pod.Name, pod.Labels[protocol.LabelVolume], size.String())
	if why := strings.TrimSpace(*r.infeasible); why != "" {
		msg += ": " + why
	}
	return size, msg, true
}

// expansionTarget is the size an expansion pod was asked to grow the volume to.
func expansionTarget(pod *corev1.Pod) (resource.Quantity, error) {
	q, err := resource.ParseQuantity(pod.Annotations[protocol.AnnotationExpansionTarget])
	if err != nil {
		return q, fmt.Errorf("expansion pod %s/%s has no valid %s annotation", pod.Namespace, pod.Name, protocol.AnnotationExpansionTarget)
	}
	return q, nil
}

// grown records the volume's new capacity on the PV, then on the claim.
func (s *claimSync) grown(ctx context.Context, pv *corev1.PersistentVolume, capacity resource.Quantity) error {
	if err := protocol.CheckClaimCapacity(capacity, &corev1.PersistentVolumeClaim{}); err != nil {
		return s.expansionFailed("%v", err)
	}
	cur := pv.DeepCopy()
	if cur.Spec.Capacity == nil {
		cur.Spec.Capacity = corev1.ResourceList{}
	}
	cur.Spec.Capacity[corev1.ResourceStorage] = capacity
	if _, err := s.c.kube.CoreV1().PersistentVolumes().Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("recording the new capacity on PersistentVolume %s: %w", pv.Name, err)
	}
	s.event(corev1.EventTypeNormal, reasonResizeSuccessful, "volume %s expanded to %s", pv.Name, capacity.String())
	klog.V(2).InfoS("Expanded volume", "claim", s.key, "volume", pv.Name, "capacity", capacity.String())
	s.c.metrics.operation(s.provName, claimClassName(s.pvc), "expand", "success", 0)
	s.c.claimBackoff.succeeded(s.key)
	return s.expansionDone(ctx, capacity)
}

// expansionDone brings the claim's status in line with its volume's
// capacity once no expansion is under way: capacity, no resize status or
// condition, and allocatedResources (which quota counts) no larger than the
// volume, should it still hold a size found infeasible.
func (s *claimSync) expansionDone(ctx context.Context, capacity resource.Quantity) error {
	pvc := s.pvc.DeepCopy()
	if cur, ok := pvc.Status.Capacity[corev1.ResourceStorage]; !ok || cur.Cmp(capacity) < 0 {
		if pvc.Status.Capacity == nil {
			pvc.Status.Capacity = corev1.ResourceList{}
		}
		pvc.Status.Capacity[corev1.ResourceStorage] = capacity
	}
	if a, ok := pvc.Status.AllocatedResources[corev1.ResourceStorage]; ok && a.Cmp(capacity) > 0 {
		pvc.Status.AllocatedResources[corev1.ResourceStorage] = capacity
	}
	delete(pvc.Status.AllocatedResourceStatuses, corev1.ResourceStorage)
	pvc.Status.Conditions = withoutResizeConditions(pvc.Status.Conditions)
	if equality.Semantic.DeepEqual(pvc.Status, s.pvc.Status) {
		return nil
	}
	if len(pvc.Status.AllocatedResourceStatuses) == 0 {
		pvc.Status.AllocatedResourceStatuses = nil
	}
	return s.updateClaimStatus(ctx, pvc)
}

// resizeStatus records an expansion to size in the claim's status: its
// state, and cond as its one resize condition.
func (s *claimSync) resizeStatus(ctx context.Context, size resource.Quantity, state corev1.ClaimResourceStatus, cond corev1.PersistentVolumeClaimCondition) error {
	pvc := s.pvc.DeepCopy()
	if pvc.Status.AllocatedResources == nil {
		pvc.Status.AllocatedResources = corev1.ResourceList{}
	}
	pvc.Status.AllocatedResources[corev1.ResourceStorage] = size
	if pvc.Status.AllocatedResourceStatuses == nil {
		pvc.Status.AllocatedResourceStatuses = map[corev1.ResourceName]corev1.ClaimResourceStatus{}
	}
	pvc.Status.AllocatedResourceStatuses[corev1.ResourceStorage] = state
	pvc.Status.Conditions = append(withoutResizeConditions(pvc.Status.Conditions), cond)
	return s.updateClaimStatus(ctx, pvc)
}

func (s *claimSync) updateClaimStatus(ctx context.Context, pvc *corev1.PersistentVolumeClaim) error {
	updated, err := s.c.kube.CoreV1().PersistentVolumeClaims(pvc.Namespace).UpdateStatus(ctx, pvc, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		s.c.claimQueue.Add(s.key) // a newer claim is on its way
		return nil
	}
	if err != nil {
		return fmt.Errorf("updating the status of claim %s: %w", s.key, err)
	}
	s.pvc = updated
	return nil
}

// expansionFailed reports a failed expansion and retries it with backoff
// (the claim keeps ControllerResizeInProgress, as external-resizer does for
// errors that may pass).
func (s *claimSync) expansionFailed(format string, args ...interface{}) error {
	msg := fmt.Sprintf(format, args...)
	s.event(corev1.EventTypeWarning, reasonResizeFailed, "%s", msg)
	d := s.c.claimBackoff.failed(s.key)
	s.c.claimQueue.AddAfter(s.key, d)
	s.c.metrics.operation(s.provName, claimClassName(s.pvc), "expand", "failure", 0)
	return retryScheduled{fmt.Errorf("expanding claim %s: %s (retrying in %v)", s.key, msg, d)}
}

// withoutResizeConditions drops the resize conditions PaV sets, as
// external-resizer replaces them when a resize starts or ends.
func withoutResizeConditions(list []corev1.PersistentVolumeClaimCondition) []corev1.PersistentVolumeClaimCondition {
	var out []corev1.PersistentVolumeClaimCondition
	for _, c := range list {
		if c.Type != corev1.PersistentVolumeClaimResizing && c.Type != corev1.PersistentVolumeClaimControllerResizeError {
			out = append(out, c)
		}
	}
	return out
}
