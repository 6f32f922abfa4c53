package controller

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/templating"
)

// startCreation runs the creation pod, or creates the volume directly when
// the provisioner has none.
func (s *claimSync) startCreation(ctx context.Context) error {
	if err := s.resolveAttributesClass(ctx); err != nil {
		return err
	}
	cc, err := s.c.engine.Creation(ctx, s.p, s.request())
	if err != nil {
		return s.fail(reasonProvisioningFailed, "evaluating spec.volumeCreation of PavProvisioner %q: %v", s.p.Name, err)
	}
	CompleteCreation(cc, s.request())
	if cc.PodTemplate != nil {
		if done, err := s.finishIfVolumeExists(ctx); done || err != nil {
			return err
		}
		if cc.Handle != nil {
			// Known before the pod runs: no creation pod for a handle that
			// is another volume's.
			owner, err := s.c.handleOwner(ctx, s.p.Name, *cc.Handle, protocol.VolumeName(s.pvc))
			if err != nil {
				return err
			}
			if owner != nil {
				return s.fail(reasonProvisioningFailed, "spec.volumeCreation.handle: %s", handleInUseMessage(*cc.Handle, owner))
			}
		}
		// The PV will be built from what was evaluated now (recorded on the
		// pod), not from a second evaluation after the pod ran.
		recorded, err := cc.Record()
		if err != nil {
			return s.fail(reasonProvisioningFailed, "%v", err)
		}
		if err := s.runPod(ctx, protocol.PhaseCreation, cc.PodTemplate, recorded); err != nil {
			return err
		}
		// The creation pod now records the progress; the validation pod is done with.
		if v := s.pods[protocol.PhaseValidation]; v != nil {
			return s.c.deletePod(ctx, v)
		}
		return nil
	}
	made := decideCreation(creationView{pvc: s.pvc, class: s.class, creation: cc})
	if made.refusal != "" {
		return s.fail(reasonProvisioningFailed, "%s", made.refusal)
	}
	return s.createVolume(ctx, cc, made, false)
}

// CompleteCreation adds to an evaluated volumeCreation what the claim's
// request decides for its PV: the VolumeAttributesClass of the creation
// context and, when the section sets no nodeAffinity, the segment the
// creation is asked to prefer (the selected node's for
// WaitForFirstConsumer). The controller records the result on the creation
// pod (templating.CreationConfig.Record); pav render shows that record.
func CompleteCreation(cc *templating.CreationConfig, req templating.DynamicRequest) {
	if req.VolumeAttributesClass != nil {
		cc.VolumeAttributesClassName = req.VolumeAttributesClass.Name
	}
	if cc.NodeAffinity == nil && req.Topology != nil {
		cc.NodeAffinity = req.Topology.Preferred[0].NodeAffinity()
	}
}

// creationView is what a sync observed of a creation that has ended.
type creationView struct {
	pvc   *corev1.PersistentVolumeClaim
	class *storagev1.StorageClass
	// creation is the attempt's evaluated volumeCreation (recorded on its
	// creation pod); creationErr why it could not be had.
	creation    *templating.CreationConfig
	creationErr error
	// pod is the creation pod, nil if the provisioner has none; outcome is
	// its outcome, done.
	pod     *corev1.Pod
	outcome podOutcome
}

// createdVolume is what a creation made, or why PaV refuses it.
type createdVolume struct {
	handle     string
	capacity   resource.Quantity
	attributes map[string]string
	// refusal says why no PV is made of it ("": one is).
	refusal string
	// revertHandle is the handle the attempt chose, for a deletion pod
	// reverting a refused creation; "" if none, or one no template may see.
	revertHandle string
}

