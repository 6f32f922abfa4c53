// CSI inline ephemeral volumes: created before their staging and deleted
// after their unstaging, by the node plugin of the pod's node.

package nodeagent

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/albertofaria/pav/crds/v1alpha1"
	pavcsi "github.com/albertofaria/pav/csi"
	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/templating"
)

// inlineVolume makes sure the inline volume kubelet publishes exists and
// returns the PersistentVolume staging sees for it (protocol.InlinePV). For
// a provisioner with provisioningModes Dynamic it evaluates volumeCreation
// and runs its creation pod on this node, once: the pod, kept with its
// collected results until the volume is deleted, is the volume's record.
// A failed creation is reverted (deleteInline) before the error goes back
// to kubelet, which calls again.
func (s *Stager) inlineVolume(ctx context.Context, driver, volumeID string, vctx map[string]string) (*corev1.PersistentVolume, error) {
	p, err := s.provisioner(driver)
	if err != nil {
		return nil, err
	}
	if !p.Spec.InlineVolumes {
		return nil, status.Errorf(codes.FailedPrecondition, "PavProvisioner %s does not serve inline volumes (spec.inlineVolumes is not true)", driver)
	}
	v := protocol.InlineVolumeOf(volumeID, vctx)
	if v.PodUID == "" || v.PodNamespace == "" {
		return nil, status.Errorf(codes.InvalidArgument, "the request for inline volume %s does not name its pod (the CSIDriver's podInfoOnMount)", volumeID)
	}
	if !p.HasMode(v1alpha1.Dynamic) {
		return inlinePV(driver, v, nil, nil)
	}
	id := protocol.InlineID(volumeID)
	pod, err := s.findPod(ctx, protocol.PhaseInlineCreation, id)
	if err != nil {
		return nil, err
	}
	if pod == nil {
		if p.DeletionTimestamp != nil {
			return nil, status.Errorf(codes.FailedPrecondition, "PavProvisioner %s is being deleted: no new volume is created", driver)
		}
		cfg, err := s.engine.Creation(ctx, p, templating.DynamicRequest{Inline: &v, SelectedNodeName: s.node})
		if err != nil {
			return nil, status.Errorf(codes.FailedPrecondition, "evaluating spec.volumeCreation of PavProvisioner %s for the inline volume of pod %s/%s: %v",
				driver, v.PodNamespace, v.PodName, err)
		}
		if cfg.PodTemplate == nil {
			return inlinePV(driver, v, cfg.Capacity, nil) // a volume is just a name: nothing to record
		}
		if pod, err = s.createInlinePod(ctx, p.Name, protocol.PhaseInlineCreation, cfg.PodTemplate, v, cfg); err != nil {
			return nil, err
		}
		klog.FromContext(ctx).V(2).Info("Created inline volume's creation pod", "pod", klog.KObj(pod), "volume", volumeID)
	}
	if pod.DeletionTimestamp != nil {
		return nil, status.Errorf(codes.Unavailable, "inline volume %s is being deleted (creation pod %s/%s); kubelet will call again", volumeID, pod.Namespace, pod.Name)
	}
	last, err := s.waitCollected(ctx, pod)
	if err != nil {
		return nil, err
	}
	problem := ""
	var attrs map[string]string
	if !protocol.Succeeded(last) {
		problem = fmt.Sprintf("creation pod %s/%s failed: %s", last.Namespace, last.Name, protocol.FailureMessage(last, last.Annotations[protocol.AnnotationResultError], nil))
	} else if raw, ok := last.Annotations[protocol.AnnotationResultVolumeAttributes]; ok {
		if attrs, err = protocol.ParseVolumeAttributes(raw, nil); err != nil {
			problem = fmt.Sprintf("creation pod %s/%s wrote an unusable /pav/volume-attributes: %v", last.Namespace, last.Name, err)
		}
	}
	capacity, err := inlineCapacity(last)
	if err != nil && problem == "" {
		problem = fmt.Sprintf("creation pod %s/%s: %v", last.Namespace, last.Name, err)
	}
	if problem != "" {
		if err := s.deleteInline(ctx, driver, volumeID); err != nil {
			problem += fmt.Sprintf("; reverting it did not complete yet: %v", err)
		}
		return nil, status.Error(codes.Internal, problem)
	}
	return inlinePV(driver, v, capacity, attrs)
}

func inlinePV(driver string, v protocol.InlineVolume, capacity *resource.Quantity, attrs map[string]string) (*corev1.PersistentVolume, error) {
	q := resource.Quantity{}
	if capacity != nil {
		q = *capacity
	}
	pv, err := protocol.InlinePV(driver, v, q, attrs)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	return pv, nil
}

