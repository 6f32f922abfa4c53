package controller

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/templating"
)

func TestDecideModification(t *testing.T) {
	status := func(state corev1.PersistentVolumeClaimModifyVolumeStatus, target string) *corev1.ModifyVolumeStatus {
		return &corev1.ModifyVolumeStatus{Status: state, TargetVolumeAttributesClassName: target}
	}
	inProgress, infeasible, pending := corev1.PersistentVolumeClaimModifyVolumeInProgress, corev1.PersistentVolumeClaimModifyVolumeInfeasible, corev1.PersistentVolumeClaimModifyVolumePending
	byPod := corev1.PersistentVolumeClaimCondition{Type: corev1.PersistentVolumeClaimVolumeModifyVolumeError, Status: corev1.ConditionTrue, Reason: modifyInfeasibleByPod}
	notAllowed := corev1.PersistentVolumeClaimCondition{Type: corev1.PersistentVolumeClaimVolumeModifyVolumeError, Status: corev1.ConditionTrue, Reason: modifyNotAllowed}
	tests := []struct {
		name          string
		spec, current string
		status        *corev1.ModifyVolumeStatus
		conditions    []corev1.PersistentVolumeClaimCondition
		view          modificationView
		want          modifyStep
	}{
		{name: "no class", want: modifyNothing},
		{name: "the class it has", spec: "gold", current: "gold", want: modifyNothing},
		{name: "a pod exists", spec: "gold", current: "silver", view: modificationView{pod: true}, want: modifyPodState},
		{name: "a pod exists whatever the spec says", spec: "silver", current: "silver", status: status(inProgress, "gold"), view: modificationView{pod: true}, want: modifyPodState},
		{name: "a new class", spec: "gold", current: "silver", want: modifyStart},
		{name: "a first class", spec: "gold", want: modifyStart},
		{name: "in progress, no pod (a failed pod, retried)", spec: "gold", current: "silver", status: status(inProgress, "gold"), want: modifyStart},
		{name: "another class while one is in progress", spec: "bronze", current: "silver", status: status(inProgress, "gold"), want: modifyStart},
		{name: "the class does not exist", spec: "gold", current: "silver", view: modificationView{classMissing: true}, want: modifyPending},
		{name: "still missing", spec: "gold", current: "silver", status: status(pending, ""), view: modificationView{classMissing: true}, want: modifyPending},
		{name: "not allowed", spec: "gold", current: "silver", view: modificationView{notAllowed: "no"}, want: modifyInfeasible},
		{name: "the pod found it infeasible", spec: "gold", current: "silver", status: status(infeasible, "gold"), conditions: []corev1.PersistentVolumeClaimCondition{byPod}, view: modificationView{infeasibleRetryIn: time.Minute}, want: modifyWait},
		{name: "the pod found it infeasible, slow retry due", spec: "gold", current: "silver", status: status(infeasible, "gold"), conditions: []corev1.PersistentVolumeClaimCondition{byPod}, want: modifyStart},
		{name: "infeasible by the pod, another class asked", spec: "bronze", current: "silver", status: status(infeasible, "gold"), conditions: []corev1.PersistentVolumeClaimCondition{byPod}, want: modifyStart},
		{name: "not allowed is judged again", spec: "gold", current: "silver", status: status(infeasible, "gold"), conditions: []corev1.PersistentVolumeClaimCondition{notAllowed}, want: modifyStart},
		{name: "rollback from infeasible to the current class", spec: "silver", current: "silver", status: status(infeasible, "gold"), conditions: []corev1.PersistentVolumeClaimCondition{byPod}, want: modifyCancelled},
		{name: "rollback from pending", spec: "silver", current: "silver", status: status(pending, ""), want: modifyCancelled},
		{name: "rollback from in progress runs the pod with the current class", spec: "silver", current: "silver", status: status(inProgress, "gold"), want: modifyStart},
		{name: "no class any more, in progress: carried on", current: "silver", status: status(inProgress, "gold"), want: modifyStart},
		{name: "no class any more, infeasible", current: "silver", status: status(infeasible, "gold"), want: modifyRolledBack},
		{name: "back to no class", status: status(infeasible, "gold"), want: modifyCancelled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pvc := &corev1.PersistentVolumeClaim{}
			if tt.spec != "" {
				pvc.Spec.VolumeAttributesClassName = &tt.spec
			}
			if tt.current != "" {
				pvc.Status.CurrentVolumeAttributesClassName = &tt.current
			}
			pvc.Status.ModifyVolumeStatus, pvc.Status.Conditions = tt.status, tt.conditions
			v := tt.view
			v.pvc = pvc
			if got, _ := decideModification(v); got != tt.want {
				t.Errorf("step %v, want %v", got, tt.want)
			}
		})
	}
}

