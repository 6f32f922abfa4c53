package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/templating"
)

// Event reasons on claims (the first two as the external-provisioner uses them).
const (
	reasonProvisioning          = "Provisioning"
	reasonProvisioningSucceeded = "ProvisioningSucceeded"
	reasonProvisioningFailed    = "ProvisioningFailed"
	reasonValidationFailed      = "ValidationFailed"
	reasonCleanupFailed         = "VolumeCleanupFailed"
	reasonPodNotStarting        = "PodNotStarting"
	reasonPodNameTaken          = "PodNameTaken"
)

// claimSync is one sync of one claim.
type claimSync struct {
	ctx context.Context
	c   *Controller
	key string
	pvc *corev1.PersistentVolumeClaim
	p   *v1alpha1.PavProvisioner
	// provName: p's name, also once p is gone (the claim's class names it).
	provName string
	class    *storagev1.StorageClass
	pods     map[protocol.Phase]*corev1.Pod
	// source and sourcePV: the claim a clone is made from, and its volume.
	source   *corev1.PersistentVolumeClaim
	sourcePV *corev1.PersistentVolume
	// topology: the requirement the validation and creation templates see
	// (computed before they are evaluated), nil without topology keys.
	topology *templating.Topology
	// sourceSnapshot and sourceContent: the VolumeSnapshot a restore is
	// made from, and its content.
	sourceSnapshot *snapshotv1.VolumeSnapshot
	sourceContent  *snapshotv1.VolumeSnapshotContent
	// vac: the VolumeAttributesClass the claim names, which a new volume is
	// created with (resolveAttributesClass).
	vac *storagev1.VolumeAttributesClass
	// node: the node the volume is created for, the templates'
	// selectedNodeName: the scheduler's (selected-node), else the one PaV
	// chose for Immediate binding (ImmediateNode, in computeTopology),
	// recorded on the attempt's pods; "" for none.
	node string
}

// claimTarget resolves which provisioner a claim is for
// (protocol.ClaimProvisioner), and its class (nil if none).
func (c *Controller) claimTarget(pvc *corev1.PersistentVolumeClaim) (string, *storagev1.StorageClass) {
	var class *storagev1.StorageClass
	if n := pvc.Spec.StorageClassName; n != nil && *n != "" {
		if sc, err := c.classes.Get(*n); err == nil {
			class = sc
		}
	}
	return protocol.ClaimProvisioner(pvc, class), class
}

func (c *Controller) syncClaim(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pvc, err := c.claims.PersistentVolumeClaims(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.claimBackoff.succeeded(key)
		c.nodeSelected.forget(key)
		return nil
	}
	if err != nil {
		return err
	}
	// A source claim lets go of the clones that are done, whatever else it is.
	if wrote, err := c.releaseClones(ctx, pvc); err != nil || wrote {
		return err // the write's event syncs the claim again
	}
	provName, class := c.claimTarget(pvc)
	p := c.provisioner(provName)
	ours := protocol.HasFinalizer(pvc, protocol.FinalizerClaim)
	if p == nil && !ours {
		// Not a PaV claim (or its PavProvisioner does not exist yet), unless
		// bound to a PV of a PaV driver made by hand: its expansion and
		// modification are refused with a status and an Event.
		if p = c.staticVolumeProvisioner(pvc); p == nil {
			return nil
		}
	}
	if d := c.claimBackoff.wait(key); d > 0 {
		c.claimQueue.AddAfter(key, d)
		return nil
	}
	s := &claimSync{ctx: ctx, c: c, key: key, pvc: pvc, p: p, provName: provName, class: class, pods: byPhase(c.claimPods(pvc))}
	if sc := s.attemptClass(); sc != nil {
		s.class = c.restoreClass(sc)
	}
	s.node = s.attemptNode()
	if pvc.DeletionTimestamp != nil {
		c.nodeSelected.forget(key)
		if !ours {
			return nil
		}
		return s.deleted(ctx)
	}
	return s.advance(ctx)
}

