package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
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
	// created with (resolveClass).
	vac *storagev1.VolumeAttributesClass
	// node: the node the volume is created for, the templates'
	// selectedNodeName: the scheduler's (selected-node), else the one PaV
	// chose for Immediate binding (ImmediateNode, in computeTopology),
	// recorded on the attempt's pods; "" for none.
	node string
}

// claimTarget resolves which provisioner a claim is for: its class's
// provisioner, else the annotation the PV controller sets.
func (c *Controller) claimTarget(pvc *corev1.PersistentVolumeClaim) (string, *storagev1.StorageClass) {
	var class *storagev1.StorageClass
	if n := pvc.Spec.StorageClassName; n != nil && *n != "" {
		if sc, err := c.classes.Get(*n); err == nil {
			class = sc
			return sc.Provisioner, class
		}
	}
	if v := pvc.Annotations[annStorageProvisioner]; v != "" {
		return v, nil
	}
	return pvc.Annotations[annBetaStorageProvider], nil
}

// handedOver tells whether the PV controller has handed the claim over to
// provisioner name for dynamic provisioning (it annotates claims it found no
// PV for), as external provisioners require before they provision.
func handedOver(pvc *corev1.PersistentVolumeClaim, name string) bool {
	return pvc.Annotations[annStorageProvisioner] == name || pvc.Annotations[annBetaStorageProvider] == name
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
	return s.provision(ctx)
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
	s.c.metrics.operation(s.provName, "provision", "failure", 0)
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

// provisionStep is what a claim needs next.
type provisionStep int

const (
	stepNone          provisionStep = iota // nothing until something changes (a watch requeues the claim)
	stepReport                             // nothing; tell the user why (a change of claim or provisioner requeues it)
	stepPopulator                          // nothing: an external populator fills the claim (a Normal Event says so)
	stepRetry                              // a failed attempt: report, retry with backoff
	stepFinish                             // the volume exists or nothing can run: clean up, let go
	stepBound                              // bound: clean up leftovers, then look at expansion
	stepRevertDone                         // the deletion pod reverting a failed creation
	stepCreationPod                        // the creation pod
	stepValidationPod                      // the validation pod
	stepStart                              // start an attempt
)

// claimView is what a provisioning sync observed of a claim.
type claimView struct {
	pvc          *corev1.PersistentVolumeClaim
	p            *v1alpha1.PavProvisioner // nil: gone
	class        *storagev1.StorageClass  // nil: not found
	pods         map[protocol.Phase]*corev1.Pod
	volumeExists bool // in the cache
	// cloneProblem says why the claim's data source cannot be cloned now;
	// cloneRetry whether that may pass by itself.
	cloneProblem string
	cloneRetry   bool
}

// decideProvision is the provisioning protocol for one claim: pure, so that
// every case is a table row (TestDecideProvision). message explains
// stepReport and stepRetry.
func decideProvision(v claimView) (step provisionStep, message string) {
	pvc := v.pvc
	switch {
	case pvc.Spec.VolumeName != "":
		return stepBound, ""
	case v.volumeExists, v.p == nil:
		// The PV exists; or our finalizer, but the PavProvisioner is gone: nothing can run.
		return stepFinish, ""
	}
	for _, pod := range v.pods {
		if protocol.Going(pod) {
			// A pod of a previous attempt is still going; its name is needed
			// again, and its deletion requeues the claim. (One that PaV's
			// finalizer holds is the attempt's record: carried on below.)
			return stepNone, ""
		}
	}
	if len(v.pods) == 0 {
		// Preconditions are checked only before an attempt starts; an attempt
		// in progress is always carried to its end.
		switch {
		case !handedOver(pvc, v.p.Name):
			// The PV controller may still bind an existing PV; its annotation requeues the claim.
			return stepNone, ""
		case v.p.DeletionTimestamp != nil:
			return stepReport, fmt.Sprintf("PavProvisioner %q is being deleted and provisions no new volumes", v.p.Name)
		case !v.p.HasMode(v1alpha1.Dynamic):
			return stepReport, fmt.Sprintf("PavProvisioner %q does not support dynamic provisioning (spec.provisioningModes lacks %q)", v.p.Name, v1alpha1.Dynamic)
		case v.class == nil:
			return stepRetry, fmt.Sprintf("StorageClass %q not found", ptrString(pvc.Spec.StorageClassName))
		case pvc.Spec.Selector != nil:
			return stepReport, "claims with spec.selector are not supported by PaV provisioners"
		case populatorSource(pvc) != nil:
			// As external-provisioner: the populator makes its own claim of
			// the class (which PaV provisions) and binds this one to it.
			return stepPopulator, fmt.Sprintf("Assuming an external populator will provision the volume (data source of kind %q)", populatorSource(pvc).Kind)
		case v.cloneProblem != "" && v.cloneRetry:
			return stepRetry, v.cloneProblem
		case v.cloneProblem != "":
			return stepReport, v.cloneProblem
		}
	} else if v.class == nil {
		// An attempt in progress carries on even if its clone source went
		// away (its templates then see no source), but needs its class.
		return stepRetry, fmt.Sprintf("StorageClass %q not found", ptrString(pvc.Spec.StorageClassName))
	}
	if m := v.class.VolumeBindingMode; m != nil && *m == storagev1.VolumeBindingWaitForFirstConsumer && pvc.Annotations[annSelectedNode] == "" {
		return stepNone, "" // the scheduler has not picked a node yet; its annotation requeues the claim
	}
	switch {
	case v.pods[protocol.PhaseDeletion] != nil:
		return stepRevertDone, ""
	case v.pods[protocol.PhaseCreation] != nil:
		return stepCreationPod, ""
	case v.pods[protocol.PhaseValidation] != nil:
		return stepValidationPod, ""
	}
	return stepStart, ""
}

// provisionableSince is when the claim could first be provisioned: its
// creation, or for a WaitForFirstConsumer claim the first time this process
// saw a node selected for it (provision records it at every sync of an
// unbound claim, so from the first that saw the scheduler's annotation).
func (s *claimSync) provisionableSince() time.Time {
	if s.pvc.Annotations[annSelectedNode] == "" || s.class == nil || s.class.VolumeBindingMode == nil ||
		*s.class.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer {
		return s.pvc.CreationTimestamp.Time
	}
	return s.c.nodeSelected.seen(s.key, s.pvc.UID, s.c.claimBackoff.now())
}

// provision observes the claim, decides its next step and acts on it.
func (s *claimSync) provision(ctx context.Context) error {
	if s.pvc.Spec.VolumeName == "" {
		s.provisionableSince() // provisioning latency counts from the first sync that may provision
	}
	v := claimView{pvc: s.pvc, p: s.p, class: s.class, pods: s.pods}
	v.volumeExists, _ = s.volumeExists(ctx, false)
	if s.pvc.Spec.VolumeName == "" && !v.volumeExists && s.p != nil {
		v.cloneProblem, v.cloneRetry = s.cloneSource()
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
		if len(s.pods) > 0 || protocol.HasFinalizer(s.pvc, protocol.FinalizerClaim) {
			if err := s.finish(ctx); err != nil {
				return err
			}
		}
		if err := s.expand(ctx); err != nil {
			return err
		}
		return s.modify(ctx)
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

// cloneSource resolves the claim a clone is made from (the claim's data
// source) into s.source and s.sourcePV. problem says why the claim cannot be
// provisioned now, and retry whether that may pass by itself (the source is
// not bound yet) rather than need a change of the claim or provisioner.
func (s *claimSync) cloneSource() (problem string, retry bool) {
	ref := dataSourceRef(s.pvc)
	switch {
	case ref == nil:
		return "", false
	case snapshotSource(s.pvc) != nil:
		return s.restoreSource()
	case populatorSource(s.pvc) != nil:
		return "", false // not a clone: decideProvision leaves it to its populator
	case ref.Namespace != nil && *ref.Namespace != "" && *ref.Namespace != s.pvc.Namespace:
		return fmt.Sprintf("cannot clone claim %s/%s: a clone's source must be in the claim's own namespace", *ref.Namespace, ref.Name), false
	case s.p.Spec.VolumeCreation == nil || !s.p.Spec.VolumeCreation.Cloning:
		return fmt.Sprintf("PavProvisioner %q cannot clone volumes (its spec.volumeCreation.cloning is not true)", s.p.Name), false
	}
	src, err := s.c.claims.PersistentVolumeClaims(s.pvc.Namespace).Get(ref.Name)
	if err != nil {
		return fmt.Sprintf("the claim %q to clone: %v", ref.Name, err), true
	}
	if src.Status.Phase != corev1.ClaimBound || src.Spec.VolumeName == "" {
		return fmt.Sprintf("the claim %q to clone is not bound to a volume yet", ref.Name), true
	}
	pv, err := s.c.volumes.Get(src.Spec.VolumeName)
	if err != nil {
		return fmt.Sprintf("the volume %q of the claim %q to clone: %v", src.Spec.VolumeName, ref.Name, err), true
	}
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != s.p.Name {
		return fmt.Sprintf("claim %q is not a volume of PavProvisioner %q, so it cannot clone it", ref.Name, s.p.Name), false
	}
	if problem, retry := checkClone(s.pvc, src, pv); problem != "" {
		return problem, retry
	}
	s.source, s.sourcePV = src, pv
	if src.DeletionTimestamp != nil {
		// An attempt in progress keeps it (it holds the clone's finalizer); a new one may not start.
		return fmt.Sprintf("the claim %q to clone is being deleted", ref.Name), true
	}
	return "", false
}

// start begins a new attempt: validation.
func (s *claimSync) start(ctx context.Context) error {
	// Refuse before anything is created a claim whose PV could not record it.
	if _, _, err := protocol.Snapshots(s.pvc, s.class); err != nil {
		return s.fail(reasonProvisioningFailed, "%v", err)
	}
	if err := s.resolveClass(ctx); err != nil {
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

// resolveClass reads the VolumeAttributesClass the claim names into s.vac,
// as external-provisioner does before CreateVolume: a class that does not
// exist, or is another driver's, fails the attempt (retried with backoff).
func (s *claimSync) resolveClass(ctx context.Context) error {
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

// startCreation runs the creation pod, or creates the volume directly when
// the provisioner has none.
func (s *claimSync) startCreation(ctx context.Context) error {
	if err := s.resolveClass(ctx); err != nil {
		return err
	}
	cc, err := s.c.engine.Creation(ctx, s.p, s.request())
	if err != nil {
		return s.fail(reasonProvisioningFailed, "evaluating spec.volumeCreation of PavProvisioner %q: %v", s.p.Name, err)
	}
	if s.vac != nil {
		cc.VolumeAttributesClassName = s.vac.Name
	}
	if cc.NodeAffinity == nil && s.topology != nil {
		// The segment the creation is asked to prefer: the selected node's
		// for WaitForFirstConsumer.
		cc.NodeAffinity = s.topology.Preferred[0].NodeAffinity()
	}
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
	handle, capacity, err := s.handleAndCapacity(cc, podOutcome{}, false)
	if err != nil {
		return s.fail(reasonProvisioningFailed, "%v", err)
	}
	return s.createVolume(ctx, cc, handle, capacity, nil, false)
}

func (s *claimSync) handleAndCapacity(cc *templating.CreationConfig, r podOutcome, hadPod bool) (string, resource.Quantity, error) {
	return protocol.ClaimVolume(cc.Handle, cc.Capacity, r.handle, r.capacity, hadPod, s.pvc)
}

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
	// The handle the attempt chose, for a deletion pod reverting it.
	chosen := ""
	if r.handle != nil {
		chosen = strings.TrimSpace(*r.handle)
	}
	if cc != nil && cc.Handle != nil {
		chosen = *cc.Handle
	}
	if protocol.CheckHandle(chosen) != nil {
		// Never into a template: a deletion pod would remove <root>/.. .
		chosen = ""
	}
	if !r.succeeded {
		return s.creationFailed(ctx, fmt.Sprintf("creation pod %s/%s failed: %s", pod.Namespace, pod.Name, r.message), chosen)
	}
	if err != nil {
		return s.creationFailed(ctx, err.Error(), chosen)
	}
	handle, capacity, err := s.handleAndCapacity(cc, r, true)
	if err != nil {
		return s.creationFailed(ctx, err.Error(), chosen)
	}
	attrs, err := protocol.ChooseAttributes(r.attributes, r.resultError, s.class)
	if err != nil {
		return s.creationFailed(ctx, fmt.Sprintf("creation pod %s/%s: %v", pod.Namespace, pod.Name, err), chosen)
	}
	return s.createVolume(ctx, cc, handle, capacity, attrs, true)
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

func (s *claimSync) createVolume(ctx context.Context, cc *templating.CreationConfig, handle string, capacity resource.Quantity, attrs map[string]string, hadPod bool) error {
	pv, err := protocol.BuildVolume(protocol.VolumeSpec{
		Provisioner:  s.p.Name,
		PVC:          s.pvc,
		Class:        s.class,
		Handle:       handle,
		Capacity:     capacity,
		NodeAffinity: cc.NodeAffinity,
		SelectedNode: s.node,
		Attributes:   attrs,

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
		s.c.metrics.operation(s.provName, "provision", "success", s.c.claimBackoff.now().Sub(s.provisionableSince()))
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

// claimDeletionStep is what a claim being deleted needs before it may go.
type claimDeletionStep int

const (
	claimDeletionWait     claimDeletionStep = iota // a pod is going or not done: its events requeue the claim
	claimDeletionFinish                            // nothing (more) to delete: clean up, let the claim go
	claimDeletionFailed                            // the deletion pod failed: report, retry with backoff
	claimDeletionOrphaned                          // no provisioner to delete what was created: report, let go
	claimDeletionRetry                             // the deletion cannot start now: report, retry with backoff
	claimDeletionStart                             // run the deletion (pod, or none)
)

// claimDeletionView is what a sync observed of a claim being deleted while
// PaV holds its finalizer.
type claimDeletionView struct {
	pods         map[protocol.Phase]*corev1.Pod
	podGoing     bool // a pod of a previous attempt is still going
	volumeExists bool // its PV exists (the API server's word)
	// outcome is that of the deletion pod, or without one the creation
	// pod, once it is done (nil before).
	outcome *podOutcome
	p       *v1alpha1.PavProvisioner // nil: gone
	class   *storagev1.StorageClass  // nil: not found
	pvc     *corev1.PersistentVolumeClaim
}

// decideClaimDeletion is the protocol for a claim deleted before it got a
// PV: a creation in progress is allowed to end, and whatever it created is
// deleted before the claim may go. Pure, so that every case is a table row
// (TestDecideClaimDeletion); message explains the reports.
func decideClaimDeletion(v claimDeletionView) (step claimDeletionStep, message string) {
	del, cre := v.pods[protocol.PhaseDeletion], v.pods[protocol.PhaseCreation]
	switch {
	case v.podGoing:
		return claimDeletionWait, ""
	case v.volumeExists:
		// The volume path deletes the PV once it is released.
		return claimDeletionFinish, ""
	case del == nil && cre == nil:
		return claimDeletionFinish, "" // nothing was created
	case v.outcome == nil:
		return claimDeletionWait, ""
	case del != nil && !v.outcome.succeeded:
		return claimDeletionFailed, fmt.Sprintf("deletion pod %s/%s failed: %s", del.Namespace, del.Name, v.outcome.message)
	case del != nil:
		return claimDeletionFinish, ""
	case v.p == nil:
		return claimDeletionOrphaned, fmt.Sprintf("the PavProvisioner is gone; cannot run a deletion pod for what creation pod %s/%s created", cre.Namespace, cre.Name)
	case v.class == nil:
		return claimDeletionRetry, fmt.Sprintf("StorageClass %q not found; it is needed to delete what creation pod %s/%s created", ptrString(v.pvc.Spec.StorageClassName), cre.Namespace, cre.Name)
	}
	return claimDeletionStart, ""
}

// observeDeletion reads what decideClaimDeletion needs, as far as it needs
// it: the PV is read from the API server only when no pod is going, and a
// pod examined (reporting it stuck, scheduling a recheck) only when it is
// the claim's next concern.
func (s *claimSync) observeDeletion(ctx context.Context) (claimDeletionView, error) {
	v := claimDeletionView{pods: s.pods, podGoing: s.anyPodGoing(), p: s.p, class: s.class, pvc: s.pvc}
	if v.podGoing {
		return v, nil
	}
	exists, err := s.volumeExists(ctx, true)
	if err != nil || exists {
		v.volumeExists = exists
		return v, err
	}
	pod := s.pods[protocol.PhaseDeletion]
	if pod == nil {
		pod = s.pods[protocol.PhaseCreation]
	}
	if pod != nil {
		if r, ok := s.finishedPod(ctx, pod); ok {
			v.outcome = &r
		}
	}
	return v, nil
}

// deleted handles a claim being deleted while PaV still holds its finalizer.
func (s *claimSync) deleted(ctx context.Context) error {
	v, err := s.observeDeletion(ctx)
	if err != nil {
		return err
	}
	step, msg := decideClaimDeletion(v)
	switch step {
	case claimDeletionWait:
		return nil
	case claimDeletionFinish:
		return s.finish(ctx)
	case claimDeletionFailed:
		return s.c.podFailed(ctx, s.pods[protocol.PhaseDeletion], msg, func(msg string) error {
			return s.fail(reasonCleanupFailed, "%s", msg)
		})
	case claimDeletionOrphaned:
		s.event(corev1.EventTypeWarning, reasonCleanupFailed, "%s", msg)
		return s.finish(ctx)
	case claimDeletionRetry:
		return s.fail(reasonCleanupFailed, "%s", msg)
	}
	tmpl, err := s.c.engine.Deletion(ctx, s.p, s.request())
	if err != nil {
		return s.fail(reasonCleanupFailed, "evaluating spec.volumeDeletion of PavProvisioner %q: %v", s.p.Name, err)
	}
	if tmpl == nil {
		return s.finish(ctx)
	}
	return s.runPod(ctx, protocol.PhaseDeletion, tmpl, nil)
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
