// Package inline is the node plugin's CSI inline ephemeral volumes:
// created before their staging and deleted after their unstaging, by the
// node plugin of the pod's node, with creation and deletion pods on it
// (package nodepods). Staging them is the node plugin's, on the made-up
// PersistentVolume Publish returns.
package inline

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	pavlisters "github.com/albertofaria/pav/crds/generated/listers/crds/v1alpha1"
	"github.com/albertofaria/pav/crds/v1alpha1"
	pavcsi "github.com/albertofaria/pav/csi"
	"github.com/albertofaria/pav/kubeclient"
	"github.com/albertofaria/pav/nodeagent/nodepods"
	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/templating"
)

// Engine is what inline volumes need from PavProvisioner evaluation.
type Engine interface {
	// InlineValidation evaluates spec.volumeValidation's fields for a CSI
	// inline ephemeral volume (r.Inline).
	InlineValidation(ctx context.Context, p *v1alpha1.PavProvisioner, r templating.DynamicRequest) (*templating.ValidationConfig, error)
	// Creation and Deletion evaluate spec.volumeCreation and
	// spec.volumeDeletion for a CSI inline ephemeral volume (r.Inline).
	Creation(ctx context.Context, p *v1alpha1.PavProvisioner, r templating.DynamicRequest) (*templating.CreationConfig, error)
	Deletion(ctx context.Context, p *v1alpha1.PavProvisioner, r templating.DynamicRequest) (*corev1.PodTemplateSpec, error)
}

// Config wires Volumes.
type Config struct {
	Kube         kubeclient.Interface
	Engine       Engine
	Pods         *nodepods.Pods // PaV's pods on this node
	Provisioners pavlisters.PavProvisionerLister
	NodeName     string
	PodDirRoot   string // where PaV pods' /pav directories live
}

// Volumes are the inline volumes of the pods on one node.
type Volumes struct {
	kube         kubeclient.Interface
	engine       Engine
	pods         *nodepods.Pods
	provisioners pavlisters.PavProvisionerLister
	node         string
	root         string
}

// New returns the inline volumes of cfg's node.
func New(cfg Config) *Volumes {
	return &Volumes{kube: cfg.Kube, engine: cfg.Engine, pods: cfg.Pods, provisioners: cfg.Provisioners, node: cfg.NodeName, root: cfg.PodDirRoot}
}

// Publish makes sure the inline volume of provisioner p that kubelet
// publishes exists and returns the PersistentVolume staging sees for it
// (protocol.InlinePV). The pod's attributes are a tenant's: admitInline
// checks them, and who may ask, before anything is evaluated. For a
// provisioner with provisioningModes Dynamic it evaluates volumeCreation
// and runs its creation pod on this node, once: the pod, kept with its
// collected results until the volume is deleted, is the volume's record
// (with the admitted attributes). A failed creation is reverted (Delete)
// before the error goes back to kubelet, which calls again.
func (vs *Volumes) Publish(ctx context.Context, p *v1alpha1.PavProvisioner, volumeID string, vctx map[string]string) (*corev1.PersistentVolume, error) {
	driver := p.Name
	if !p.Spec.InlineVolumes {
		return nil, status.Errorf(codes.FailedPrecondition, "PavProvisioner %s does not serve inline volumes (spec.inlineVolumes is not true)", driver)
	}
	v := protocol.InlineVolumeOf(volumeID, vctx)
	if v.PodUID == "" || v.PodNamespace == "" {
		return nil, status.Errorf(codes.InvalidArgument, "the request for inline volume %s does not name its pod (the CSIDriver's podInfoOnMount)", volumeID)
	}
	pod, err := vs.inlineRecord(ctx, driver, volumeID, true)
	if err != nil {
		return nil, err
	}
	if pod != nil {
		// Admitted when it was created: its record holds what was admitted.
		v, _ = protocol.InlineOf(pod)
	} else if err := vs.admitInline(ctx, p, &v); err != nil {
		return nil, err
	}
	validation, err := vs.engine.InlineValidation(ctx, p, templating.DynamicRequest{Inline: &v, SelectedNodeName: vs.node})
	if err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "evaluating spec.volumeValidation of PavProvisioner %s for the inline volume of pod %s/%s: %v",
			driver, v.PodNamespace, v.PodName, err)
	}
	if err := validation.CheckInlineRequest(); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "the inline volume of pod %s/%s does not fit PavProvisioner %s: %v", v.PodNamespace, v.PodName, driver, err)
	}
	if !p.HasMode(v1alpha1.Dynamic) {
		return inlinePV(driver, v, resource.Quantity{}, nil) // nothing is created: no capacity
	}
	if pod == nil {
		var pv *corev1.PersistentVolume
		if pod, pv, err = vs.createInline(ctx, p, v, validation); err != nil || pod == nil {
			return pv, err
		}
		klog.FromContext(ctx).V(2).Info("Created inline volume's creation pod", "pod", klog.KObj(pod), "volume", volumeID)
	}
	if pod.DeletionTimestamp != nil {
		return nil, status.Errorf(codes.Unavailable, "inline volume %s is being deleted (creation pod %s/%s); kubelet will call again", volumeID, pod.Namespace, pod.Name)
	}
	return vs.inlineCreated(ctx, driver, volumeID, v, pod, validation)
}