// attemptNode is the node the scheduler selected for the claim, else the
// one PaV chose for an attempt in progress, recorded on its pods (the node
// its creation pod ran for, even if nodes changed since); "" for none.
func (s *claimSync) attemptNode() string {
	if n := s.pvc.Annotations[annSelectedNode]; n != "" {
		return n
	}
	for _, phase := range []protocol.Phase{protocol.PhaseCreation, protocol.PhaseValidation, protocol.PhaseDeletion} {
		if pod := s.pods[phase]; pod != nil && pod.Annotations[protocol.AnnotationSelectedNode] != "" {
			return pod.Annotations[protocol.AnnotationSelectedNode]
		}
	}
	return ""
}

// attemptClass is the StorageClass an attempt in progress started with,
// recorded on its pods; nil without an attempt (or a record).
func (s *claimSync) attemptClass() *storagev1.StorageClass {
	for _, phase := range []protocol.Phase{protocol.PhaseCreation, protocol.PhaseValidation, protocol.PhaseDeletion} {
		pod := s.pods[phase]
		if pod == nil {
			continue
		}
		raw, ok := pod.Annotations[protocol.AnnotationClassSnapshot]
		if !ok {
			continue
		}
		sc := &storagev1.StorageClass{}
		if err := json.Unmarshal([]byte(raw), sc); err != nil {
			klog.ErrorS(err, "Reading the StorageClass recorded on a PaV pod; using the current one", "pod", klog.KObj(pod))
			return nil
		}
		return sc
	}
	return nil
}

// claimPods are the validation/creation/deletion pods PaV runs for a claim
// while it has no PV (pods working on an existing PV carry LabelVolume).
func (c *Controller) claimPods(pvc *corev1.PersistentVolumeClaim) []*corev1.Pod {
	var out []*corev1.Pod
	for _, pod := range c.podsBy(indexClaimUID, protocol.LabelValue(string(pvc.UID))) {
		switch phaseOf(pod) {
		case protocol.PhaseValidation, protocol.PhaseCreation, protocol.PhaseDeletion:
			if pod.Labels[protocol.LabelVolume] == "" {
				out = append(out, pod)
			}
		}
	}
	return out
}

func (s *claimSync) event(eventType, reason, format string, args ...interface{}) {
	s.c.recorder.Eventf(s.pvc, eventType, reason, format, args...)
}

// fail reports a failed attempt and schedules the next one with backoff.
func (s *claimSync) fail(reason, format string, args ...interface{}) error {
	msg := fmt.Sprintf(format, args...)
	s.event(corev1.EventTypeWarning, reason, "%s", msg)
	return s.retryLater(msg)
}

// retryLater schedules the next attempt with backoff (failure already
// reported). A claim waiting for its first consumer goes back to the
// scheduler, which may pick another node for it.
func (s *claimSync) retryLater(msg string) error {
	s.reschedule()
	d := s.c.claimBackoff.failed(s.key)
	s.c.claimQueue.AddAfter(s.key, d)
	s.c.metrics.operation(s.provName, claimClassName(s.pvc), "provision", "failure", 0)
	return retryScheduled{fmt.Errorf("claim %s: %s (retrying in %v)", s.key, msg, d)}
}

// reschedule removes the scheduler's node choice from a WaitForFirstConsumer
// claim after a failed attempt (as sig-storage-lib-external-provisioner does
// on a final error), so that the scheduler can choose again instead of PaV
// retrying the same node forever.
func (s *claimSync) reschedule() {
	if s.pvc.Annotations[annSelectedNode] == "" || s.class == nil || s.class.VolumeBindingMode == nil ||
		*s.class.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer {
		return
	}
	patch := []byte(`{"metadata":{"annotations":{"` + annSelectedNode + `":null}}}`)
	_, err := s.c.kube.CoreV1().PersistentVolumeClaims(s.pvc.Namespace).Patch(s.ctx, s.pvc.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		klog.ErrorS(err, "Removing the selected node from a claim to reschedule it", "claim", s.key)
		return
	}
	klog.V(2).InfoS("Claim returned to the scheduler", "claim", s.key, "node", s.pvc.Annotations[annSelectedNode])
}