// inlineCapacity is what a finished creation pod reported in
// /pav/capacity, else the evaluated volumeCreation.capacity it recorded,
// else nothing.
func inlineCapacity(pod *corev1.Pod) (*resource.Quantity, error) {
	if raw, ok := pod.Annotations[protocol.AnnotationResultCapacity]; ok {
		q, err := resource.ParseQuantity(strings.TrimSpace(raw))
		if err != nil {
			return nil, fmt.Errorf("/pav/capacity holds %q, not a quantity", raw)
		}
		return &q, nil
	}
	var cfg templating.CreationConfig
	if err := json.Unmarshal([]byte(pod.Annotations[protocol.AnnotationCreationConfig]), &cfg); err == nil {
		return cfg.Capacity, nil
	}
	return nil, nil
}

// createInlinePod creates an inline volume's creation or deletion pod on
// this node (the creation pod records the evaluated volumeCreation, cfg).
func (s *Stager) createInlinePod(ctx context.Context, provisioner string, phase protocol.Phase, tmpl *corev1.PodTemplateSpec, v protocol.InlineVolume, cfg *templating.CreationConfig) (*corev1.Pod, error) {
	built, err := protocol.InlinePod(tmpl, provisioner, s.root, s.node, phase, v)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	if cfg != nil {
		recorded, err := json.Marshal(cfg)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "recording the evaluated spec.volumeCreation: %v", err)
		}
		built.Annotations[protocol.AnnotationCreationConfig] = string(recorded)
	}
	dir, err := podHostDir(built, s.root)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, status.Errorf(codes.Internal, "creating %s: %v", dir, err)
	}
	return s.createPod(ctx, built, dir)
}

// waitCollected waits until a run-to-completion inline pod terminated and
// the collector copied its /pav results onto it.
func (s *Stager) waitCollected(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	waitCtx, cancel := beforeDeadline(ctx, 3*time.Second)
	defer cancel()
	last, err := s.wait(waitCtx, pod, "", func(p *corev1.Pod) bool {
		return p == nil || protocol.Terminated(p) && p.Annotations[protocol.AnnotationResultsCollected] == "true"
	})
	switch {
	case err != nil:
		return nil, status.Errorf(codes.DeadlineExceeded, "%s pod %s/%s is not done yet (kubelet will call again): %s",
			pod.Labels[protocol.LabelPhase], pod.Namespace, pod.Name, describePod(last))
	case last == nil:
		return nil, status.Errorf(codes.Aborted, "%s pod %s/%s was removed before it completed", pod.Labels[protocol.LabelPhase], pod.Namespace, pod.Name)
	}
	return last, nil
}

// deleteInline deletes an inline volume once it is unstaged (or its
// creation failed or was abandoned): it stops a creation pod still running,
// runs the deletion pod (volumeDeletion, with pv and handle), then removes
// both pods, the creation pod last, since it is the record that the volume
// exists. Every step can be repeated. A volume without a creation pod
// (none ran, or it is deleted already) has nothing to delete.
// It looks in the pod cache only (Unpublish calls it for every volume): a
// creation pod is never this young.
func (s *Stager) deleteInline(ctx context.Context, driver, volumeID string) error {
	id := protocol.InlineID(volumeID)
	objs, err := s.pods.ByIndex(podsByStaging, string(protocol.PhaseInlineCreation)+"/"+id)
	if err != nil {
		return status.Errorf(codes.Internal, "%v", err)
	}
	if len(objs) == 0 {
		return nil
	}
	created := objs[0].(*corev1.Pod)
	v, ok := protocol.InlineOf(created)
	if !ok || v.VolumeID != volumeID {
		return status.Errorf(codes.Internal, "creation pod %s/%s does not record inline volume %s", created.Namespace, created.Name, volumeID)
	}
	logger := klog.FromContext(ctx).WithValues("driver", driver, "volume", volumeID)
	if !protocol.Terminated(created) {
		// Abandoned mid-creation: stop it (its finalizer keeps the record).
		if created.DeletionTimestamp == nil {
			if err := s.kube.CoreV1().Pods(created.Namespace).Delete(ctx, created.Name, metav1.DeleteOptions{}); err != nil {
				return status.Errorf(codes.Unavailable, "stopping creation pod %s/%s: %v", created.Namespace, created.Name, err)
			}
		}
		waitCtx, cancel := beforeDeadline(ctx, 2*time.Second)
		defer cancel()
		if last, err := s.wait(waitCtx, created, "", func(p *corev1.Pod) bool { return p == nil || stopped(p) }); err != nil {
			return status.Errorf(codes.DeadlineExceeded, "waiting for creation pod %s/%s to stop: %s", created.Namespace, created.Name, describePod(last))
		}
	}
	p, err := s.provisioners.Get(driver)
	if apierrors.IsNotFound(err) {
		// Nothing can evaluate its deletion any more: let the record go.
		logger.Info("PavProvisioner is gone: the inline volume is forgotten without its deletion pod")
		return s.releasePod(ctx, created)
	}
	if err != nil {
		return status.Errorf(codes.Internal, "looking up PavProvisioner %s: %v", driver, err)
	}
	pv, err := inlinePVOf(driver, v, created)
	if err != nil {
		return err
	}
	tmpl, err := s.engine.Deletion(ctx, p, templating.DynamicRequest{Inline: &v, SelectedNodeName: s.node, PV: pv, Handle: volumeID})
	if err != nil {
		return status.Errorf(codes.FailedPrecondition, "evaluating spec.volumeDeletion of PavProvisioner %s for the inline volume of pod %s/%s: %v",
			driver, v.PodNamespace, v.PodName, err)
	}
	if tmpl != nil {
		deletion, err := s.findPod(ctx, protocol.PhaseInlineDeletion, id)
		if err != nil {
			return err
		}
		if deletion == nil {
			if deletion, err = s.createInlinePod(ctx, p.Name, protocol.PhaseInlineDeletion, tmpl, v, nil); err != nil {
				return err
			}
			logger.V(2).Info("Created inline volume's deletion pod", "pod", klog.KObj(deletion))
		}
		last, err := s.waitCollected(ctx, deletion)
		if err != nil {
			return err
		}
		if !protocol.Succeeded(last) {
			msg := protocol.FailureMessage(last, last.Annotations[protocol.AnnotationResultError], nil)
			// Removed, so that the next call (kubelet retries) runs a new one.
			if err := s.releasePod(ctx, last); err != nil {
				logger.Error(err, "Deleting failed deletion pod")
			}
			return status.Errorf(codes.Internal, "deletion pod %s/%s of inline volume %s failed: %s", last.Namespace, last.Name, volumeID, msg)
		}
		if err := s.releasePod(ctx, last); err != nil {
			return err
		}
	}
	if err := s.releasePod(ctx, created); err != nil {
		return err
	}
	logger.V(1).Info("Inline volume deleted")
	return nil
}

