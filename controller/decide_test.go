package controller

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/protocol"
)

func TestDecideProvision(t *testing.T) {
	now := metav1.Now()
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	pod := func(phase protocol.Phase, going bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: string(phase)}}
		if going {
			p.DeletionTimestamp = &now
		}
		return p
	}
	// base is a claim handed over to provisioner "prov", Immediate binding, no pods.
	base := func() claimView {
		return claimView{
			pvc: &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c",
				Annotations: map[string]string{protocol.AnnotationStorageProvisioner: "prov"}}},
			p:     provisionerFixture("prov"),
			class: &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "sc"}, Provisioner: "prov"},
			pods:  map[protocol.Phase]*corev1.Pod{},
		}
	}
	tests := []struct {
		name    string
		change  func(v *claimView)
		want    provisionStep
		message string // a part of the message
	}{
		{"new claim starts", func(v *claimView) {}, stepStart, ""},
		{"bound claim", func(v *claimView) { v.pvc.Spec.VolumeName = "pv" }, stepBound, ""},
		{"volume already exists", func(v *claimView) { v.volumeExists = true }, stepFinish, ""},
		{"provisioner gone", func(v *claimView) { v.p = nil }, stepFinish, ""},
		{"not handed over yet", func(v *claimView) { v.pvc.Annotations = nil }, stepNone, ""},
		{"beta annotation counts", func(v *claimView) {
			v.pvc.Annotations = map[string]string{protocol.AnnotationBetaStorageProvisioner: "prov"}
		}, stepStart, ""},
		{"provisioner being deleted", func(v *claimView) { v.p.DeletionTimestamp = &now }, stepReport, "being deleted"},
		{"static-only provisioner", func(v *claimView) { v.p.Spec.ProvisioningModes = []v1alpha1.ProvisioningMode{v1alpha1.Static} }, stepReport, "does not support dynamic"},
		{"class missing", func(v *claimView) { v.class = nil }, stepRetry, "not found"},
		{"selector", func(v *claimView) { v.pvc.Spec.Selector = &metav1.LabelSelector{} }, stepReport, "spec.selector"},
		{"clone source not bound yet", func(v *claimView) { v.cloneProblem, v.cloneRetry = "not bound", true }, stepRetry, "not bound"},
		{"clone refused", func(v *claimView) { v.cloneProblem = "cannot clone" }, stepReport, "cannot clone"},
		{"populator's data source", func(v *claimView) {
			group := "populators.example.com"
			v.pvc.Spec.DataSourceRef = &corev1.TypedObjectReference{APIGroup: &group, Kind: "Hello", Name: "h"}
		}, stepPopulator, `external populator will provision the volume (data source of kind "Hello")`},
		{"a core kind other than a claim is a populator's", func(v *claimView) {
			v.pvc.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "ConfigMap", Name: "h"}
		}, stepPopulator, "external populator"},
		{"a claim's data source is a clone, not a populator's", func(v *claimView) {
			v.pvc.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "src"}
		}, stepStart, ""},
		{"waiting for the scheduler", func(v *claimView) { v.class.VolumeBindingMode = &wffc }, stepNone, ""},
		{"scheduler picked a node", func(v *claimView) {
			v.class.VolumeBindingMode = &wffc
			v.pvc.Annotations[annSelectedNode] = "n1"
		}, stepStart, ""},
		{"validation pod", func(v *claimView) { v.pods[protocol.PhaseValidation] = pod(protocol.PhaseValidation, false) }, stepValidationPod, ""},
		{"creation pod wins over a leftover validation pod", func(v *claimView) {
			v.pods[protocol.PhaseValidation] = pod(protocol.PhaseValidation, false)
			v.pods[protocol.PhaseCreation] = pod(protocol.PhaseCreation, false)
		}, stepCreationPod, ""},
		{"revert pod wins", func(v *claimView) {
			v.pods[protocol.PhaseCreation] = pod(protocol.PhaseCreation, false)
			v.pods[protocol.PhaseDeletion] = pod(protocol.PhaseDeletion, false)
		}, stepRevertDone, ""},
		{"a pod still going", func(v *claimView) { v.pods[protocol.PhaseValidation] = pod(protocol.PhaseValidation, true) }, stepNone, ""},
		{"attempt in progress ignores new preconditions", func(v *claimView) {
			v.pods[protocol.PhaseCreation] = pod(protocol.PhaseCreation, false)
			v.p.DeletionTimestamp = &now
			v.pvc.Annotations = nil
			v.cloneProblem = "source gone"
		}, stepCreationPod, ""},
		{"attempt in progress needs its class", func(v *claimView) {
			v.pods[protocol.PhaseCreation] = pod(protocol.PhaseCreation, false)
			v.class = nil
		}, stepRetry, "not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := base()
			tt.change(&v)
			got, msg := decideProvision(v)
			if got != tt.want || !strings.Contains(msg, tt.message) || (tt.message == "" && msg != "") {
				t.Errorf("decideProvision = %v %q, want %v %q", got, msg, tt.want, tt.message)
			}
		})
	}
}