// createInline starts creating inline volume v: its creation pod, or (a
// volume that is just a name, nothing to record or revert) its PV at once.
func (vs *Volumes) createInline(ctx context.Context, p *v1alpha1.PavProvisioner, v protocol.InlineVolume, validation *templating.ValidationConfig) (*corev1.Pod, *corev1.PersistentVolume, error) {
	if p.DeletionTimestamp != nil {
		return nil, nil, status.Errorf(codes.FailedPrecondition, "PavProvisioner %s is being deleted: no new volume is created", p.Name)
	}
	cfg, err := vs.engine.Creation(ctx, p, templating.DynamicRequest{Inline: &v, SelectedNodeName: vs.node})
	if err != nil {
		return nil, nil, status.Errorf(codes.FailedPrecondition, "evaluating spec.volumeCreation of PavProvisioner %s for the inline volume of pod %s/%s: %v",
			p.Name, v.PodNamespace, v.PodName, err)
	}
	if cfg.PodTemplate == nil {
		capacity, err := protocol.ChooseCapacity(cfg.Capacity, nil, false)
		if err == nil {
			err = validation.CheckInlineCapacity(capacity)
		}
		if err != nil {
			return nil, nil, status.Errorf(codes.FailedPrecondition, "the inline volume of pod %s/%s: %v", v.PodNamespace, v.PodName, err)
		}
		pv, err := inlinePV(p.Name, v, capacity, nil)
		return nil, pv, err
	}
	pod, err := vs.createInlinePod(ctx, p.Name, protocol.PhaseInlineCreation, cfg.PodTemplate, v, cfg)
	return pod, nil, err
}

// inlineCreated waits for inline volume v's creation pod and returns the
// volume's PV; a failed creation is reverted.
func (vs *Volumes) inlineCreated(ctx context.Context, driver, volumeID string, v protocol.InlineVolume, pod *corev1.Pod, validation *templating.ValidationConfig) (*corev1.PersistentVolume, error) {
	last, err := vs.waitCollected(ctx, pod)
	if err != nil {
		return nil, err
	}
	var capacity resource.Quantity
	var attrs map[string]string
	if !protocol.Succeeded(last) {
		err = fmt.Errorf("failed: %s", protocol.FailureMessage(last, last.Annotations[protocol.AnnotationResultError], nil))
	} else if capacity, attrs, err = inlineOutcome(last); err == nil {
		err = validation.CheckInlineCapacity(capacity)
	}
	if err != nil {
		problem := fmt.Sprintf("creation pod %s/%s: %v", last.Namespace, last.Name, err)
		if err := vs.Delete(ctx, driver, volumeID); err != nil {
			problem += fmt.Sprintf("; reverting it did not complete yet: %v", err)
		}
		return nil, status.Error(codes.Internal, problem)
	}
	return inlinePV(driver, v, capacity, attrs)
}