func attributesClass(name, driver, iops string) *storagev1.VolumeAttributesClass {
	return &storagev1.VolumeAttributesClass{ObjectMeta: metav1.ObjectMeta{Name: name}, DriverName: driver, Parameters: map[string]string{"iops": iops}}
}

// classObjects: testObjects whose claim asks for class silver, and classes
// silver and gold of the provisioner and elsewhere of another driver.
func classObjects() []runtime.Object {
	objs := testObjects()
	for _, o := range objs {
		if pvc, ok := o.(*corev1.PersistentVolumeClaim); ok {
			pvc.Spec.VolumeAttributesClassName = ptr("silver")
		}
	}
	return append(objs, attributesClass("silver", testProvisioner, "1000"), attributesClass("gold", testProvisioner, "3000"),
		attributesClass("elsewhere", "other-driver", "1"))
}

// boundWithClass provisions the claim of classObjects for a provisioner
// that modifies volumes and binds it as the PV controller does (the claim's
// current class is the PV's).
func (h *harness) boundWithClass() {
	h.t.Helper()
	h.prov.Spec.VolumeModification = &v1alpha1.VolumeModification{}
	provisioning.run(h.t, h, 10)
	ctx := context.Background()
	pv, err := h.kube.CoreV1().PersistentVolumes().Get(ctx, testVolume, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	if got := ptrString(pv.Spec.VolumeAttributesClassName); got != "silver" {
		h.t.Fatalf("the PV was created with VolumeAttributesClass %q, want the claim's silver", got)
	}
	pvcs := h.kube.CoreV1().PersistentVolumeClaims("ns")
	pvc, err := pvcs.Get(ctx, "claim", metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	pvc.Spec.VolumeName = testVolume
	pvc.Status.Phase = corev1.ClaimBound
	pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: pv.Spec.Capacity[corev1.ResourceStorage]}
	pvc.Status.CurrentVolumeAttributesClassName = pv.Spec.VolumeAttributesClassName
	if _, err = pvcs.UpdateStatus(ctx, pvc, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// askClass changes the claim's class as its user does (through the tracker).
func (h *harness) askClass(name string) {
	h.t.Helper()
	gvr := corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")
	obj, err := h.kube.Tracker().Get(gvr, "ns", "claim")
	if err != nil {
		h.t.Fatal(err)
	}
	pvc := obj.(*corev1.PersistentVolumeClaim).DeepCopy()
	pvc.Spec.VolumeAttributesClassName = &name
	if err := h.kube.Tracker().Update(gvr, pvc, "ns"); err != nil {
		h.t.Fatal(err)
	}
}

// modifiedTo: the PV and the claim's current class are class, with no
// modification under way, no modification condition and no pod left.
func modifiedTo(class string) func(h *harness) bool {
	return func(h *harness) bool {
		ctx := context.Background()
		pv, err := h.kube.CoreV1().PersistentVolumes().Get(ctx, testVolume, metav1.GetOptions{})
		pvc, err2 := h.kube.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "claim", metav1.GetOptions{})
		pods, _ := h.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		return err == nil && err2 == nil && len(pods.Items) == 0 &&
			ptrString(pv.Spec.VolumeAttributesClassName) == class && ptrString(pvc.Status.CurrentVolumeAttributesClassName) == class &&
			pvc.Status.ModifyVolumeStatus == nil && len(withoutModifyConditions(pvc.Status.Conditions)) == len(pvc.Status.Conditions)
	}
}

// modification: a bound claim of class silver asks for gold; one
// modification pod runs, and the PV and the claim's status end at gold.
var modification = scenario{
	setup:   func(h *harness) { h.boundWithClass(); h.askClass("gold") },
	step:    (*harness).step,
	done:    modifiedTo("gold"),
	check:   func(h *harness) {},
	once:    protocol.PhaseModification,
	objects: classObjects,
}

func TestModificationSurvivesAFaultAtEveryWrite(t *testing.T) {
	testEveryFault(t, modification)
}

// modifyInfeasibleRecorded: the claim's status records class as infeasible
// for reason.
func (h *harness) modifyInfeasibleRecorded(class, reason string) bool {
	return modifyErrorRecord(h.claim(), class, corev1.PersistentVolumeClaimModifyVolumeInfeasible, reason) != nil
}

// infeasibleThenRolledBack: the modification pod finds gold infeasible;
// once the claim's status says so, the user sets the claim back to silver,
// which clears the status without another pod.
var infeasibleThenRolledBack = scenario{
	setup: func(h *harness) {
		h.infeasibleClass = "gold"
		h.boundWithClass()
		h.askClass("gold")
	},
	step: func(h *harness) error {
		err := h.step()
		if ptrString(h.claim().Spec.VolumeAttributesClassName) == "gold" && h.modifyInfeasibleRecorded("gold", modifyInfeasibleByPod) {
			h.askClass("silver")
		}
		return err
	},
	done: func(h *harness) bool {
		// The claim asks for silver again only after gold was found infeasible.
		return ptrString(h.claim().Spec.VolumeAttributesClassName) == "silver" && modifiedTo("silver")(h)
	},
	check:   func(h *harness) {},
	once:    protocol.PhaseModification,
	objects: classObjects,
}

func TestModificationInfeasibleThenRolledBackSurvivesAFaultAtEveryWrite(t *testing.T) {
	testEveryFault(t, infeasibleThenRolledBack)
}

// A class the modification pod found infeasible is recorded as
// external-resizer does, with one Event; no pod runs for it again until the
// slowest retry interval has passed, as external-resizer retries it.
func TestModificationPodInfeasibleIsRetriedSlowly(t *testing.T) {
	h := newHarness(t, classObjects()...)
	h.infeasibleClass = "gold"
	h.boundWithClass()
	h.askClass("gold")
	h.kube.ClearActions()
	drain(h.events)
	// syncs a second apart: backoffs shorter than the slow retry pass
	stepBy := func(d time.Duration) {
		t.Helper()
		h.now = h.now.Add(d)
		h.runPods()
		h.refresh()
		if err := h.c.syncClaim(context.Background(), testClaimKey); err != nil && !isRetryScheduled(err) {
			t.Fatal(err)
		}
	}
	for i := 0; i < 12; i++ {
		stepBy(time.Second)
	}
	if pods := h.podsCreated(protocol.PhaseModification); len(pods) != 1 {
		t.Errorf("%d modification pods created, want 1:\n%s", len(pods), h.describe())
	}
	c := modifyErrorRecord(h.claim(), "gold", corev1.PersistentVolumeClaimModifyVolumeInfeasible, modifyInfeasibleByPod)
	if c == nil || !strings.Contains(c.Message, "the backend has no such tier") {
		t.Errorf("claim status %+v, want gold infeasible with the pod's reason", h.claim().Status)
	}
	if !hasCondition(h.claim(), corev1.PersistentVolumeClaimVolumeModifyingVolume) || ptrString(h.claim().Status.CurrentVolumeAttributesClassName) != "silver" {
		t.Errorf("claim status %+v, want ModifyingVolume and current class silver", h.claim().Status)
	}
	var failed []string
	for _, e := range drain(h.events) {
		if strings.Contains(e, reasonModifyFailed) {
			failed = append(failed, e)
		}
	}
	if len(failed) != 1 || !strings.Contains(failed[0], `cannot take VolumeAttributesClass "gold": the backend has no such tier`) {
		t.Errorf("%s events %q, want one with the pod's reason", reasonModifyFailed, failed)
	}
	// The slow retry: the pod runs again (and here finds it infeasible again).
	stepBy(h.c.claimBackoff.max)
	for i := 0; i < 6; i++ {
		stepBy(time.Second)
	}
	if pods := h.podsCreated(protocol.PhaseModification); len(pods) != 2 {
		t.Errorf("%d modification pods created after the slow retry interval, want 2:\n%s", len(pods), h.describe())
	}
	if modifyErrorRecord(h.claim(), "gold", corev1.PersistentVolumeClaimModifyVolumeInfeasible, modifyInfeasibleByPod) == nil {
		t.Errorf("claim status %+v, want gold infeasible again", h.claim().Status)
	}
}

// A class that does not exist leaves the claim Pending, runs no pod, and is
// modified to once it is created.
func TestModificationPendingUntilTheClassExists(t *testing.T) {
	h := newHarness(t, classObjects()...)
	h.boundWithClass()
	h.askClass("platinum")
	drain(h.events)
	for i := 0; i < 3; i++ {
		_ = h.step()
	}
	if st := h.claim().Status.ModifyVolumeStatus; st == nil || st.Status != corev1.PersistentVolumeClaimModifyVolumePending {
		t.Fatalf("modifyVolumeStatus %+v, want Pending", st)
	}
	if pods := h.podsCreated(protocol.PhaseModification); len(pods) != 0 {
		t.Errorf("%d modification pods for a class that does not exist", len(pods))
	}
	if events := strings.Join(drain(h.events), "\n"); !strings.Contains(events, `VolumeAttributesClass "platinum" does not exist`) {
		t.Errorf("events %q, want one saying the class does not exist", events)
	}
	if _, err := h.kube.StorageV1().VolumeAttributesClasses().Create(context.Background(), attributesClass("platinum", testProvisioner, "9000"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	(scenario{step: (*harness).step, done: modifiedTo("platinum"), check: func(*harness) {}}).run(t, h, 10)
}

// A class of another driver, or a provisioner without volumeModification,
// ends Infeasible without a pod; setting the claim back to its class
// clears it.
func TestModificationNotAllowed(t *testing.T) {
	for _, tt := range []struct {
		name, class, message string
		noSection            bool
	}{
		{name: "another driver's class", class: "elsewhere", message: `VolumeAttributesClass "elsewhere" is for driver "other-driver", not PavProvisioner "prov"`},
		{name: "no volumeModification", class: "gold", noSection: true, message: `PavProvisioner "prov" cannot modify volumes (it has no spec.volumeModification)`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, classObjects()...)
			h.boundWithClass()
			if tt.noSection {
				h.prov.Spec.VolumeModification = nil
			}
			h.askClass(tt.class)
			for i := 0; i < 3; i++ {
				_ = h.step()
			}
			c := modifyErrorRecord(h.claim(), tt.class, corev1.PersistentVolumeClaimModifyVolumeInfeasible, modifyNotAllowed)
			if c == nil || c.Message != tt.message {
				t.Errorf("claim status %+v, want Infeasible: %s", h.claim().Status, tt.message)
			}
			if pods := h.podsCreated(protocol.PhaseModification); len(pods) != 0 {
				t.Errorf("%d modification pods", len(pods))
			}
			h.askClass("silver")
			(scenario{step: (*harness).step, done: modifiedTo("silver"), check: func(*harness) {}}).run(t, h, 10)
			if pods := h.podsCreated(protocol.PhaseModification); len(pods) != 0 {
				t.Errorf("%d modification pods for a rollback", len(pods))
			}
		})
	}
}

// classEngine is stubEngine recording the classes the creation and
// modification contexts get.
type classEngine struct {
	stubEngine
	mu   *sync.Mutex
	seen *[]string
}

func (e classEngine) record(what string, vac *storagev1.VolumeAttributesClass) {
	e.mu.Lock()
	defer e.mu.Unlock()
	name := "none"
	if vac != nil {
		name = vac.Name + ":" + vac.Parameters["iops"]
	}
	*e.seen = append(*e.seen, what+"="+name)
}

func (e classEngine) Creation(ctx context.Context, p *v1alpha1.PavProvisioner, req templating.DynamicRequest) (*templating.CreationConfig, error) {
	e.record("creation", req.VolumeAttributesClass)
	return e.stubEngine.Creation(ctx, p, req)
}

func (e classEngine) Modification(ctx context.Context, p *v1alpha1.PavProvisioner, req templating.DynamicRequest) (*corev1.PodTemplateSpec, bool, error) {
	e.record("new", req.VolumeAttributesClass)
	e.record("current", req.CurrentVolumeAttributesClass)
	return e.stubEngine.Modification(ctx, p, req)
}

// Creation sees the claim's class, modification the new and the current one.
func TestClassesInTheContexts(t *testing.T) {
	h := newHarness(t, classObjects()...)
	var seen []string
	h.engine = classEngine{mu: &sync.Mutex{}, seen: &seen}
	h.restart()
	h.boundWithClass()
	h.askClass("gold")
	(scenario{step: (*harness).step, done: modifiedTo("gold"), check: func(*harness) {}}).run(t, h, 10)
	want := []string{"creation=silver:1000", "new=gold:3000", "current=silver:1000"}
	if strings.Join(seen, " ") != strings.Join(want, " ") {
		t.Errorf("contexts saw %q, want %q", seen, want)
	}
}

// A claim naming a class that does not exist, or another driver's, is not
// provisioned: an Event says why, and no pod runs.
func TestCreationRefusesAClassItCannotUse(t *testing.T) {
	for class, message := range map[string]string{
		"platinum":  `VolumeAttributesClass "platinum" not found`,
		"elsewhere": `VolumeAttributesClass "elsewhere" is for driver "other-driver", not PavProvisioner "prov"`,
	} {
		t.Run(class, func(t *testing.T) {
			h := newHarness(t, classObjects()...)
			h.askClass(class)
			if err := h.step(); err == nil {
				t.Error("no error")
			}
			if events := strings.Join(drain(h.events), "\n"); !strings.Contains(events, message) {
				t.Errorf("events %q, want %q", events, message)
			}
			if pods, _ := h.kube.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{}); len(pods.Items) != 0 {
				t.Errorf("%d pods created", len(pods.Items))
			}
		})
	}
}

// staticObjects: claim "claim" with no class bound to static-pv, a PV of
// the provisioner made by hand (PaV did not provision it), asking for 5Gi
// and VolumeAttributesClass gold.
func staticObjects() []runtime.Object {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "claim", UID: "claim-uid"},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName:          ptr(""),
			VolumeName:                "static-pv",
			AccessModes:               []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:                 corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("5Gi")}},
			VolumeAttributesClassName: ptr("gold"),
		},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "static-pv"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			ClaimRef:               &corev1.ObjectReference{Namespace: "ns", Name: "claim", UID: "claim-uid"},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: testProvisioner, VolumeHandle: "existing"}},
		},
	}
	return []runtime.Object{pvc, pv, attributesClass("gold", testProvisioner, "3000")}
}

