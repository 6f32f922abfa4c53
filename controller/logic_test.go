package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/internal/metricstest"
	"github.com/albertofaria/pav/protocol"
)

func strp(s string) *string { return &s }

func TestBackoff(t *testing.T) {
	now := time.Unix(1000, 0)
	b := newBackoff(time.Second, 5*time.Minute)
	b.now = func() time.Time { return now }
	want := []time.Duration{1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300}
	for i, w := range want {
		if got := b.failed("k"); got != w*time.Second {
			t.Fatalf("failure %d: delay %v, want %v", i+1, got, w*time.Second)
		}
	}
	if got := b.wait("k"); got != 300*time.Second {
		t.Errorf("wait = %v, want 300s", got)
	}
	now = now.Add(301 * time.Second)
	if got := b.wait("k"); got != 0 {
		t.Errorf("wait after the delay = %v, want 0", got)
	}
	if b.wait("other") != 0 {
		t.Errorf("unrelated key is backed off")
	}
	b.succeeded("k")
	if got := b.failed("k"); got != time.Second {
		t.Errorf("after success the delay restarts at 1s, got %v", got)
	}
}

func claim(req, limit string) *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "u1", Annotations: map[string]string{"a": "b"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "x"}}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(req)}},
		},
	}
	if limit != "" {
		pvc.Spec.Resources.Limits = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(limit)}
	}
	return pvc
}