// admitInline checks what a pod may not decide by itself, in this order:
// its attributes (templating.InlineAttributes: declared, fitting, defaults
// added; v gets them), that its namespace may use the provisioner's inline
// volumes, and the limits per pod and per namespace.
func (vs *Volumes) admitInline(ctx context.Context, p *v1alpha1.PavProvisioner, v *protocol.InlineVolume) error {
	pol := p.Spec.InlineVolumePolicy
	attrs, err := templating.InlineAttributes(pol, v.Attributes)
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "PavProvisioner %s refuses the inline volume of pod %s/%s: %v", p.Name, v.PodNamespace, v.PodName, err)
	}
	v.Attributes = attrs
	if pol == nil {
		return nil
	}
	if pol.NamespaceSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(pol.NamespaceSelector)
		if err != nil {
			return status.Errorf(codes.FailedPrecondition, "PavProvisioner %s: spec.inlineVolumePolicy.namespaceSelector: %v", p.Name, err)
		}
		ns, err := vs.kube.CoreV1().Namespaces().Get(ctx, v.PodNamespace, metav1.GetOptions{})
		if err != nil {
			return status.Errorf(codes.Unavailable, "getting namespace %s: %v", v.PodNamespace, err)
		}
		if !sel.Matches(labels.Set(ns.Labels)) {
			return status.Errorf(codes.PermissionDenied, "PavProvisioner %s does not serve inline volumes to namespace %s (its labels do not match spec.inlineVolumePolicy.namespaceSelector)", p.Name, v.PodNamespace)
		}
	}
	if pol.MaxVolumesPerPod == nil && pol.MaxVolumesPerNamespace == nil {
		return nil
	}
	pods, err := vs.kube.CoreV1().Pods(v.PodNamespace).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return status.Errorf(codes.Unavailable, "listing the pods of namespace %s: %v", v.PodNamespace, err)
	}
	if err := checkInlineLimits(pol, p.Name, pods.Items, v.PodUID); err != nil {
		return status.Errorf(codes.ResourceExhausted, "PavProvisioner %s refuses the inline volume of pod %s/%s: %v", p.Name, v.PodNamespace, v.PodName, err)
	}
	return nil
}

// checkInlineLimits checks the limits of pol for the pod with UID podUID
// among the pods of its namespace: its own inline volumes of the driver,
// and those of the namespace's pods that have not terminated, counted from
// the oldest pod up to it (so pods admitted earlier keep their volumes, and
// every node plugin counts the same).
func checkInlineLimits(pol *v1alpha1.InlineVolumePolicy, driver string, pods []corev1.Pod, podUID string) error {
	count := func(p *corev1.Pod) int32 {
		n := int32(0)
		for _, vol := range p.Spec.Volumes {
			if vol.CSI != nil && vol.CSI.Driver == driver {
				n++
			}
		}
		return n
	}
	i := slices.IndexFunc(pods, func(p corev1.Pod) bool { return string(p.UID) == podUID })
	if i < 0 {
		return fmt.Errorf("its pod (UID %s) is not in its namespace any more", podUID)
	}
	own := &pods[i]
	if m := pol.MaxVolumesPerPod; m != nil && count(own) > *m {
		return fmt.Errorf("the pod has %d inline volumes of the provisioner; at most %d are allowed per pod (spec.inlineVolumePolicy.maxVolumesPerPod)", count(own), *m)
	}
	m := pol.MaxVolumesPerNamespace
	if m == nil {
		return nil
	}
	older := func(a, b *corev1.Pod) bool {
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	}
	total := count(own)
	for j := range pods {
		p := &pods[j]
		if j != i && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed && older(p, own) {
			total += count(p)
		}
	}
	if total > *m {
		return fmt.Errorf("with the pods created before it, namespace %s would have %d inline volumes of the provisioner; at most %d are allowed per namespace (spec.inlineVolumePolicy.maxVolumesPerNamespace)", own.Namespace, total, *m)
	}
	return nil
}

func inlinePV(driver string, v protocol.InlineVolume, capacity resource.Quantity, attrs map[string]string) (*corev1.PersistentVolume, error) {
	pv, err := protocol.InlinePV(driver, v, capacity, attrs)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	return pv, nil
}