// Expanding or modifying a static PV of a PaV provisioner is refused as
// external-resizer refuses what a driver cannot do: infeasible status and
// condition, and an Event, not silence; and no pod runs.
func TestStaticVolumeExpansionAndModificationAreRefused(t *testing.T) {
	h := newHarness(t, staticObjects()...)
	h.prov.Spec.VolumeExpansion = &v1alpha1.VolumeExpansion{}
	h.prov.Spec.VolumeModification = &v1alpha1.VolumeModification{}
	for i := 0; i < 3; i++ {
		_ = h.step()
	}
	if !h.infeasibleRecorded("5Gi", infeasibleNotAllowed) {
		t.Errorf("the claim's status does not record the expansion as infeasible: %+v", h.claim().Status)
	}
	if !h.modifyInfeasibleRecorded("gold", modifyNotAllowed) {
		t.Errorf("the claim's status does not record the modification as infeasible: %+v", h.claim().Status)
	}
	events := strings.Join(drain(h.events), "\n")
	for _, want := range []string{
		"cannot expand volume static-pv to 5Gi: it was not provisioned by PaV",
		"volume static-pv was not provisioned by PaV",
	} {
		if !strings.Contains(events, want) {
			t.Errorf("events:\n%s\nwant %q", events, want)
		}
	}
	if pods, _ := h.kube.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{}); len(pods.Items) != 0 {
		t.Errorf("%d pods for a static volume", len(pods.Items))
	}
	pv, _ := h.kube.CoreV1().PersistentVolumes().Get(context.Background(), "static-pv", metav1.GetOptions{})
	if pv.Spec.Capacity.Storage().String() != "1Gi" || pv.Spec.VolumeAttributesClassName != nil || len(pv.Finalizers) != 0 {
		t.Errorf("the static PV changed: %+v", pv.Spec)
	}
}