func TestBuildVolumeAndRequestRoundTrip(t *testing.T) {
	retain := corev1.PersistentVolumeReclaimRetain
	block := corev1.PersistentVolumeBlock
	pvc := claim("1Gi", "")
	pvc.Spec.VolumeMode = &block
	pvc.Spec.StorageClassName = strp("sc")
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "sc"}, Provisioner: "prov",
		Parameters:    map[string]string{"k": "v", "csi.storage.k8s.io/node-publish-secret-name": "s", protocol.ParameterFSType: "xfs"},
		ReclaimPolicy: &retain, MountOptions: []string{"ro"}}
	aff := &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n1"}}}}}}}
	pv, err := protocol.BuildVolume(protocol.VolumeSpec{Provisioner: "prov", PVC: pvc, Class: sc, Handle: "h", Capacity: resource.MustParse("2Gi"), NodeAffinity: aff, SelectedNode: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	checks := map[string]bool{
		"name":                     pv.Name == "pvc-u1",
		"claimRef":                 pv.Spec.ClaimRef.UID == "u1" && pv.Spec.ClaimRef.Name == "c" && pv.Spec.ClaimRef.Namespace == "ns",
		"provisionedBy":            pv.Annotations[protocol.AnnotationProvisionedBy] == "prov",
		"class":                    pv.Spec.StorageClassName == "sc",
		"mode":                     *pv.Spec.VolumeMode == block,
		"access":                   len(pv.Spec.AccessModes) == 1 && pv.Spec.AccessModes[0] == corev1.ReadWriteOnce,
		"capacity":                 pv.Spec.Capacity.Storage().Cmp(resource.MustParse("2Gi")) == 0,
		"reclaim":                  pv.Spec.PersistentVolumeReclaimPolicy == retain,
		"mountOptions":             len(pv.Spec.MountOptions) == 1,
		"csi":                      pv.Spec.CSI.Driver == "prov" && pv.Spec.CSI.VolumeHandle == "h" && pv.Spec.CSI.VolumeAttributes["k"] == "v",
		"reserved params kept out": len(pv.Spec.CSI.VolumeAttributes) == 1,
		"affinity":                 pv.Spec.NodeAffinity != nil && pv.Spec.NodeAffinity != aff,
		"finalizer":                protocol.HasFinalizer(pv, protocol.FinalizerVolume),
		"selectedNode":             pv.Annotations[protocol.AnnotationSelectedNode] == "n1",
		"no fsType for Block":      pv.Spec.CSI.FSType == "",
	}
	for k, ok := range checks {
		if !ok {
			t.Errorf("%s wrong in %+v", k, pv)
		}
	}
	req, err := requestFromVolume(pv)
	if err != nil {
		t.Fatal(err)
	}
	if req.PVC.UID != "u1" || req.PVC.Annotations["a"] != "b" || req.PVC.ManagedFields != nil || req.PVC.Kind != "PersistentVolumeClaim" {
		t.Errorf("claim snapshot: %+v", req.PVC)
	}
	if req.Class.Name != "sc" || req.Class.Parameters["k"] != "v" || req.SelectedNodeName != "n1" {
		t.Errorf("class snapshot: %+v, node %q", req.Class, req.SelectedNodeName)
	}

	// Default reclaim policy is Delete, default mode Filesystem.
	sc.ReclaimPolicy = nil
	pvc.Spec.VolumeMode = nil
	pv, _ = protocol.BuildVolume(protocol.VolumeSpec{Provisioner: "prov", PVC: pvc, Class: sc, Handle: "h", Capacity: resource.MustParse("1Gi")})
	if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete || *pv.Spec.VolumeMode != corev1.PersistentVolumeFilesystem {
		t.Errorf("defaults: %v %v", pv.Spec.PersistentVolumeReclaimPolicy, *pv.Spec.VolumeMode)
	}
	// A Filesystem volume gets the class's csi.storage.k8s.io/fstype, as with external-provisioner.
	if pv.Spec.CSI.FSType != "xfs" {
		t.Errorf("fsType %q, want the class's xfs", pv.Spec.CSI.FSType)
	}
	if _, ok := pv.Annotations[protocol.AnnotationSelectedNode]; ok {
		t.Errorf("selected node annotation without a selected node")
	}
}

func TestRequestFromVolumeErrors(t *testing.T) {
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv"}}
	if _, err := requestFromVolume(pv); err == nil {
		t.Error("no snapshots: no error")
	}
	pv.Annotations = map[string]string{protocol.AnnotationClaimSnapshot: "{", protocol.AnnotationClassSnapshot: "{}"}
	if _, err := requestFromVolume(pv); err == nil {
		t.Error("bad JSON: no error")
	}
}

func TestExaminePod(t *testing.T) {
	now := time.Unix(10000, 0)
	finished := metav1.NewTime(now.Add(-10 * time.Second))
	mk := func(phase corev1.PodPhase, pavPhase protocol.Phase, ann map[string]string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Annotations: ann, Labels: map[string]string{protocol.LabelPhase: string(pavPhase)}},
			Status: corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{Name: "c",
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: map[bool]int32{true: 0, false: 1}[phase == corev1.PodSucceeded], FinishedAt: finished}}}}},
		}
	}
	collected := map[string]string{protocol.AnnotationResultsCollected: "true", protocol.AnnotationResultHandle: "h", protocol.AnnotationResultCapacity: "1Gi"}

	if r := examinePod(mk(corev1.PodRunning, protocol.PhaseCreation, nil), now, time.Minute, nil); r.done || r.recheck != 0 {
		t.Errorf("running pod: %+v", r)
	}
	r := examinePod(mk(corev1.PodSucceeded, protocol.PhaseCreation, nil), now, time.Minute, nil)
	if r.done || r.recheck != 50*time.Second {
		t.Errorf("uncollected pod within the timeout: %+v", r)
	}
	r = examinePod(mk(corev1.PodSucceeded, protocol.PhaseCreation, collected), now, time.Minute, nil)
	if !r.done || !r.succeeded || *r.handle != "h" || *r.capacity != "1Gi" {
		t.Errorf("collected pod: %+v", r)
	}
	r = examinePod(mk(corev1.PodSucceeded, protocol.PhaseCreation, nil), now, 5*time.Second, nil)
	if !r.done || r.succeeded || !strings.Contains(r.message, "not collected") {
		t.Errorf("uncollected creation pod after the timeout must fail: %+v", r)
	}
	r = examinePod(mk(corev1.PodSucceeded, protocol.PhaseValidation, nil), now, 5*time.Second, nil)
	if !r.done || !r.succeeded {
		t.Errorf("uncollected validation pod after the timeout keeps its phase: %+v", r)
	}
	r = examinePod(mk(corev1.PodFailed, protocol.PhaseDeletion, map[string]string{protocol.AnnotationResultsCollected: "true", protocol.AnnotationResultError: "nope"}), now, time.Minute, nil)
	if !r.done || r.succeeded || r.message != "nope" {
		t.Errorf("failed pod: %+v", r)
	}

	r = examinePod(mk(corev1.PodFailed, protocol.PhaseExpansion, map[string]string{protocol.AnnotationResultsCollected: "true", protocol.AnnotationResultInfeasible: ""}), now, time.Minute, nil)
	if !r.done || r.succeeded || r.infeasible == nil || *r.infeasible != "" {
		t.Errorf("expansion pod that wrote an empty /pav/infeasible: %+v", r)
	}
	if r = examinePod(mk(corev1.PodFailed, protocol.PhaseExpansion, map[string]string{protocol.AnnotationResultsCollected: "true"}), now, time.Minute, nil); r.infeasible != nil {
		t.Errorf("expansion pod without /pav/infeasible: %+v", r)
	}

	// The node plugin learnt from the container runtime that the pod
	// succeeded before kubelet reported it: done at once, and for good.
	early := map[string]string{protocol.AnnotationSucceeded: "true"}
	for k, v := range collected {
		early[k] = v
	}
	running := mk(corev1.PodRunning, protocol.PhaseCreation, early)
	running.Status.ContainerStatuses = nil
	r = examinePod(running, now, time.Minute, nil)
	if !r.done || !r.succeeded || *r.handle != "h" {
		t.Errorf("pod whose success the node plugin recorded before kubelet: %+v", r)
	}
	r = examinePod(mk(corev1.PodFailed, protocol.PhaseCreation, early), now, time.Minute, nil)
	if !r.done || !r.succeeded || *r.handle != "h" {
		t.Errorf("recorded success, then kubelet's Failed: %+v, want the success to hold", r)
	}
}