// inlineOutcome is what a finished inline creation pod made, by the rule a
// claim's creation follows (protocol.ChooseCapacity, ChooseAttributes): the
// capacity (the volumeCreation.capacity recorded on the pod, else
// /pav/capacity) and the attributes it returned.
func inlineOutcome(pod *corev1.Pod) (resource.Quantity, map[string]string, error) {
	cfg, err := templating.RecordedCreation(pod)
	if err != nil {
		return resource.Quantity{}, nil, err
	}
	r := protocol.CreationResultsOf(pod)
	capacity, err := protocol.ChooseCapacity(cfg.Capacity, r.Capacity, true)
	if err != nil {
		return resource.Quantity{}, nil, err
	}
	attrs, err := protocol.ChooseAttributes(r.Attributes, r.Error, nil)
	if err != nil {
		return resource.Quantity{}, nil, err
	}
	return capacity, attrs, nil
}

// createInlinePod creates an inline volume's creation or deletion pod on
// this node (the creation pod records the evaluated volumeCreation, cfg).
func (vs *Volumes) createInlinePod(ctx context.Context, provisioner string, phase protocol.Phase, tmpl *corev1.PodTemplateSpec, v protocol.InlineVolume, cfg *templating.CreationConfig) (*corev1.Pod, error) {
	built, err := protocol.InlinePod(tmpl, provisioner, vs.root, vs.node, phase, v)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	if cfg != nil {
		recorded, err := cfg.Record()
		if err != nil {
			return nil, status.Errorf(codes.Internal, "%v", err)
		}
		maps.Copy(built.Annotations, recorded)
	}
	dir, err := protocol.PodHostDir(built, vs.root)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, status.Errorf(codes.Internal, "creating %s: %v", dir, err)
	}
	return vs.pods.Create(ctx, built, dir)
}

// waitCollected waits until a run-to-completion inline pod terminated and
// the collector copied its /pav results onto it.
func (vs *Volumes) waitCollected(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	waitCtx, cancel := nodepods.BeforeDeadline(ctx, 3*time.Second)
	defer cancel()
	last, err := vs.pods.Wait(waitCtx, pod, "", func(p *corev1.Pod) bool {
		return p == nil || protocol.Terminated(p) && p.Annotations[protocol.AnnotationResultsCollected] == "true"
	})
	switch {
	case err != nil:
		return nil, status.Errorf(codes.DeadlineExceeded, "%s pod %s/%s is not done yet (kubelet will call again): %s",
			pod.Labels[protocol.LabelPhase], pod.Namespace, pod.Name, nodepods.Describe(last))
	case last == nil:
		return nil, status.Errorf(codes.Aborted, "%s pod %s/%s was removed before it completed", pod.Labels[protocol.LabelPhase], pod.Namespace, pod.Name)
	}
	return last, nil
}

// Delete deletes an inline volume once it is unstaged (or its
// creation failed or was abandoned): it stops a creation pod still running,
// runs the deletion pod (volumeDeletion, with pv and handle), then removes
// both pods: the creation pod, the record that the volume exists, first,
// then the deletion pod, the record that it was deleted (the other order
// would delete it twice if the node plugin stopped in between). Every step
// can be repeated. A volume without a creation pod (none ran, or it is
// deleted already) has nothing to delete but a deletion pod left over.
// It looks in the pod cache only (Unpublish calls it for every volume): a
// creation pod is never this young.
func (vs *Volumes) Delete(ctx context.Context, driver, volumeID string) error {
	created, err := vs.inlineRecord(ctx, driver, volumeID, false)
	if err != nil {
		return err
	}
	if created == nil {
		return vs.releaseDeletionPods(ctx, driver, volumeID)
	}
	v, _ := protocol.InlineOf(created)
	logger := klog.FromContext(ctx).WithValues("driver", driver, "volume", volumeID)
	if err := vs.stopCreation(ctx, created); err != nil {
		return err
	}
	p, err := vs.provisioners.Get(driver)
	if apierrors.IsNotFound(err) {
		// Nothing can evaluate its deletion any more: let the record go.
		logger.Info("PavProvisioner is gone: the inline volume is forgotten without its deletion pod")
		return vs.releasePod(ctx, created)
	}
	if err != nil {
		return status.Errorf(codes.Internal, "looking up PavProvisioner %s: %v", driver, err)
	}
	pv, err := inlinePVOf(driver, v, created)
	if err != nil {
		return err
	}
	tmpl, err := vs.engine.Deletion(ctx, p, templating.DynamicRequest{Inline: &v, SelectedNodeName: vs.node, PV: pv, Handle: volumeID})
	if err != nil {
		return status.Errorf(codes.FailedPrecondition, "evaluating spec.volumeDeletion of PavProvisioner %s for the inline volume of pod %s/%s: %v",
			driver, v.PodNamespace, v.PodName, err)
	}
	if tmpl != nil {
		if err := vs.runInlineDeletion(ctx, p.Name, volumeID, v, tmpl); err != nil {
			return err
		}
	}
	if err := vs.releasePod(ctx, created); err != nil {
		return err
	}
	if err := vs.releaseDeletionPods(ctx, driver, volumeID); err != nil {
		return err
	}
	logger.V(1).Info("Inline volume deleted")
	return nil
}

