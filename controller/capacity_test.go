package controller

import (
	"context"
	"fmt"
	"path"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/templating"
)

const hostname = "kubernetes.io/hostname"

// capacityEngine is stubEngine measuring capacity with measure (by node).
type capacityEngine struct {
	stubEngine
	measure func(node string) (*templating.CapacityConfig, error)
}

func (e capacityEngine) StorageCapacity(_ context.Context, p *v1alpha1.PavProvisioner, r templating.CapacityRequest) (*templating.CapacityConfig, error) {
	if p.Spec.StorageCapacity == nil {
		return nil, nil
	}
	return e.measure(r.NodeName)
}

// newCapacityHarness: nodes n1 and n2 (each its own segment) and one
// without the hostname label, Ready; class sc is WaitForFirstConsumer; the
// provisioner tracks capacity with measure.
func newCapacityHarness(t *testing.T, measure func(node string) (*templating.CapacityConfig, error)) *harness {
	return newCapacityHarnessOf(t, hostname, measure,
		readyNode("n1", map[string]string{hostname: "n1"}),
		readyNode("n2", map[string]string{hostname: "n2"}),
		readyNode("bare", nil))
}

func newCapacityHarnessOf(t *testing.T, topologyKey string, measure func(node string) (*templating.CapacityConfig, error), nodes ...*corev1.Node) *harness {
	objs := testObjects()
	for _, o := range objs {
		if sc, ok := o.(*storagev1.StorageClass); ok {
			wffc := storagev1.VolumeBindingWaitForFirstConsumer
			sc.VolumeBindingMode = &wffc
		}
	}
	for _, n := range nodes {
		objs = append(objs, n)
	}
	h := newHarness(t, objs...)
	h.prov.Spec.TopologyKeys = []string{topologyKey}
	h.prov.Spec.StorageCapacity = &v1alpha1.StorageCapacity{RefreshPeriod: &metav1.Duration{Duration: time.Minute}}
	h.engine = capacityEngine{measure: measure}
	h.restart()
	return h
}

func readyNode(name string, labels map[string]string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
}