func TestDesiredCSIDriver(t *testing.T) {
	p := provisionerFixture("prov")
	d := desiredCSIDriver(p)
	if d.Name != "prov" || *d.Spec.AttachRequired || !*d.Spec.PodInfoOnMount ||
		len(d.Spec.VolumeLifecycleModes) != 1 || d.Spec.VolumeLifecycleModes[0] != storagev1.VolumeLifecyclePersistent {
		t.Errorf("CSIDriver: %+v", d.Spec)
	}
	if !ownedBy(d, p) || !ownedByAnyProvisioner(d) {
		t.Errorf("owner reference: %+v", d.OwnerReferences)
	}
	if !csiDriverMatches(d, desiredCSIDriver(p)) {
		t.Error("a desired CSIDriver does not match itself")
	}
	// Inline volumes add the Ephemeral mode, which kubelet checks before
	// it publishes a pod's csi: volume; the field is immutable, so the
	// CSIDriver no longer matches and is replaced.
	inline := p.DeepCopy()
	inline.Spec.InlineVolumes = true
	e := desiredCSIDriver(inline)
	if !slices.Equal(e.Spec.VolumeLifecycleModes, []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent, storagev1.VolumeLifecycleEphemeral}) {
		t.Errorf("inline volumes: lifecycle modes %v", e.Spec.VolumeLifecycleModes)
	}
	if csiDriverMatches(d, e) {
		t.Error("turning inline volumes on keeps the CSIDriver without the Ephemeral mode")
	}
}

// The CSIDriver carries the provisioner's fsGroupPolicy (default
// ReadWriteOnceWithFSType); a change updates it in place, never deleting it.
func TestCSIDriverFSGroupPolicy(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	if got := *desiredCSIDriver(h.prov).Spec.FSGroupPolicy; got != storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy {
		t.Errorf("default fsGroupPolicy %s", got)
	}
	if _, err := h.c.ensureCSIDriver(ctx, h.prov); err != nil {
		t.Fatal(err)
	}
	created, err := h.kube.StorageV1().CSIDrivers().Get(ctx, testProvisioner, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.UID = "driver-uid" // the fake API server sets none
	if err := h.c.csiDriverIndexer.Add(created); err != nil {
		t.Fatal(err)
	}
	file := storagev1.FileFSGroupPolicy
	h.prov.Spec.VolumeStaging = &v1alpha1.VolumeStaging{FSGroupPolicy: &file}
	h.kube.ClearActions()
	if problem, err := h.c.ensureCSIDriver(ctx, h.prov); err != nil || problem != "" {
		t.Fatal(problem, err)
	}
	var verbs []string
	for _, a := range h.kube.Actions() {
		verbs = append(verbs, a.GetVerb())
	}
	if !slices.Equal(verbs, []string{"update"}) {
		t.Errorf("changing fsGroupPolicy did %v, want one update", verbs)
	}
	got, err := h.kube.StorageV1().CSIDrivers().Get(ctx, testProvisioner, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *got.Spec.FSGroupPolicy != file || got.UID != "driver-uid" {
		t.Errorf("CSIDriver after the change: fsGroupPolicy %s, UID %s", *got.Spec.FSGroupPolicy, got.UID)
	}
}

func TestStuckReason(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Status: corev1.PodStatus{Phase: corev1.PodPending,
		ContainerStatuses: []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "no such image"}}}}}}
	if got := examinePod(pod, time.Now(), time.Minute, nil); got.done || !strings.Contains(got.stuck, "ImagePullBackOff: no such image") {
		t.Errorf("image pull: %+v", got)
	}
	pod.Status.ContainerStatuses[0].State.Waiting.Reason = "ContainerCreating"
	if got := stuckReason(pod); got != "" {
		t.Errorf("ContainerCreating is not stuck: %q", got)
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/1 nodes"}}
	if got := stuckReason(pod); !strings.Contains(got, "cannot be scheduled: 0/1 nodes") {
		t.Errorf("unschedulable: %q", got)
	}
}