func TestDecideProvisionerStatus(t *testing.T) {
	invalid := field.ErrorList{field.Required(field.NewPath("spec", "volumeStaging"), "")}
	withValid := func(status metav1.ConditionStatus, msg string) *v1alpha1.PavProvisioner {
		p := provisionerFixture("prov")
		p.Generation = 3
		p.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionValid, Status: status, Message: msg}}
		return p
	}
	tests := []struct {
		name                 string
		p                    *v1alpha1.PavProvisioner
		errs                 field.ErrorList
		csiProblem           string
		valid, ready, reason string // statuses and the Ready reason
		event                bool
	}{
		{"valid and ready", provisionerFixture("prov"), nil, "", "True", "True", reasonReady, false},
		{"newly invalid: event", withValid(metav1.ConditionTrue, ""), invalid, "", "False", "False", reasonInvalid, true},
		{"still invalid, same message: no event", withValid(metav1.ConditionFalse, invalid.ToAggregate().Errors()[0].Error()), invalid, "", "False", "False", reasonInvalid, false},
		{"foreign CSIDriver", provisionerFixture("prov"), nil, "a CSIDriver exists", "True", "False", reasonCSIDriverError, false},
		{"both: the CSIDriver problem is what Ready says", provisionerFixture("prov"), invalid, "a CSIDriver exists", "False", "False", reasonCSIDriverError, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, event := decideProvisionerStatus(tt.p, tt.errs, tt.csiProblem)
			valid := meta.FindStatusCondition(status.Conditions, v1alpha1.ConditionValid)
			ready := meta.FindStatusCondition(status.Conditions, v1alpha1.ConditionReady)
			if string(valid.Status) != tt.valid || string(ready.Status) != tt.ready || ready.Reason != tt.reason {
				t.Errorf("Valid=%s Ready=%s (%s), want Valid=%s Ready=%s (%s)", valid.Status, ready.Status, ready.Reason, tt.valid, tt.ready, tt.reason)
			}
			if (event != "") != tt.event {
				t.Errorf("event %q, want one: %v", event, tt.event)
			}
			if status.ObservedGeneration != tt.p.Generation || ready.ObservedGeneration != tt.p.Generation {
				t.Errorf("observed generation %d/%d, want %d", status.ObservedGeneration, ready.ObservedGeneration, tt.p.Generation)
			}
		})
	}
}