// decideCreation is what a creation made: the handle, the capacity
// (volumeCreation.capacity, else /pav/capacity; positive, at least the
// claim's request, at most its limit) and the attributes, or why PaV
// refuses it (protocol.ClaimVolume, protocol.ChooseAttributes). Pure, so
// that every case is a table row (TestDecideCreation).
func decideCreation(v creationView) createdVolume {
	r, cc := v.outcome, v.creation
	var out createdVolume
	if v.pod != nil {
		if r.handle != nil {
			out.revertHandle = strings.TrimSpace(*r.handle)
		}
		if cc != nil && cc.Handle != nil {
			out.revertHandle = *cc.Handle
		}
		if protocol.CheckHandle(out.revertHandle) != nil {
			// Never into a template: a deletion pod would remove <root>/.. .
			out.revertHandle = ""
		}
		if !r.succeeded {
			out.refusal = fmt.Sprintf("creation pod %s/%s failed: %s", v.pod.Namespace, v.pod.Name, r.message)
			return out
		}
	}
	if v.creationErr != nil {
		out.refusal = v.creationErr.Error()
		return out
	}
	var err error
	out.handle, out.capacity, err = protocol.ClaimVolume(cc.Handle, cc.Capacity, r.handle, r.capacity, v.pod != nil, v.pvc)
	if err != nil {
		out.refusal = err.Error()
		return out
	}
	if out.attributes, err = protocol.ChooseAttributes(r.attributes, r.resultError, v.class); err != nil {
		out.refusal = fmt.Sprintf("creation pod %s/%s: %v", v.pod.Namespace, v.pod.Name, err)
	}
	return out
}

// creationPodState waits for the creation pod, then makes the PV of what it
// created, or reverts it.
func (s *claimSync) creationPodState(ctx context.Context, pod *corev1.Pod) error {
	if v := s.pods[protocol.PhaseValidation]; v != nil {
		// Left over from a crash between creating this pod and deleting that one.
		if err := s.c.deletePod(ctx, v); err != nil {
			return err
		}
	}
	r, ok := s.finishedPod(ctx, pod)
	if !ok {
		return nil
	}
	cc, err := s.recordedCreation(ctx, pod)
	made := decideCreation(creationView{pvc: s.pvc, class: s.class, creation: cc, creationErr: err, pod: pod, outcome: r})
	if made.refusal != "" {
		return s.creationFailed(ctx, made.refusal, made.revertHandle)
	}
	return s.createVolume(ctx, cc, made, true)
}

// creationFailed reports a failed creation and, as the spec says, runs the
// deletion pod (if any) to revert whatever the creation pod did.
func (s *claimSync) creationFailed(ctx context.Context, msg, handle string) error {
	if handle != "" {
		owner, err := s.c.handleOwner(ctx, s.p.Name, handle, protocol.VolumeName(s.pvc))
		if err != nil {
			return err
		}
		if owner != nil {
			return s.handleInUse(ctx, msg+"; "+handleInUseMessage(handle, owner))
		}
	}
	s.event(corev1.EventTypeWarning, reasonProvisioningFailed, "%s", msg)
	req := s.request()
	req.Handle = handle
	tmpl, err := s.c.engine.Deletion(ctx, s.p, req)
	if err != nil {
		return s.fail(reasonCleanupFailed, "evaluating spec.volumeDeletion of PavProvisioner %q to clean up after the failed creation: %v", s.p.Name, err)
	}
	if tmpl == nil {
		if err := s.deleteAllPods(ctx); err != nil {
			return err
		}
		return s.retryLater(msg)
	}
	if err := s.runPod(ctx, protocol.PhaseDeletion, tmpl, nil); err != nil {
		return err
	}
	return nil
}

// handleInUse ends an attempt whose creation pod ran for a handle that is
// another PV's, without the deletion pod that reverts a failed creation:
// given that handle, it would delete the other PV's volume. Whatever the
// creation pod made is left as it is; the next attempt starts afresh.
func (s *claimSync) handleInUse(ctx context.Context, msg string) error {
	msg += "; no deletion pod runs to revert the creation (it would delete that volume): anything the creation pod made is left for an admin to remove"
	s.event(corev1.EventTypeWarning, reasonProvisioningFailed, "%s", msg)
	if err := s.deleteAllPods(ctx); err != nil {
		return err
	}
	return s.retryLater(msg)
}

// recordedCreation is the volumeCreation the creation pod's attempt
// evaluated, recorded on the pod; a pod without the record (created by an
// older PaV) gets a fresh evaluation.
func (s *claimSync) recordedCreation(ctx context.Context, pod *corev1.Pod) (*templating.CreationConfig, error) {
	if _, ok := pod.Annotations[protocol.AnnotationCreationConfig]; !ok {
		cc, err := s.c.engine.Creation(ctx, s.p, s.request())
		if err != nil {
			return nil, fmt.Errorf("evaluating spec.volumeCreation of PavProvisioner %q: %w", s.p.Name, err)
		}
		return cc, nil
	}
	return templating.RecordedCreation(pod)
}