func (s *claimSync) request() templating.DynamicRequest {
	return templating.DynamicRequest{PVC: s.pvc, Class: s.class, SelectedNodeName: s.node,
		SourcePVC: s.source, SourcePV: s.sourcePV, SourceSnapshot: s.sourceSnapshot, SourceContent: s.sourceContent, Topology: s.topology,
		VolumeAttributesClass: s.vac}
}

// computeTopology sets s.topology for the provisioner's topology keys and,
// for a claim no one selected a node for (Immediate binding), chooses its
// node (s.node).
func (s *claimSync) computeTopology() error {
	if len(s.p.Spec.TopologyKeys) == 0 {
		return nil
	}
	nodes, err := s.c.nodes.List(labels.Everything())
	if err != nil {
		return err
	}
	if s.node == "" {
		if s.node, err = ImmediateNode(s.p, s.class, s.pvc, nodes); err != nil {
			return err
		}
	}
	s.topology, err = Topology(s.p, s.class, s.pvc, s.node, nodes)
	return err
}

// anyPodGoing: a pod of a previous attempt is still being deleted; its name
// is needed again, so wait for it to go (its deletion requeues the claim).
// A pod someone else deleted while PaV's finalizer holds it is not going:
// it is still the attempt's record.
func (s *claimSync) anyPodGoing() bool {
	for _, pod := range s.pods {
		if protocol.Going(pod) {
			return true
		}
	}
	return false
}

func (s *claimSync) volumeExists(ctx context.Context, live bool) (bool, error) {
	name := protocol.VolumeName(s.pvc)
	if _, err := s.c.volumes.Get(name); err == nil {
		return true, nil
	}
	if !live {
		return false, nil
	}
	// The cache may lag behind a PV this controller just created.
	_, err := s.c.kube.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		return true, nil
	}
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return false, err
}

// provisionableSince is when the claim could first be provisioned: its
// creation, or for a WaitForFirstConsumer claim the first time this process
// saw a node selected for it (advance records it at every sync of an
// unbound claim, so from the first that saw the scheduler's annotation).
func (s *claimSync) provisionableSince() time.Time {
	if s.pvc.Annotations[annSelectedNode] == "" || s.class == nil || s.class.VolumeBindingMode == nil ||
		*s.class.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer {
		return s.pvc.CreationTimestamp.Time
	}
	return s.c.nodeSelected.seen(s.key, s.pvc.UID, s.c.claimBackoff.now())
}

// advance observes a claim that is not being deleted, decides its next step
// (decideProvision: a step of provisioning, or changeVolume once it is
// bound) and acts on it.
func (s *claimSync) advance(ctx context.Context) error {
	if s.pvc.Spec.VolumeName == "" {
		s.provisionableSince() // provisioning latency counts from the first sync that may provision
	}
	v := claimView{pvc: s.pvc, p: s.p, class: s.class, pods: s.pods}
	v.volumeExists, _ = s.volumeExists(ctx, false)
	if s.pvc.Spec.VolumeName == "" && !v.volumeExists && s.p != nil {
		v.cloneProblem, v.cloneRetry = s.resolveDataSource()
	}
	step, msg := decideProvision(v)
	switch step {
	case stepNone:
		return nil
	case stepPopulator:
		s.event(corev1.EventTypeNormal, reasonProvisioning, "%s", msg)
		return nil
	case stepReport, stepRetry:
		// No attempt can start: a source claim must not wait for this one.
		if len(s.pods) == 0 {
			if err := s.releaseSource(ctx); err != nil {
				return err
			}
		}
		if step == stepRetry {
			return s.fail(reasonProvisioningFailed, "%s", msg)
		}
		s.event(corev1.EventTypeWarning, reasonProvisioningFailed, "%s", msg)
		return nil
	case stepFinish:
		return s.finish(ctx)
	case stepBound:
		return s.changeVolume(ctx)
	case stepRevertDone:
		return s.afterFailedCreation(ctx, s.pods[protocol.PhaseDeletion])
	case stepCreationPod:
		return s.creationPodState(ctx, s.pods[protocol.PhaseCreation])
	case stepValidationPod:
		if err := s.computeTopology(); err != nil {
			return s.fail(reasonProvisioningFailed, "%v", err)
		}
		return s.validationPodState(ctx, s.pods[protocol.PhaseValidation])
	}
	if err := s.computeTopology(); err != nil {
		return s.fail(reasonProvisioningFailed, "%v", err)
	}
	return s.start(ctx)
}