func TestDecideVolume(t *testing.T) {
	now := metav1.Now()
	pv := func(policy corev1.PersistentVolumeReclaimPolicy, phase corev1.PersistentVolumePhase, deleted, ours bool) *corev1.PersistentVolume {
		v := &corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{PersistentVolumeReclaimPolicy: policy}, Status: corev1.PersistentVolumeStatus{Phase: phase}}
		v.Annotations = map[string]string{protocol.AnnotationProvisionedBy: "prov"}
		if deleted {
			v.DeletionTimestamp = &now
		}
		if ours {
			v.Finalizers = []string{"kubernetes.io/pv-protection", protocol.FinalizerVolume}
		}
		return v
	}
	del, ret := corev1.PersistentVolumeReclaimDelete, corev1.PersistentVolumeReclaimRetain
	view := func(p *corev1.PersistentVolume) volumeView {
		return volumeView{pv: p, changesDone: true, provisioner: true}
	}
	released := func() volumeView { return view(pv(del, corev1.VolumeReleased, false, true)) }
	with := func(v volumeView, change func(v *volumeView)) volumeView { change(&v); return v }
	deletionPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "pav-pods", Name: "deletion"}}
	expansionPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "pav-pods", Name: "expansion"}}
	tests := []struct {
		name    string
		v       volumeView
		want    volumeStep
		message string // a part of the message
	}{
		{"not PaV's", view(pv(del, corev1.VolumeReleased, false, false)), volumeNotPaVs, ""},
		{"bound", view(pv(del, corev1.VolumeBound, false, true)), volumeInUse, ""},
		{"released", released(), volumeStartDeletion, ""},
		{"failed", view(pv(del, corev1.VolumeFailed, false, true)), volumeStartDeletion, ""},
		{"deleted while available", view(pv(del, corev1.VolumeAvailable, true, true)), volumeStartDeletion, ""},
		{"deleted while bound: kubernetes.io/pv-protection holds it", view(pv(del, corev1.VolumeBound, true, true)), volumeInUse, ""},
		{"retained, bound", view(pv(ret, corev1.VolumeBound, false, true)), volumeInUse, ""},
		{"retained, released", view(pv(ret, corev1.VolumeReleased, false, true)), volumeRetainedReleased, ""},
		{"retained, PV deleted", view(pv(ret, corev1.VolumeReleased, true, true)), volumeRetainedDeleted, ""},
		{"recycle counts as keep", view(pv(corev1.PersistentVolumeReclaimRecycle, corev1.VolumeReleased, false, true)), volumeRetainedReleased, ""},
		{"retained, pods ignored", with(view(pv(ret, corev1.VolumeReleased, false, true)), func(v *volumeView) { v.staged = true }), volumeRetainedReleased, ""},
		{"backing off", with(released(), func(v *volumeView) { v.backoff = time.Second }), volumeBackoff, ""},
		{"backing off before anything else", with(released(), func(v *volumeView) { v.backoff, v.staged = time.Second, true }), volumeBackoff, ""},
		{"still staged", with(released(), func(v *volumeView) { v.staged = true }), volumeWait, ""},
		{"an expansion still going", with(released(), func(v *volumeView) { v.changes, v.changesDone = []*corev1.Pod{expansionPod}, false }), volumeWait, ""},
		{"an expansion done", with(released(), func(v *volumeView) { v.changes = []*corev1.Pod{expansionPod} }), volumeEndChanges, ""},
		{"deletion pod not done", with(released(), func(v *volumeView) { v.deletion = deletionPod }), volumeWait, ""},
		{"deletion pod failed", with(released(), func(v *volumeView) {
			v.deletion, v.outcome = deletionPod, &podOutcome{done: true, message: "exit 3"}
		}), volumeDeletionFailed, "deletion pod pav-pods/deletion failed: exit 3"},
		{"deletion pod succeeded", with(released(), func(v *volumeView) {
			v.deletion, v.outcome = deletionPod, &podOutcome{done: true, succeeded: true}
		}), volumeDeletionDone, ""},
		{"deletion pod succeeded, provisioner gone since", with(released(), func(v *volumeView) {
			v.deletion, v.outcome, v.provisioner = deletionPod, &podOutcome{done: true, succeeded: true}, false
		}), volumeDeletionDone, ""},
		{"provisioner gone", with(released(), func(v *volumeView) { v.provisioner = false }), volumeCannotDelete, `PavProvisioner "prov" not found`},
	}
	for _, tt := range tests {
		got, msg := decideVolume(tt.v)
		if got != tt.want || !strings.Contains(msg, tt.message) || (tt.message == "") != (msg == "") {
			t.Errorf("%s: decideVolume = %d, %q; want %d, %q", tt.name, got, msg, tt.want, tt.message)
		}
	}
}

func TestDecideClaimDeletion(t *testing.T) {
	now := metav1.Now()
	creation := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "pav-pods", Name: "creation"}}
	deletion := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "pav-pods", Name: "deletion"}}
	going := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "pav-pods", Name: "validation", DeletionTimestamp: &now}}
	sc := "sc"
	// base: a claim deleted after its creation pod finished.
	base := func() claimDeletionView {
		return claimDeletionView{
			pods:    map[protocol.Phase]*corev1.Pod{protocol.PhaseCreation: creation},
			outcome: &podOutcome{done: true, succeeded: true},
			p:       provisionerFixture("prov"),
			class:   &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: sc}},
			pvc:     &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &sc}},
		}
	}
	tests := []struct {
		name    string
		change  func(v *claimDeletionView)
		want    claimDeletionStep
		message string // a part of the message
	}{
		{"creation done: delete what it made", func(v *claimDeletionView) {}, claimDeletionStart, ""},
		{"creation failed: delete what it may have made", func(v *claimDeletionView) { v.outcome.succeeded = false }, claimDeletionStart, ""},
		{"a pod still going", func(v *claimDeletionView) { v.podGoing = true; v.pods[protocol.PhaseValidation] = going }, claimDeletionWait, ""},
		{"the PV exists", func(v *claimDeletionView) { v.volumeExists = true }, claimDeletionFinish, ""},
		{"no pods: nothing created", func(v *claimDeletionView) { v.pods, v.outcome = nil, nil }, claimDeletionFinish, ""},
		{"only a validation pod: nothing created", func(v *claimDeletionView) {
			v.pods, v.outcome = map[protocol.Phase]*corev1.Pod{protocol.PhaseValidation: going}, nil
		}, claimDeletionFinish, ""},
		{"creation not done", func(v *claimDeletionView) { v.outcome = nil }, claimDeletionWait, ""},
		{"deletion pod not done", func(v *claimDeletionView) { v.pods[protocol.PhaseDeletion], v.outcome = deletion, nil }, claimDeletionWait, ""},
		{"deletion pod failed", func(v *claimDeletionView) {
			v.pods[protocol.PhaseDeletion], v.outcome = deletion, &podOutcome{done: true, message: "exit 1"}
		}, claimDeletionFailed, "deletion pod pav-pods/deletion failed: exit 1"},
		{"deletion pod succeeded", func(v *claimDeletionView) { v.pods[protocol.PhaseDeletion] = deletion }, claimDeletionFinish, ""},
		{"deletion pod succeeded, provisioner gone since", func(v *claimDeletionView) { v.pods[protocol.PhaseDeletion], v.p = deletion, nil }, claimDeletionFinish, ""},
		{"provisioner gone", func(v *claimDeletionView) { v.p = nil }, claimDeletionOrphaned, "PavProvisioner is gone"},
		{"class gone", func(v *claimDeletionView) { v.class = nil }, claimDeletionRetry, `StorageClass "sc" not found`},
	}
	for _, tt := range tests {
		v := base()
		v.pods = map[protocol.Phase]*corev1.Pod{protocol.PhaseCreation: creation}
		tt.change(&v)
		got, msg := decideClaimDeletion(v)
		if got != tt.want || !strings.Contains(msg, tt.message) || (tt.message == "") != (msg == "") {
			t.Errorf("%s: decideClaimDeletion = %d, %q; want %d, %q", tt.name, got, msg, tt.want, tt.message)
		}
	}
}