// afterFailedCreation waits for the deletion pod that reverts a failed
// creation, then ends the attempt.
func (s *claimSync) afterFailedCreation(ctx context.Context, pod *corev1.Pod) error {
	r, ok := s.finishedPod(ctx, pod)
	if !ok {
		return nil
	}
	if !r.succeeded {
		s.event(corev1.EventTypeWarning, reasonCleanupFailed, "deletion pod %s/%s, run to revert the failed creation, failed too: %s", pod.Namespace, pod.Name, r.message)
	}
	if err := s.deleteAllPods(ctx); err != nil {
		return err
	}
	return s.retryLater("creation failed")
}

// createVolume makes the PV of what the creation made.
func (s *claimSync) createVolume(ctx context.Context, cc *templating.CreationConfig, made createdVolume, hadPod bool) error {
	handle, capacity := made.handle, made.capacity
	pv, err := protocol.BuildVolume(protocol.VolumeSpec{
		Provisioner:  s.p.Name,
		PVC:          s.pvc,
		Class:        s.class,
		Handle:       handle,
		Capacity:     capacity,
		NodeAffinity: cc.NodeAffinity,
		SelectedNode: s.node,
		Attributes:   made.attributes,

		VolumeAttributesClassName: cc.VolumeAttributesClassName,
	})
	if err != nil {
		return s.fail(reasonProvisioningFailed, "building the PersistentVolume: %v", err)
	}
	owner, err := s.createUniqueVolume(ctx, pv)
	switch {
	case owner != nil && hadPod:
		return s.handleInUse(ctx, handleInUseMessage(handle, owner))
	case owner != nil:
		return s.fail(reasonProvisioningFailed, "%s", handleInUseMessage(handle, owner))
	case apierrors.IsAlreadyExists(err):
		existing, gerr := s.c.kube.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		if gerr != nil {
			return gerr
		}
		if existing.Spec.ClaimRef == nil || existing.Spec.ClaimRef.UID != s.pvc.UID {
			return s.fail(reasonProvisioningFailed, "PersistentVolume %s already exists and is not bound to this claim", pv.Name)
		}
	case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		// The volume exists but cannot be represented (e.g. a bad handle): undo it.
		msg := fmt.Sprintf("the API server rejected PersistentVolume %s: %v", pv.Name, err)
		if hadPod {
			return s.creationFailed(ctx, msg, handle)
		}
		return s.fail(reasonProvisioningFailed, "%s", msg)
	case err != nil:
		// Transient: the creation pod stays as the record of the created
		// volume, so the next attempt only retries the PV.
		return s.fail(reasonProvisioningFailed, "creating PersistentVolume %s: %v", pv.Name, err)
	default:
		klog.InfoS("Provisioned volume", "claim", s.key, "volume", pv.Name, "handle", handle, "capacity", capacity.String())
		s.event(corev1.EventTypeNormal, reasonProvisioningSucceeded, "Successfully provisioned volume %s (handle %q, capacity %s)", pv.Name, handle, capacity.String())
		if s.p.Spec.StorageCapacity != nil {
			s.c.refreshCapacity(s.p.Name)
		}
		s.c.metrics.operation(s.provName, claimClassName(s.pvc), "provision", "success", s.c.claimBackoff.now().Sub(s.provisionableSince()))
	}
	return s.finish(ctx)
}

// createUniqueVolume creates pv unless another PV of its driver has its
// handle (owner, and nothing created).
func (s *claimSync) createUniqueVolume(ctx context.Context, pv *corev1.PersistentVolume) (owner *corev1.PersistentVolume, err error) {
	key := handleKey(pv.Spec.CSI.Driver, pv.Spec.CSI.VolumeHandle)
	defer s.c.handles.lock(key)()
	if owner, err := s.c.handleOwner(ctx, pv.Spec.CSI.Driver, pv.Spec.CSI.VolumeHandle, pv.Name); err != nil || owner != nil {
		return owner, err
	}
	if _, err := s.c.kube.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	s.c.handles.remember(key, pv.Name)
	return nil, nil
}