// start begins a new attempt: validation.
func (s *claimSync) start(ctx context.Context) error {
	// Refuse before anything is created a claim whose PV could not record it.
	if _, _, err := protocol.Snapshots(s.pvc, s.class); err != nil {
		return s.fail(reasonProvisioningFailed, "%v", err)
	}
	if err := s.resolveAttributesClass(ctx); err != nil {
		return err
	}
	vc, err := s.c.engine.Validation(ctx, s.p, s.request())
	if err != nil {
		return s.fail(reasonProvisioningFailed, "evaluating spec.volumeValidation of PavProvisioner %q: %v", s.p.Name, err)
	}
	if vc.Unsatisfied != nil {
		return s.fail(reasonProvisioningFailed, "PavProvisioner %q cannot provision this claim: %v", s.p.Name, vc.Unsatisfied)
	}
	s.event(corev1.EventTypeNormal, reasonProvisioning, "PavProvisioner %q is provisioning a volume for claim %q", s.p.Name, s.key)
	if vc.PodTemplate != nil {
		if done, err := s.finishIfVolumeExists(ctx); done || err != nil {
			return err
		}
		return s.runPod(ctx, protocol.PhaseValidation, vc.PodTemplate, nil)
	}
	return s.startCreation(ctx)
}

// resolveAttributesClass reads the VolumeAttributesClass the claim names
// into s.vac, as external-provisioner does before CreateVolume: a class
// that does not exist, or is another driver's, fails the attempt (retried
// with backoff).
func (s *claimSync) resolveAttributesClass(ctx context.Context) error {
	name := ptrString(s.pvc.Spec.VolumeAttributesClassName)
	if name == "" || (s.vac != nil && s.vac.Name == name) {
		return nil
	}
	vac, err := s.volumeAttributesClass(ctx, name)
	switch {
	case err != nil:
		return s.fail(reasonProvisioningFailed, "%v", err)
	case vac == nil:
		return s.fail(reasonProvisioningFailed, "VolumeAttributesClass %q not found", name)
	case vac.DriverName != s.p.Name:
		return s.fail(reasonProvisioningFailed, "VolumeAttributesClass %q is for driver %q, not PavProvisioner %q", name, vac.DriverName, s.p.Name)
	}
	s.vac = vac
	return nil
}

// finishIfVolumeExists finishes the claim if its PV exists, asking the API
// server: the cache may lag behind a PV this controller just created, and the
// pods of a second attempt would create a second volume. (Without pods there
// is no need to ask: creating the PV again meets the one there.)
func (s *claimSync) finishIfVolumeExists(ctx context.Context) (bool, error) {
	exists, err := s.volumeExists(ctx, true)
	if err != nil || !exists {
		return false, err
	}
	return true, s.finish(ctx)
}