func TestDecideExpansion(t *testing.T) {
	q := resource.MustParse
	// infeasible is a claim whose status records growing to size as infeasible, for reason.
	infeasible := func(size, reason string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{Status: corev1.PersistentVolumeClaimStatus{
			AllocatedResources:        corev1.ResourceList{corev1.ResourceStorage: q(size)},
			AllocatedResourceStatuses: map[corev1.ResourceName]corev1.ClaimResourceStatus{corev1.ResourceStorage: corev1.PersistentVolumeClaimControllerResizeInfeasible},
			Conditions:                []corev1.PersistentVolumeClaimCondition{{Type: corev1.PersistentVolumeClaimControllerResizeError, Status: corev1.ConditionTrue, Reason: reason}},
		}}
	}
	inProgress := infeasible("5Ti", "")
	inProgress.Status.AllocatedResourceStatuses[corev1.ResourceStorage] = corev1.PersistentVolumeClaimControllerResizeInProgress
	tests := []struct {
		name       string
		pvc        *corev1.PersistentVolumeClaim
		want, have string
		pod        bool
		notAllowed string
		step       expansionStep
	}{
		{"nothing asked", &corev1.PersistentVolumeClaim{}, "1Gi", "1Gi", false, "", expandDone},
		{"less than the volume has", &corev1.PersistentVolumeClaim{}, "1Gi", "2Gi", false, "", expandDone},
		{"more asked", &corev1.PersistentVolumeClaim{}, "2Gi", "1Gi", false, "", expandStart},
		{"pod under way", &corev1.PersistentVolumeClaim{}, "2Gi", "1Gi", true, "", expandPodState},
		{"pod under way, request raised beyond the provisioner's maximum meanwhile", &corev1.PersistentVolumeClaim{}, "5Ti", "1Gi", true, "", expandPodState},
		{"not allowed", &corev1.PersistentVolumeClaim{}, "5Ti", "1Gi", false, "above the maximum", expandInfeasible},
		{"not allowed, already recorded: expansionInfeasible writes nothing twice", infeasible("5Ti", infeasibleNotAllowed), "5Ti", "1Gi", false, "above the maximum", expandInfeasible},
		{"recorded not allowed, now allowed (the provisioner changed)", infeasible("5Ti", infeasibleNotAllowed), "5Ti", "1Gi", false, "", expandStart},
		{"the pod found this size infeasible", infeasible("5Ti", infeasibleByPod), "5Ti", "1Gi", false, "", expandNothing},
		{"the pod found another size infeasible: the request was lowered", infeasible("5Ti", infeasibleByPod), "2Gi", "1Gi", false, "", expandStart},
		{"the pod found it infeasible, then the request dropped to what the volume has", infeasible("5Ti", infeasibleByPod), "1Gi", "1Gi", false, "", expandDone},
		{"a resize in progress is not a record of infeasibility", inProgress, "5Ti", "1Gi", false, "", expandStart},
	}
	for _, tt := range tests {
		step, msg := decideExpansion(expansionView{pvc: tt.pvc, want: q(tt.want), have: q(tt.have), pod: tt.pod, notAllowed: tt.notAllowed})
		if step != tt.step || msg != map[bool]string{true: tt.notAllowed}[step == expandInfeasible] {
			t.Errorf("%s: decideExpansion = %d %q, want %d", tt.name, step, msg, tt.step)
		}
	}
}
