package controller

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/protocol"
)

// The provisioning protocol of a claim without a PV: what the sync
// observed (claimView), the steps it may take (provisionStep), and the pure
// decision between them (decideProvision), which advance acts on.

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
	if step, message, held := attemptHeld(v); held {
		return step, message
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

// attemptHeld says what holds a claim without a PV back (held), if
// anything does. Preconditions are checked only before an attempt starts;
// an attempt in progress is always carried to its end.
func attemptHeld(v claimView) (step provisionStep, message string, held bool) {
	pvc := v.pvc
	if len(v.pods) > 0 {
		if v.class == nil {
			// An attempt in progress carries on even if its clone source went
			// away (its templates then see no source), but needs its class.
			return stepRetry, fmt.Sprintf("StorageClass %q not found", ptrString(pvc.Spec.StorageClassName)), true
		}
		return stepNone, "", false
	}
	switch {
	case !handedOver(pvc, v.p.Name):
		// The PV controller may still bind an existing PV; its annotation requeues the claim.
		return stepNone, "", true
	case v.p.DeletionTimestamp != nil:
		return stepReport, fmt.Sprintf("PavProvisioner %q is being deleted and provisions no new volumes", v.p.Name), true
	case !v.p.HasMode(v1alpha1.Dynamic):
		return stepReport, fmt.Sprintf("PavProvisioner %q does not support dynamic provisioning (spec.provisioningModes lacks %q)", v.p.Name, v1alpha1.Dynamic), true
	case v.class == nil:
		return stepRetry, fmt.Sprintf("StorageClass %q not found", ptrString(pvc.Spec.StorageClassName)), true
	case pvc.Spec.Selector != nil:
		return stepReport, "claims with spec.selector are not supported by PaV provisioners", true
	case populatorSource(pvc) != nil:
		// As external-provisioner: the populator makes its own claim of
		// the class (which PaV provisions) and binds this one to it.
		return stepPopulator, fmt.Sprintf("Assuming an external populator will provision the volume (data source of kind %q)", populatorSource(pvc).Kind), true
	case v.cloneProblem != "" && v.cloneRetry:
		return stepRetry, v.cloneProblem, true
	case v.cloneProblem != "":
		return stepReport, v.cloneProblem, true
	}
	return stepNone, "", false
}

// handedOver tells whether the PV controller has handed the claim over to
// provisioner name for dynamic provisioning (it annotates claims it found no
// PV for), as external provisioners require before they provision.
func handedOver(pvc *corev1.PersistentVolumeClaim, name string) bool {
	return pvc.Annotations[protocol.AnnotationStorageProvisioner] == name || pvc.Annotations[protocol.AnnotationBetaStorageProvisioner] == name
}