// TestMetricsByProvisioner: a provisioner's series start at zero when it is
// synced, the operations' for each of its StorageClasses (not another
// provisioner's); provisioning a claim counts its operation (under the
// claim's class) and pods under its name; pods in flight are counted per
// provisioner and phase; a deleted class's operation series go at the next
// sync, a deleted provisioner's series all go.
func TestMetricsByProvisioner(t *testing.T) {
	objs := append(testObjects(),
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "sc-fast"}, Provisioner: testProvisioner},
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "other"}, Provisioner: "other.example.com"})
	h := newHarness(t, objs...)
	reg := prometheus.NewRegistry()
	h.c.metrics = NewMetrics(reg)
	h.c.metrics.registerInFlight(h.c)
	h.refresh()
	ctx := context.Background()
	if err := h.c.syncProvisioner(ctx, testProvisioner); err != nil {
		t.Fatal(err)
	}
	prov := func(labels ...string) map[string]string {
		m := map[string]string{"provisioner": testProvisioner}
		for i := 0; i < len(labels); i += 2 {
			m[labels[i]] = labels[i+1]
		}
		return m
	}
	for _, class := range []string{"sc", "sc-fast"} {
		if v, ok := metricstest.Scrape(t, reg, "pav_controller_operations_total", prov("class", class, "operation", "delete", "result", "failure")); !ok || v != 0 {
			t.Errorf("a synced provisioner's delete failures in class %s: %v (present %v), want 0", class, v, ok)
		}
	}
	if _, ok := metricstest.Scrape(t, reg, "pav_controller_operations_total", map[string]string{"class": "other"}); ok {
		t.Error("series for another provisioner's class")
	}

	if err := h.step(); err != nil { // the validation pod
		t.Fatal(err)
	}
	h.refresh()
	if v, _ := metricstest.Scrape(t, reg, "pav_controller_pods_in_flight", prov("phase", "validation")); v != 1 {
		t.Errorf("validation pods in flight: %v, want 1", v)
	}
	if v, ok := metricstest.Scrape(t, reg, "pav_controller_pods_in_flight", prov("phase", "staging")); !ok || v != 0 {
		t.Errorf("staging pods in flight: %v (present %v), want 0", v, ok)
	}
	for i := 0; i < 10 && !h.provisioned(); i++ {
		if err := h.step(); err != nil {
			t.Fatal(err)
		}
	}
	if !h.provisioned() {
		t.Fatalf("not provisioned:\n%s", h.describe())
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
	}{
		{"pav_controller_operations_total", prov("class", "sc", "operation", "provision", "result", "success")},
		{"pav_controller_operation_duration_seconds", prov("class", "sc", "operation", "provision")},
		{"pav_controller_pods_total", prov("phase", "validation", "result", "success")},
		{"pav_controller_pods_total", prov("phase", "creation", "result", "success")},
		{"pav_controller_pod_duration_seconds", prov("phase", "creation")},
	} {
		if v, _ := metricstest.Scrape(t, reg, c.name, c.labels); v != 1 {
			t.Errorf("%s%v = %v, want 1", c.name, c.labels, v)
		}
	}

	if v, _ := metricstest.Scrape(t, reg, "pav_controller_operations_total", prov("class", "sc-fast", "operation", "provision", "result", "success")); v != 0 {
		t.Errorf("provisions counted in class sc-fast: %v", v)
	}

	if err := h.kube.StorageV1().StorageClasses().Delete(ctx, "sc-fast", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.refresh()
	if err := h.c.syncProvisioner(ctx, testProvisioner); err != nil {
		t.Fatal(err)
	}
	if _, ok := metricstest.Scrape(t, reg, "pav_controller_operations_total", prov("class", "sc-fast")); ok {
		t.Error("a deleted class's series are still exported")
	}
	if v, _ := metricstest.Scrape(t, reg, "pav_controller_operations_total", prov("class", "sc", "operation", "provision", "result", "success")); v != 1 {
		t.Errorf("class sc's provisions after sc-fast was deleted: %v, want 1", v)
	}

	h.c.metrics.provisionerGone(testProvisioner)
	if _, ok := metricstest.Scrape(t, reg, "pav_controller_operations_total", prov()); ok {
		t.Error("a deleted provisioner's series are still exported")
	}
}

