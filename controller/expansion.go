package controller

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/albertofaria/pav/protocol"
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

const (
	reasonResizing         = "Resizing"
	reasonResizeFailed     = "VolumeResizeFailed"
	reasonResizeSuccessful = "VolumeResizeSuccessful"
)

// expand grows the claim's volume if the claim requests more than it has.
func (s *claimSync) expand(ctx context.Context) error {
	pvc := s.pvc
	if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "" || s.p == nil {
		return nil
	}
	pv, err := s.c.volumes.Get(pvc.Spec.VolumeName)
	if err != nil || pv.Spec.CSI == nil || pv.Spec.CSI.Driver != s.p.Name || pv.Annotations[protocol.AnnotationProvisionedBy] != s.p.Name {
		return nil // not a volume PaV provisioned for this provisioner
	}
	want := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	have := pv.Spec.Capacity[corev1.ResourceStorage]
	var pod *corev1.Pod
	for _, p := range s.c.podsBy(indexVolume, protocol.LabelValue(pv.Name)) {
		if phaseOf(p) == protocol.PhaseExpansion {
			pod = p
		}
	}
	if pod != nil {
		return s.expansionPodState(ctx, pv, pod)
	}
	if want.Cmp(have) <= 0 {
		return s.expansionDone(ctx, have)
	}
	req := s.request()
	req.PV = pv
	req.Handle = pv.Spec.CSI.VolumeHandle
	if req.Class == nil {
		// The class may be gone; the PV recorded it.
		if rec, err := requestFromVolume(pv); err == nil {
			req.Class = rec.Class
		}
	}
	if req.Class == nil {
		return s.expansionFailed("StorageClass %q not found", ptrString(pvc.Spec.StorageClassName))
	}
	tmpl, ok, err := s.c.engine.Expansion(ctx, s.p, req)
	if !ok {
		s.event(corev1.EventTypeWarning, reasonResizeFailed, "PavProvisioner %q cannot expand volumes (it has no spec.volumeExpansion); the volume stays at %s", s.p.Name, have.String())
		return nil
	}
	if err != nil {
		return s.expansionFailed("evaluating spec.volumeExpansion of PavProvisioner %q: %v", s.p.Name, err)
	}
	if err := s.resizeStatus(ctx, want, corev1.PersistentVolumeClaimControllerResizeInProgress, true); err != nil {
		return err
	}
	s.event(corev1.EventTypeNormal, reasonResizing, "PavProvisioner %q is expanding volume %s from %s to %s", s.p.Name, pv.Name, have.String(), want.String())
	if tmpl == nil {
		return s.grown(ctx, pv, want)
	}
	claim := &corev1.ObjectReference{Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID}
	squatter, err := s.c.createPod(ctx, protocol.VolumePod(tmpl, s.p.Name, s.c.podDirRoot(), protocol.PhaseExpansion, pv.Name, claim,
		map[string]string{protocol.AnnotationExpansionTarget: want.String()}))
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

// expansionPodState acts on the expansion pod's outcome. A pod that grew the
// volume goes only once the new capacity is recorded: until then it is the
// record that the volume grew (else a crash in between would grow it again).
func (s *claimSync) expansionPodState(ctx context.Context, pv *corev1.PersistentVolume, pod *corev1.Pod) error {
	if pod.DeletionTimestamp != nil && !protocol.Terminated(pod) {
		return nil
	}
	r, ok := s.finishedPod(ctx, pod)
	if !ok {
		return nil
	}
	capacity, problem := expandedCapacity(pod, r)
	if problem != "" {
		if err := s.c.deletePod(ctx, pod); err != nil {
			return err
		}
		return s.expansionFailed("%s", problem)
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
	target, err := resource.ParseQuantity(pod.Annotations[protocol.AnnotationExpansionTarget])
	if err != nil {
		return capacity, fmt.Sprintf("expansion pod %s/%s has no valid %s annotation", pod.Namespace, pod.Name, protocol.AnnotationExpansionTarget)
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
	if err := checkCapacity(capacity, &corev1.PersistentVolumeClaim{}); err != nil {
		return capacity, err.Error()
	}
	return capacity, ""
}

// grown records the volume's new capacity on the PV, then on the claim.
func (s *claimSync) grown(ctx context.Context, pv *corev1.PersistentVolume, capacity resource.Quantity) error {
	if err := checkCapacity(capacity, &corev1.PersistentVolumeClaim{}); err != nil {
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
	s.c.metrics.operation("expand", "success", 0)
	s.c.claimBackoff.succeeded(s.key)
	return s.expansionDone(ctx, capacity)
}

// expansionDone brings the claim's status in line with its volume's
// capacity once no expansion is under way: capacity, no Resizing condition,
// no resize status.
func (s *claimSync) expansionDone(ctx context.Context, capacity resource.Quantity) error {
	st := s.pvc.Status
	cur, ok := st.Capacity[corev1.ResourceStorage]
	if ok && cur.Cmp(capacity) >= 0 && len(st.AllocatedResourceStatuses) == 0 && !hasCondition(s.pvc, corev1.PersistentVolumeClaimResizing) {
		return nil
	}
	pvc := s.pvc.DeepCopy()
	if !ok || cur.Cmp(capacity) < 0 {
		if pvc.Status.Capacity == nil {
			pvc.Status.Capacity = corev1.ResourceList{}
		}
		pvc.Status.Capacity[corev1.ResourceStorage] = capacity
	}
	delete(pvc.Status.AllocatedResourceStatuses, corev1.ResourceStorage)
	if len(pvc.Status.AllocatedResourceStatuses) == 0 {
		pvc.Status.AllocatedResourceStatuses = nil
	}
	pvc.Status.Conditions = withoutCondition(pvc.Status.Conditions, corev1.PersistentVolumeClaimResizing)
	return s.updateClaimStatus(ctx, pvc)
}

// resizeStatus records an expansion to size in the claim's status.
func (s *claimSync) resizeStatus(ctx context.Context, size resource.Quantity, state corev1.ClaimResourceStatus, resizing bool) error {
	pvc := s.pvc.DeepCopy()
	if pvc.Status.AllocatedResources == nil {
		pvc.Status.AllocatedResources = corev1.ResourceList{}
	}
	pvc.Status.AllocatedResources[corev1.ResourceStorage] = size
	if pvc.Status.AllocatedResourceStatuses == nil {
		pvc.Status.AllocatedResourceStatuses = map[corev1.ResourceName]corev1.ClaimResourceStatus{}
	}
	pvc.Status.AllocatedResourceStatuses[corev1.ResourceStorage] = state
	pvc.Status.Conditions = withoutCondition(pvc.Status.Conditions, corev1.PersistentVolumeClaimResizing)
	if resizing {
		pvc.Status.Conditions = append(pvc.Status.Conditions, corev1.PersistentVolumeClaimCondition{
			Type: corev1.PersistentVolumeClaimResizing, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now(),
		})
	}
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
	s.c.metrics.operation("expand", "failure", 0)
	return retryScheduled{fmt.Errorf("expanding claim %s: %s (retrying in %v)", s.key, msg, d)}
}

func hasCondition(pvc *corev1.PersistentVolumeClaim, t corev1.PersistentVolumeClaimConditionType) bool {
	for _, c := range pvc.Status.Conditions {
		if c.Type == t {
			return true
		}
	}
	return false
}

func withoutCondition(list []corev1.PersistentVolumeClaimCondition, t corev1.PersistentVolumeClaimConditionType) []corev1.PersistentVolumeClaimCondition {
	var out []corev1.PersistentVolumeClaimCondition
	for _, c := range list {
		if c.Type != t {
			out = append(out, c)
		}
	}
	return out
}