func (h *harness) syncProvisioner() {
	h.t.Helper()
	// The provisioner as the test changed it, in the cluster too.
	if _, err := h.pav.PavV1alpha1().PavProvisioners().Update(context.Background(), h.prov, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
	h.refresh()
	if err := h.c.syncProvisioner(context.Background(), testProvisioner); err != nil {
		h.t.Fatal(err)
	}
}

// capacities: the published capacity by node name of the segment.
func (h *harness) capacities() map[string]string {
	h.t.Helper()
	list, err := h.kube.StorageV1().CSIStorageCapacities("pav").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	out := map[string]string{}
	for _, c := range list.Items {
		if c.StorageClassName != "sc" || len(c.OwnerReferences) != 1 || c.OwnerReferences[0].Name != testProvisioner ||
			c.Labels[protocol.LabelProvisioner] != testProvisioner {
			h.t.Errorf("CSIStorageCapacity %s: class %q, owners %v, labels %v", c.Name, c.StorageClassName, c.OwnerReferences, c.Labels)
		}
		out[c.NodeTopology.MatchLabels[hostname]] = c.Capacity.String()
	}
	return out
}

func (h *harness) capacityPods() []corev1.Pod {
	pods, _ := h.kube.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	var out []corev1.Pod
	for _, p := range pods.Items {
		if phaseOf(&p) == protocol.PhaseCapacity {
			out = append(out, p)
		}
	}
	return out
}

func capacityOf(q string) *templating.CapacityConfig {
	c := resource.MustParse(q)
	return &templating.CapacityConfig{Capacity: &c}
}

func TestCapacityFromTemplate(t *testing.T) {
	free := map[string]string{"n1": "10Gi", "n2": "0"}
	h := newCapacityHarness(t, func(node string) (*templating.CapacityConfig, error) { return capacityOf(free[node]), nil })
	h.syncProvisioner()
	if got := fmt.Sprint(h.capacities()); got != "map[n1:10Gi n2:0]" {
		t.Errorf("capacities %s, want n1 10Gi and n2 0 (none for the node without the label)", got)
	}
	d, err := h.kube.StorageV1().CSIDrivers().Get(context.Background(), testProvisioner, metav1.GetOptions{})
	if err != nil || d.Spec.StorageCapacity == nil || !*d.Spec.StorageCapacity {
		t.Errorf("CSIDriver %+v (%v), want storageCapacity true", d, err)
	}

	// Not again within the period; again after a volume was created.
	free["n1"] = "3Gi"
	h.syncProvisioner()
	if got := h.capacities()["n1"]; got != "10Gi" {
		t.Errorf("n1 remeasured within the period: %s", got)
	}
	h.c.refreshCapacity(testProvisioner)
	h.syncProvisioner()
	if got := h.capacities()["n1"]; got != "3Gi" {
		t.Errorf("n1 %s after a refresh, want 3Gi", got)
	}

	// Off: the objects go, and the CSIDriver says so.
	h.prov.Spec.StorageCapacity = nil
	h.syncProvisioner()
	if got := h.capacities(); len(got) != 0 {
		t.Errorf("capacities %v left after storageCapacity was removed", got)
	}
	d, _ = h.kube.StorageV1().CSIDrivers().Get(context.Background(), testProvisioner, metav1.GetOptions{})
	if d.Spec.StorageCapacity == nil || *d.Spec.StorageCapacity {
		t.Errorf("CSIDriver storageCapacity %v, want false", d.Spec.StorageCapacity)
	}
}

// A template that fails for a segment: an Event each time; the segment's
// object keeps its last value until capacityFailuresToRemove measurements
// failed in a row (one bad measurement does not close the segment to the
// scheduler), then goes; a success in between starts the count anew.
func TestCapacityKeptUntilFailuresInARow(t *testing.T) {
	fail := false
	h := newCapacityHarness(t, func(node string) (*templating.CapacityConfig, error) {
		if node == "n2" && fail {
			return nil, fmt.Errorf("spec.storageCapacity.capacity: boom")
		}
		return capacityOf("1Gi"), nil
	})
	h.syncProvisioner()
	remeasure := func() string {
		h.c.refreshCapacity(testProvisioner)
		h.syncProvisioner()
		return fmt.Sprint(h.capacities())
	}
	fail = true
	for i := 1; i < capacityFailuresToRemove; i++ {
		if got := remeasure(); got != "map[n1:1Gi n2:1Gi]" {
			t.Fatalf("after %d failed measurements capacities %s, want n2's last value kept", i, got)
		}
	}
	events := strings.Join(drain(h.events), "\n")
	if !strings.Contains(events, reasonCapacityUnknown) || !strings.Contains(events, "kubernetes.io/hostname=n2 unknown: evaluating spec.storageCapacity: spec.storageCapacity.capacity: boom; keeping the last value measured (1Gi)") {
		t.Errorf("events:\n%s\nwant one about n2 keeping its value", events)
	}
	// A success resets the count.
	fail = false
	remeasure()
	fail = true
	for i := 1; i < capacityFailuresToRemove; i++ {
		if got := remeasure(); got != "map[n1:1Gi n2:1Gi]" {
			t.Fatalf("after a success and %d failures capacities %s, want n2's kept", i, got)
		}
	}
	if got := remeasure(); got != "map[n1:1Gi]" {
		t.Errorf("after %d failures in a row capacities %s, want only n1's (n2's removed)", capacityFailuresToRemove, got)
	}
	if events := strings.Join(drain(h.events), "\n"); !strings.Contains(events, "until a measurement succeeds, the scheduler places no WaitForFirstConsumer claim of the class there") {
		t.Errorf("events:\n%s\nwant one about n2's removal", events)
	}
}

// Capacity pods: one per segment, on its node; a good result is published,
// garbage and a pod that never ends are reported, and every pod goes.
func TestCapacityPods(t *testing.T) {
	tmpl := stubPod("measure")
	h := newCapacityHarness(t, func(string) (*templating.CapacityConfig, error) {
		return &templating.CapacityConfig{PodTemplate: tmpl}, nil
	})
	h.syncProvisioner()
	pods := h.capacityPods()
	if len(pods) != 2 {
		t.Fatalf("%d capacity pods, want 2", len(pods))
	}
	results := map[string]string{"n1": "5Gi", "n2": "lots"}
	for _, pod := range pods {
		if !protocol.HasFinalizer(&pod, protocol.FinalizerResult) || pod.Annotations[protocol.AnnotationCapacityOf] == "" {
			t.Errorf("pod %s: finalizers %v, annotations %v", pod.Name, pod.Finalizers, pod.Annotations)
		}
		pod.Status.Phase = corev1.PodSucceeded
		pod.Annotations[protocol.AnnotationResultsCollected] = "true"
		pod.Annotations[protocol.AnnotationResultCapacity] = results[pod.Spec.NodeName]
		if _, err := h.kube.CoreV1().Pods(pod.Namespace).Update(context.Background(), &pod, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	h.syncProvisioner()
	if got := fmt.Sprint(h.capacities()); got != "map[n1:5Gi]" {
		t.Errorf("capacities %s, want only n1's", got)
	}
	events := strings.Join(drain(h.events), "\n")
	if !strings.Contains(events, `wrote "lots" to /pav/capacity, which is not a quantity`) {
		t.Errorf("events:\n%s\nwant one about n2's garbage", events)
	}
	if left := h.capacityPods(); len(left) != 0 {
		t.Errorf("%d capacity pods left", len(left))
	}

	// A pod that never ends fails once it is a period old; n1 keeps its
	// last value (one failure), n2 still has none.
	h.c.refreshCapacity(testProvisioner)
	h.syncProvisioner()
	for _, pod := range h.capacityPods() {
		pod.CreationTimestamp = metav1.NewTime(time.Now().Add(-2 * time.Minute))
		if _, err := h.kube.CoreV1().Pods(pod.Namespace).Update(context.Background(), &pod, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	h.syncProvisioner()
	if got := fmt.Sprint(h.capacities()); got != "map[n1:5Gi]" {
		t.Errorf("capacities %s, want n1's last value: both measurements timed out once", got)
	}
	if events := strings.Join(drain(h.events), "\n"); !strings.Contains(events, "did not finish within the refresh period (1m0s)") {
		t.Errorf("events:\n%s\nwant timeouts", events)
	}
	if left := h.capacityPods(); len(left) != 0 {
		t.Errorf("%d capacity pods left", len(left))
	}
}

// /pav/maximum-volume-size becomes the object's maximumVolumeSize (the
// scheduler then keeps larger claims off the segment); a later measurement
// without it removes it; garbage in it fails the measurement like garbage in
// /pav/capacity.
func TestCapacityPodsMaximumVolumeSize(t *testing.T) {
	h := newCapacityHarness(t, func(string) (*templating.CapacityConfig, error) {
		return &templating.CapacityConfig{PodTemplate: stubPod("measure")}, nil
	})
	maximums := func() map[string]string {
		list, err := h.kube.StorageV1().CSIStorageCapacities("pav").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, c := range list.Items {
			out[c.NodeTopology.MatchLabels[hostname]] = "none"
			if c.MaximumVolumeSize != nil {
				out[c.NodeTopology.MatchLabels[hostname]] = c.MaximumVolumeSize.String()
			}
		}
		return out
	}
	// measure runs one round in which node's pod writes results.
	measure := func(results map[string]map[string]string) {
		t.Helper()
		h.c.refreshCapacity(testProvisioner)
		h.syncProvisioner()
		for _, pod := range h.capacityPods() {
			pod.Status.Phase = corev1.PodSucceeded
			pod.Annotations[protocol.AnnotationResultsCollected] = "true"
			for k, v := range results[pod.Spec.NodeName] {
				pod.Annotations[k] = v
			}
			if _, err := h.kube.CoreV1().Pods(pod.Namespace).Update(context.Background(), &pod, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		h.syncProvisioner()
	}
	free, max := protocol.AnnotationResultCapacity, protocol.AnnotationResultMaximumVolumeSize
	measure(map[string]map[string]string{
		"n1": {free: "10Gi", max: "4Gi"},
		"n2": {free: "10Gi"},
	})
	if got := fmt.Sprint(maximums()); got != "map[n1:4Gi n2:none]" {
		t.Errorf("maximum volume sizes %s, want n1 4Gi and none for n2", got)
	}
	measure(map[string]map[string]string{
		"n1": {free: "10Gi"},
		"n2": {free: "10Gi", max: "2Gi"},
	})
	if got := fmt.Sprint(maximums()); got != "map[n1:none n2:2Gi]" {
		t.Errorf("maximum volume sizes %s after n1 stopped saying it and n2 started, want none and 2Gi", got)
	}
	drain(h.events)
	measure(map[string]map[string]string{
		"n1": {free: "10Gi", max: "big"},
		"n2": {free: "8Gi", max: "2Gi"},
	})
	if got := fmt.Sprint(h.capacities(), maximums()); got != "map[n1:10Gi n2:8Gi] map[n1:none n2:2Gi]" {
		t.Errorf("capacities and maximums %s, want n1's last values kept after its bad measurement", got)
	}
	events := strings.Join(drain(h.events), "\n")
	if !strings.Contains(events, `wrote "big" to /pav/maximum-volume-size, which is not a quantity`) {
		t.Errorf("events:\n%s\nwant one about n1's garbage", events)
	}
}

// A deleted provisioner's capacity pods go before it is released.
func TestCapacityPodsGoWithTheProvisioner(t *testing.T) {
	h := newCapacityHarness(t, func(string) (*templating.CapacityConfig, error) {
		return &templating.CapacityConfig{PodTemplate: stubPod("measure")}, nil
	})
	h.syncProvisioner()
	if len(h.capacityPods()) != 2 {
		t.Fatal("no capacity pods")
	}
	p, _ := h.pav.PavV1alpha1().PavProvisioners().Get(context.Background(), testProvisioner, metav1.GetOptions{})
	now := metav1.Now()
	p.DeletionTimestamp = &now
	h.prov = p
	h.syncProvisioner()
	if left := h.capacityPods(); len(left) != 0 {
		t.Errorf("%d capacity pods left", len(left))
	}
}

// A class of the provisioner that comes after a round is measured at once,
// not at the next round: until then the scheduler keeps its claims off
// every node.
func TestCapacityOfANewClassIsMeasuredAtOnce(t *testing.T) {
	h := newCapacityHarness(t, func(string) (*templating.CapacityConfig, error) { return capacityOf("1Gi"), nil })
	h.syncProvisioner()
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	sc2 := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "sc2"}, Provisioner: testProvisioner, VolumeBindingMode: &wffc}
	if _, err := h.kube.StorageV1().StorageClasses().Create(context.Background(), sc2, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.refresh()
	h.c.onTopologyChange(sc2)
	h.syncProvisioner()
	list, err := h.kube.StorageV1().CSIStorageCapacities("pav").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range list.Items {
		if c.StorageClassName == "sc2" {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d CSIStorageCapacity objects for the new class, want one per segment (2)", n)
	}
}

// Immediate classes get no CSIStorageCapacity: the scheduler reads
// capacity only for WaitForFirstConsumer claims (external-provisioner
// publishes none for them by default).
func TestCapacityNotForImmediateClasses(t *testing.T) {
	h := newCapacityHarness(t, func(string) (*templating.CapacityConfig, error) { return capacityOf("1Gi"), nil })
	immediate := storagev1.VolumeBindingImmediate
	for _, sc := range []*storagev1.StorageClass{
		{ObjectMeta: metav1.ObjectMeta{Name: "immediate"}, Provisioner: testProvisioner, VolumeBindingMode: &immediate},
		{ObjectMeta: metav1.ObjectMeta{Name: "unset"}, Provisioner: testProvisioner},
	} {
		if _, err := h.kube.StorageV1().StorageClasses().Create(context.Background(), sc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	h.syncProvisioner()
	list, err := h.kube.StorageV1().CSIStorageCapacities("pav").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	classes := map[string]int{}
	for _, c := range list.Items {
		classes[c.StorageClassName]++
	}
	if got := fmt.Sprint(classes); got != "map[sc:2]" {
		t.Errorf("CSIStorageCapacity objects by class %s, want only sc's two", got)
	}
}

// The capacity pod of a segment runs on its first Ready, schedulable node
// by name, not on a NotReady or cordoned one that comes first.
func TestCapacityPodOnAReadySchedulableNode(t *testing.T) {
	const zone = "topology.kubernetes.io/zone"
	notReady := readyNode("a1", map[string]string{zone: "a"})
	notReady.Status.Conditions[0].Status = corev1.ConditionFalse
	cordoned := readyNode("a2", map[string]string{zone: "a"})
	cordoned.Spec.Unschedulable = true
	h := newCapacityHarnessOf(t, zone, func(string) (*templating.CapacityConfig, error) {
		return &templating.CapacityConfig{PodTemplate: stubPod("measure")}, nil
	}, notReady, cordoned, readyNode("a3", map[string]string{zone: "a"}), readyNode("a4", map[string]string{zone: "a"}),
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "b1", Labels: map[string]string{zone: "b"}}})
	h.syncProvisioner()
	nodes := map[string]bool{}
	for _, pod := range h.capacityPods() {
		nodes[pod.Spec.NodeName] = true
	}
	// Zone b has no usable node: its only one is measured all the same (a
	// failure there is reported and bounded like any other).
	if got := fmt.Sprint(nodes); got != "map[a3:true b1:true]" {
		t.Errorf("capacity pods on %s, want on a3 (zone a's first Ready, schedulable node) and b1", got)
	}
}

// A capacity pod's /pav goes under the kubelet root of the node it runs
// on (a node pool's), where that node's plugin collects /pav/capacity.
func TestCapacityPodUsesItsNodesKubeletRoot(t *testing.T) {
	h := newCapacityHarness(t, func(string) (*templating.CapacityConfig, error) {
		return &templating.CapacityConfig{PodTemplate: stubPod("measure")}, nil
	})
	if _, err := h.kube.CoreV1().Nodes().Update(context.Background(), readyNode("n2", map[string]string{hostname: "n2", "root": "k0s"}), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.poolDirs = []PoolKubeletDir{{Selector: labels.SelectorFromSet(labels.Set{"root": "k0s"}), Dir: "/var/lib/k0s/kubelet"}}
	h.restart()
	h.syncProvisioner()
	roots := map[string]string{}
	for _, pod := range h.capacityPods() {
		for _, v := range pod.Spec.Volumes {
			if v.HostPath != nil {
				roots[pod.Spec.NodeName] = path.Dir(v.HostPath.Path)
			}
		}
	}
	want := map[string]string{"n1": protocol.PodDirRoot(protocol.DefaultKubeletDir), "n2": protocol.PodDirRoot("/var/lib/k0s/kubelet")}
	if fmt.Sprint(roots) != fmt.Sprint(want) {
		t.Errorf("capacity pods' /pav roots %v, want %v", roots, want)
	}
}

// The Node cache keeps what placing a capacity pod reads.
func TestStripNodeKeepsReadiness(t *testing.T) {
	for _, tc := range []struct {
		ready, unschedulable, usable bool
	}{{true, false, true}, {false, false, false}, {true, true, false}} {
		n := readyNode("n", nil)
		if !tc.ready {
			n.Status.Conditions[0].Status = corev1.ConditionFalse
		}
		n.Spec.Unschedulable = tc.unschedulable
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse})
		stripped, _ := stripNode(n)
		if got := nodeUsable(stripped.(*corev1.Node)); got != tc.usable {
			t.Errorf("ready %v, unschedulable %v: usable %v after stripNode, want %v", tc.ready, tc.unschedulable, got, tc.usable)
		}
	}
}