// TestProvisionLatencyFromSelectedNode: a WaitForFirstConsumer claim's
// provisioning latency counts from the first sync that saw the node the
// scheduler selected, not from the claim's creation (the wait for a
// consumer is not PaV's); an Immediate claim's from its creation.
func TestProvisionLatencyFromSelectedNode(t *testing.T) {
	for _, wffc := range []bool{true, false} {
		t.Run(fmt.Sprintf("wffc=%v", wffc), func(t *testing.T) {
			objs := testObjects()
			if wffc {
				mode := storagev1.VolumeBindingWaitForFirstConsumer
				objs[0].(*storagev1.StorageClass).VolumeBindingMode = &mode
			}
			h := newHarness(t, objs...)
			reg := prometheus.NewRegistry()
			h.c.metrics = NewMetrics(reg)
			ctx := context.Background()
			pvc, err := h.kube.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "claim", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			h.now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) // the API keeps whole seconds
			created := h.now
			pvc.CreationTimestamp = metav1.NewTime(created)
			if _, err := h.kube.CoreV1().PersistentVolumeClaims("ns").Update(ctx, pvc, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			var madePV time.Time // the step (each is an hour) that created the PV
			step := func() {
				t.Helper()
				if err := h.step(); err != nil {
					t.Fatal(err)
				}
				if _, err := h.kube.CoreV1().PersistentVolumes().Get(ctx, testVolume, metav1.GetOptions{}); err == nil && madePV.IsZero() {
					madePV = h.now
				}
			}
			// A WaitForFirstConsumer claim waits for a consumer: PaV does nothing.
			for i := 0; i < 3; i++ {
				step()
			}
			if pods, _ := h.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); wffc && (len(pods.Items) != 0 || !madePV.IsZero()) {
				t.Fatalf("%d pods (PV made at %v) for a claim without a selected node", len(pods.Items), madePV)
			}
			pvc, err = h.kube.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "claim", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			pvc.Annotations[annSelectedNode] = "node-1"
			if _, err := h.kube.CoreV1().PersistentVolumeClaims("ns").Update(ctx, pvc, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			selected := h.now.Add(time.Hour) // the next step's time
			for i := 0; i < 10 && !h.provisioned(); i++ {
				step()
			}
			if !h.provisioned() {
				t.Fatalf("not provisioned:\n%s", h.describe())
			}
			want := madePV.Sub(created)
			if wffc {
				want = madePV.Sub(selected)
			}
			got, ok := metricstest.HistogramSum(t, reg, "pav_controller_operation_duration_seconds",
				map[string]string{"provisioner": testProvisioner, "operation": "provision"})
			if !ok || got != want.Seconds() {
				t.Errorf("provisioning latency %vs (present %v), want %v", got, ok, want.Seconds())
			}
			if len(h.c.nodeSelected.since) != 0 {
				t.Errorf("still remembered after provisioning: %v", h.c.nodeSelected.since)
			}
		})
	}
}

// A claim's kubectl last-applied copy stays out of the PV; a claim whose
// snapshot still cannot fit on a PV is refused with a message saying so.
func TestSnapshotSize(t *testing.T) {
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "sc"}, Provisioner: "prov"}
	pvc := claim("1Gi", "")
	pvc.Annotations[corev1.LastAppliedConfigAnnotation] = strings.Repeat("x", 200<<10)
	pv, err := protocol.BuildVolume(protocol.VolumeSpec{Provisioner: "prov", PVC: pvc, Class: sc, Handle: "h", Capacity: resource.MustParse("1Gi")})
	if err != nil {
		t.Fatalf("a claim whose only big annotation is kubectl's copy: %v", err)
	}
	if strings.Contains(pv.Annotations[protocol.AnnotationClaimSnapshot], corev1.LastAppliedConfigAnnotation) {
		t.Error("the PV records kubectl's last-applied copy of the claim")
	}
	pvc.Annotations["big"] = strings.Repeat("y", 200<<10)
	if _, err := protocol.BuildVolume(protocol.VolumeSpec{Provisioner: "prov", PVC: pvc, Class: sc, Handle: "h", Capacity: resource.MustParse("1Gi")}); err == nil ||
		!strings.Contains(err.Error(), "shorten the claim's annotations") {
		t.Errorf("a claim too big to record: %v", err)
	}
}