// runPod starts a pod for the claim, after making sure the claim holds PaV's
// finalizer (so a deleted claim stays readable until PaV has cleaned up)
// and, for a clone's validation and creation, that its source holds the
// clone's (protectSource).
func (s *claimSync) runPod(ctx context.Context, phase protocol.Phase, tmpl *corev1.PodTemplateSpec, annotations map[string]string) error {
	if err := s.addFinalizer(ctx); err != nil {
		return err
	}
	if s.source != nil && phase != protocol.PhaseDeletion {
		if err := s.protectSource(ctx); err != nil {
			return s.fail(reasonProvisioningFailed, "%v", err)
		}
	}
	spec := protocol.ClaimPodSpec{Phase: phase, PVC: s.pvc, Class: s.class, Extra: annotations}
	if s.node != s.pvc.Annotations[annSelectedNode] {
		spec.ChosenNode = s.node // PaV's choice: the attempt's later steps and its PV use it too
	}
	pod, err := protocol.ClaimPod(protocol.PodBase{Template: tmpl, Provisioner: s.p.Name, Root: s.c.podDirRoot()}, spec)
	if err != nil {
		return s.fail(reasonProvisioningFailed, "%v", err)
	}
	squatter, err := s.c.createPod(ctx, pod)
	if squatter != nil {
		s.event(corev1.EventTypeWarning, reasonPodNameTaken, "%s", squatterMessage(squatter, phase))
	}
	if err != nil {
		if ctx.Err() != nil {
			return err // shutting down: not a failure to report to the user
		}
		return s.fail(reasonProvisioningFailed, "%v", err)
	}
	return nil
}

func (s *claimSync) validationPodState(ctx context.Context, pod *corev1.Pod) error {
	r, ok := s.finishedPod(ctx, pod)
	if !ok {
		return nil
	}
	if !r.succeeded {
		return s.c.podFailed(ctx, pod, fmt.Sprintf("validation pod %s/%s failed: %s", pod.Namespace, pod.Name, r.message), func(msg string) error {
			return s.fail(reasonValidationFailed, "%s", msg)
		})
	}
	return s.startCreation(ctx)
}

// finish ends PaV's work on a claim: its pods go, then its finalizer.
func (s *claimSync) finish(ctx context.Context) error {
	if err := s.deleteAllPods(ctx); err != nil {
		return err
	}
	if err := s.removeFinalizer(ctx); err != nil {
		return err
	}
	s.c.claimBackoff.succeeded(s.key)
	s.c.nodeSelected.forget(s.key)
	return nil
}

// deleteAllPods removes the attempt's pods, the deletion pod last: while a
// finished creation pod is left, a crash would otherwise make the next sync
// revert the creation a second time.
func (s *claimSync) deleteAllPods(ctx context.Context) error {
	for _, phase := range []protocol.Phase{protocol.PhaseValidation, protocol.PhaseCreation, protocol.PhaseDeletion} {
		if pod := s.pods[phase]; pod != nil {
			if err := s.c.deletePod(ctx, pod); err != nil {
				return err
			}
		}
	}
	return nil
}

// finishedPod is Controller.finishedPod for one of the claim's pods.
func (s *claimSync) finishedPod(ctx context.Context, pod *corev1.Pod) (podOutcome, bool) {
	return s.c.finishedPod(ctx, pod, podWaiter{obj: s.pvc, queue: s.c.claimQueue, key: s.key})
}

func (s *claimSync) addFinalizer(ctx context.Context) error {
	updated, err := protocol.AddFinalizer(ctx, s.c.kube.CoreV1().PersistentVolumeClaims(s.pvc.Namespace).Patch, s.pvc, protocol.FinalizerClaim)
	if err != nil {
		return err
	}
	if updated != nil {
		s.pvc = updated
	}
	return nil
}

func (s *claimSync) removeFinalizer(ctx context.Context) error {
	updated, err := protocol.RemoveFinalizer(ctx, s.c.kube.CoreV1().PersistentVolumeClaims(s.pvc.Namespace).Patch, s.pvc, protocol.FinalizerClaim)
	if err != nil {
		return err
	}
	if updated != nil {
		s.pvc = updated
	}
	return nil
}

func ptrString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