// releasePod removes FinalizerResult from an inline volume's pod and
// deletes it, reading it afresh for each try: the collector may have
// annotated it since the cache's copy.
func (s *Stager) releasePod(ctx context.Context, pod *corev1.Pod) error {
	for attempt := 0; ; attempt++ {
		live, err := s.livePod(ctx, pod.Namespace, pod.Name)
		if err != nil || live == nil || live.UID != pod.UID {
			return err
		}
		err = protocol.DeletePod(ctx, s.kube.CoreV1().Pods(pod.Namespace), live)
		if err == nil {
			return nil
		}
		if !apierrors.IsConflict(err) || attempt >= 3 {
			return status.Errorf(codes.Unavailable, "%v", err)
		}
	}
}

// inlinePVOf is the PersistentVolume staging saw for the inline volume of
// a finished creation pod (the deletion context's pv), as far as it can
// be rebuilt: what the pod did not report is left out.
func inlinePVOf(driver string, v protocol.InlineVolume, created *corev1.Pod) (*corev1.PersistentVolume, error) {
	capacity, _ := inlineCapacity(created)
	var attrs map[string]string
	if raw, ok := created.Annotations[protocol.AnnotationResultVolumeAttributes]; ok {
		attrs, _ = protocol.ParseVolumeAttributes(raw, nil)
	}
	return inlinePV(driver, v, capacity, attrs)
}

// stagedInlinePV is the made-up PersistentVolume of an inline volume staged
// on this node (the one its staging pod recorded), for a republish that
// does not come from kubelet (recovery, rollout); nil if there is none.
func (s *Stager) stagedInlinePV(driver, volumeID string) *corev1.PersistentVolume {
	sel := labels.SelectorFromSet(labels.Set{
		protocol.LabelPhase:       string(protocol.PhaseStaging),
		protocol.LabelProvisioner: protocol.LabelValue(driver),
		protocol.LabelVolume:      protocol.LabelValue(volumeID),
	})
	pods, err := s.podLister.List(sel)
	if err != nil {
		return nil
	}
	for _, pod := range pods {
		pv := &corev1.PersistentVolume{}
		if json.Unmarshal([]byte(pod.Annotations[protocol.AnnotationVolumeSnapshot]), pv) != nil {
			continue
		}
		if v, ok := protocol.InlineOf(pv); ok && v.VolumeID == volumeID {
			return pv
		}
	}
	return nil
}

// isInlineRequest: kubelet publishes a pod's inline volume.
func isInlineRequest(vctx map[string]string) bool {
	return vctx[pavcsi.ContextEphemeral] == "true"
}

// deleteAbandonedInline deletes an inline volume whose pod is gone, unless
// a staging of it is left, which the sweep unpublishes (deleting the volume
// then): kubelet unpublishes only what it published, so a volume whose
// publish never succeeded before its pod went is this sweep's.
func (s *Stager) deleteAbandonedInline(ctx context.Context, created *corev1.Pod) error {
	v, _ := protocol.InlineOf(created)
	driver := created.Labels[protocol.LabelProvisioner]
	if s.stagedInlinePV(driver, v.VolumeID) != nil {
		return nil
	}
	klog.FromContext(ctx).Info("Deleting an inline volume whose pod is gone", "driver", driver, "volume", v.VolumeID, "pod", v.PodNamespace+"/"+v.PodName)
	return s.deleteInline(ctx, driver, v.VolumeID)
}