// stopCreation stops a creation pod abandoned mid-creation (its finalizer
// keeps the record) and waits until it stopped.
func (vs *Volumes) stopCreation(ctx context.Context, created *corev1.Pod) error {
	if protocol.Terminated(created) {
		return nil
	}
	if created.DeletionTimestamp == nil {
		if err := vs.kube.CoreV1().Pods(created.Namespace).Delete(ctx, created.Name, metav1.DeleteOptions{}); err != nil {
			return status.Errorf(codes.Unavailable, "stopping creation pod %s/%s: %v", created.Namespace, created.Name, err)
		}
	}
	waitCtx, cancel := nodepods.BeforeDeadline(ctx, 2*time.Second)
	defer cancel()
	if last, err := vs.pods.Wait(waitCtx, created, "", func(p *corev1.Pod) bool { return p == nil || nodepods.Stopped(p) }); err != nil {
		return status.Errorf(codes.DeadlineExceeded, "waiting for creation pod %s/%s to stop: %s", created.Namespace, created.Name, nodepods.Describe(last))
	}
	return nil
}

// runInlineDeletion runs inline volume v's deletion pod (the one found, or
// a new one from tmpl) to success; a failed one is removed, so that the
// next call (kubelet retries) runs a new one.
func (vs *Volumes) runInlineDeletion(ctx context.Context, provisioner, volumeID string, v protocol.InlineVolume, tmpl *corev1.PodTemplateSpec) error {
	deletion, err := vs.pods.Find(ctx, protocol.PhaseInlineDeletion, protocol.InlineID(volumeID))
	if err != nil {
		return err
	}
	logger := klog.FromContext(ctx).WithValues("driver", provisioner, "volume", volumeID)
	if deletion == nil {
		if deletion, err = vs.createInlinePod(ctx, provisioner, protocol.PhaseInlineDeletion, tmpl, v, nil); err != nil {
			return err
		}
		logger.V(2).Info("Created inline volume's deletion pod", "pod", klog.KObj(deletion))
	}
	last, err := vs.waitCollected(ctx, deletion)
	if err != nil {
		return err
	}
	if !protocol.Succeeded(last) {
		msg := protocol.FailureMessage(last, last.Annotations[protocol.AnnotationResultError], nil)
		if err := vs.releasePod(ctx, last); err != nil {
			logger.Error(err, "Deleting failed deletion pod")
		}
		return status.Errorf(codes.Internal, "deletion pod %s/%s of inline volume %s failed: %s", last.Namespace, last.Name, volumeID, msg)
	}
	return nil
}

// releaseDeletionPods releases the deletion pods of inline volume volumeID
// of driver once its creation pod is gone: the deletion succeeded (a
// creation pod is released only then, or with no deletion pod at all).
func (vs *Volumes) releaseDeletionPods(ctx context.Context, driver, volumeID string) error {
	pods, err := vs.pods.Cached(protocol.PhaseInlineDeletion, protocol.InlineID(volumeID))
	if err != nil {
		return err
	}
	for _, pod := range pods {
		if isRecordOf(pod, driver, volumeID) {
			if err := vs.releasePod(ctx, pod); err != nil {
				return err
			}
		}
	}
	return nil
}

