package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
// without the hostname label; the provisioner tracks capacity with measure.
func newCapacityHarness(t *testing.T, measure func(node string) (*templating.CapacityConfig, error)) *harness {
	objs := append(testObjects(),
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{hostname: "n1"}}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2", Labels: map[string]string{hostname: "n2"}}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "bare"}})
	h := newHarness(t, objs...)
	h.prov.Spec.TopologyKeys = []string{hostname}
	h.prov.Spec.StorageCapacity = &v1alpha1.StorageCapacity{RefreshPeriod: &metav1.Duration{Duration: time.Minute}}
	h.engine = capacityEngine{measure: measure}
	h.restart()
	return h
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

// A template that fails for a segment: an Event, and no object for it.
func TestCapacityTemplateErrorPublishesNothing(t *testing.T) {
	fail := false
	h := newCapacityHarness(t, func(node string) (*templating.CapacityConfig, error) {
		if node == "n2" && fail {
			return nil, fmt.Errorf("spec.storageCapacity.capacity: boom")
		}
		return capacityOf("1Gi"), nil
	})
	h.syncProvisioner()
	fail = true
	h.c.refreshCapacity(testProvisioner)
	h.syncProvisioner()
	if got := fmt.Sprint(h.capacities()); got != "map[n1:1Gi]" {
		t.Errorf("capacities %s, want only n1's (n2's removed)", got)
	}
	events := strings.Join(drain(h.events), "\n")
	if !strings.Contains(events, reasonCapacityUnknown) || !strings.Contains(events, "kubernetes.io/hostname=n2 unknown: evaluating spec.storageCapacity: spec.storageCapacity.capacity: boom") {
		t.Errorf("events:\n%s\nwant one about n2", events)
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

	// A pod that never ends fails once it is a period old.
	h.c.refreshCapacity(testProvisioner)
	h.syncProvisioner()
	for _, pod := range h.capacityPods() {
		pod.CreationTimestamp = metav1.NewTime(time.Now().Add(-2 * time.Minute))
		if _, err := h.kube.CoreV1().Pods(pod.Namespace).Update(context.Background(), &pod, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	h.syncProvisioner()
	if got := h.capacities(); len(got) != 0 {
		t.Errorf("capacities %v, want none: both measurements timed out", got)
	}
	if events := strings.Join(drain(h.events), "\n"); !strings.Contains(events, "did not finish within the refresh period (1m0s)") {
		t.Errorf("events:\n%s\nwant timeouts", events)
	}
	if left := h.capacityPods(); len(left) != 0 {
		t.Errorf("%d capacity pods left", len(left))
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
	sc2 := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "sc2"}, Provisioner: testProvisioner}
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