// releasePod removes FinalizerResult from an inline volume's pod and
// deletes it, reading it afresh for each try: the collector may have
// annotated it since the cache's copy.
func (vs *Volumes) releasePod(ctx context.Context, pod *corev1.Pod) error {
	for attempt := 0; ; attempt++ {
		live, err := vs.pods.Live(ctx, pod.Namespace, pod.Name)
		if err != nil || live == nil || live.UID != pod.UID {
			return err
		}
		err = protocol.DeletePod(ctx, vs.kube.CoreV1().Pods(pod.Namespace), live)
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
// be rebuilt: a creation that made nothing usable (it is being reverted)
// has capacity 0 and no attributes of its own.
func inlinePVOf(driver string, v protocol.InlineVolume, created *corev1.Pod) (*corev1.PersistentVolume, error) {
	capacity, attrs, _ := inlineOutcome(created)
	return inlinePV(driver, v, capacity, attrs)
}

// inlineRecord is the creation pod that records the inline volume volumeID
// of driver, nil if there is none: from the pod cache, and when fromAPI
// also from the API (the cache may lag behind a create). A creation pod of
// that name recording another driver's or volume's is none of this one's:
// publishing it fails, unpublishing leaves it alone.
func (vs *Volumes) inlineRecord(ctx context.Context, driver, volumeID string, fromAPI bool) (*corev1.Pod, error) {
	id := protocol.InlineID(volumeID)
	var pod *corev1.Pod
	if fromAPI {
		var err error
		if pod, err = vs.pods.Find(ctx, protocol.PhaseInlineCreation, id); err != nil || pod == nil {
			return nil, err
		}
		if isRecordOf(pod, driver, volumeID) {
			return pod, nil
		}
		return nil, status.Errorf(codes.FailedPrecondition, "creation pod %s/%s does not record inline volume %s of PavProvisioner %s", pod.Namespace, pod.Name, volumeID, driver)
	}
	pods, err := vs.pods.Cached(protocol.PhaseInlineCreation, id)
	if err != nil {
		return nil, err
	}
	for _, pod := range pods {
		if isRecordOf(pod, driver, volumeID) {
			return pod, nil
		}
	}
	return nil, nil
}

func isRecordOf(pod *corev1.Pod, driver, volumeID string) bool {
	v, ok := protocol.InlineOf(pod)
	return ok && v.VolumeID == volumeID && pod.Labels[protocol.LabelProvisioner] == protocol.LabelValue(driver)
}

// Staged is the made-up PersistentVolume of an inline volume staged
// on this node (the one its staging pod recorded), for a republish that
// does not come from kubelet (recovery, rollout); nil if there is none.
func (vs *Volumes) Staged(driver, volumeID string) *corev1.PersistentVolume {
	sel := labels.SelectorFromSet(labels.Set{
		protocol.LabelPhase:       string(protocol.PhaseStaging),
		protocol.LabelProvisioner: protocol.LabelValue(driver),
		protocol.LabelVolume:      protocol.LabelValue(volumeID),
	})
	pods, err := vs.pods.List(sel)
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

// IsRequest: kubelet publishes a pod's inline volume.
func IsRequest(vctx map[string]string) bool {
	return vctx[pavcsi.ContextEphemeral] == "true"
}

// DeleteAbandoned deletes an inline volume whose pod is gone, unless
// a staging of it is left, which the sweep unpublishes (deleting the volume
// then): kubelet unpublishes only what it published, so a volume whose
// publish never succeeded before its pod went is this sweep'vs.
func (vs *Volumes) DeleteAbandoned(ctx context.Context, created *corev1.Pod) error {
	v, _ := protocol.InlineOf(created)
	driver := created.Labels[protocol.LabelProvisioner]
	if vs.Staged(driver, v.VolumeID) != nil {
		return nil
	}
	klog.FromContext(ctx).Info("Deleting an inline volume whose pod is gone", "driver", driver, "volume", v.VolumeID, "pod", v.PodNamespace+"/"+v.PodName)
	return vs.Delete(ctx, driver, v.VolumeID)
}
