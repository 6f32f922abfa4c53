package controller

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/templating"
)

func TestTopologyRequirement(t *testing.T) {
	const zone, host = "topology.kubernetes.io/zone", "kubernetes.io/hostname"
	node := func(name string, labels map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	nodes := []*corev1.Node{
		node("n1", map[string]string{zone: "b", host: "n1"}),
		node("n2", map[string]string{zone: "a", host: "n2"}),
		node("n3", map[string]string{zone: "b", host: "n3"}),
		node("bare", map[string]string{host: "bare"}),
	}
	z := func(v string) protocol.Segment { return protocol.Segment{zone: v} }
	zh := func(zv, hv string) protocol.Segment { return protocol.Segment{zone: zv, host: hv} }
	allowed := []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{
		{Key: zone, Values: []string{"b", "c"}},
		{Key: host, Values: []string{"n1", "x"}},
	}}}
	for _, tc := range []struct {
		name                 string
		keys                 []string
		allowed              []corev1.TopologySelectorTerm
		selected, claim      string
		requisite, preferred []protocol.Segment // sorted by Segment.Key
		err                  string
	}{
		{name: "no keys: no topology"},
		{name: "selected node first", keys: []string{zone}, selected: "n2",
			requisite: []protocol.Segment{z("a"), z("b")}, preferred: []protocol.Segment{z("a"), z("b")}},
		{name: "selected node's segment rotated to the front", keys: []string{zone}, selected: "n3",
			requisite: []protocol.Segment{z("a"), z("b")}, preferred: []protocol.Segment{z("b"), z("a")}},
		{name: "two keys, nodes without a key left out", keys: []string{zone, host}, selected: "n3",
			requisite: []protocol.Segment{zh("b", "n1"), zh("a", "n2"), zh("b", "n3")},
			preferred: []protocol.Segment{zh("b", "n3"), zh("b", "n1"), zh("a", "n2")}},
		{name: "allowedTopologies multiplied out", keys: []string{zone, host}, allowed: allowed, selected: "n1",
			requisite: []protocol.Segment{zh("b", "n1"), zh("c", "n1"), zh("b", "x"), zh("c", "x")},
			preferred: []protocol.Segment{zh("b", "n1"), zh("c", "n1"), zh("b", "x"), zh("c", "x")}},
		{name: "immediate: rotated by the claim name's hash", keys: []string{zone}, claim: "data-web-1",
			requisite: []protocol.Segment{z("a"), z("b")}, preferred: rotate([]protocol.Segment{z("a"), z("b")}, "data-web-1")},
		{name: "selected node without the label", keys: []string{zone}, selected: "bare",
			err: `node bare has no label "topology.kubernetes.io/zone"`},
		{name: "selected node gone", keys: []string{zone}, selected: "gone", err: "does not exist"},
		{name: "selected node outside allowedTopologies", keys: []string{zone, host}, allowed: allowed, selected: "n2",
			err: "not in the StorageClass's allowedTopologies"},
		{name: "no node has the keys", keys: []string{"example.com/rack"}, err: "no node has all the labels"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := topologyRequirement("p", tc.keys, nodes, tc.allowed, tc.selected, tc.claim)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.requisite == nil {
				if got != nil {
					t.Fatalf("got %+v, want none", got)
				}
				return
			}
			if !reflect.DeepEqual(got.Requisite, tc.requisite) || !reflect.DeepEqual(got.Preferred, tc.preferred) {
				t.Errorf("got requisite %v preferred %v, want %v and %v", got.Requisite, got.Preferred, tc.requisite, tc.preferred)
			}
		})
	}
}

// rotate is the expected spreading: the StatefulSet member index offsets
// the hash of the StatefulSet's name.
func rotate(segs []protocol.Segment, claim string) []protocol.Segment {
	h, i := claimNameHash(claim)
	first := int((h + i) % uint32(len(segs)))
	return append(append([]protocol.Segment{}, segs[first:]...), segs[:first]...)
}

func TestClaimNameHashSpreadsStatefulSetMembers(t *testing.T) {
	h0, i0 := claimNameHash("data-web-0")
	h1, i1 := claimNameHash("data-web-1")
	hLogs, iLogs := claimNameHash("logs-web-1")
	if h0 != h1 || i0 != 0 || i1 != 1 {
		t.Errorf("members of one StatefulSet: hashes %d, %d, indexes %d, %d; want one hash and indexes 0, 1", h0, h1, i0, i1)
	}
	if hLogs != h1 || iLogs != i1 {
		t.Errorf("two claims of one member must land together: %d/%d vs %d/%d", hLogs, iLogs, h1, i1)
	}
}

func TestSegmentNodeAffinity(t *testing.T) {
	got := protocol.Segment{"b": "2", "a": "1"}.NodeAffinity()
	want := []corev1.NodeSelectorRequirement{
		{Key: "a", Operator: corev1.NodeSelectorOpIn, Values: []string{"1"}},
		{Key: "b", Operator: corev1.NodeSelectorOpIn, Values: []string{"2"}},
	}
	if terms := got.Required.NodeSelectorTerms; len(terms) != 1 || !reflect.DeepEqual(terms[0].MatchExpressions, want) {
		t.Errorf("got %+v, want one term %+v", got.Required.NodeSelectorTerms, want)
	}
}

// topologyEngine is stubEngine whose creation returns nodeAffinity (nil for
// none) and records the topology it was asked for.
type topologyEngine struct {
	stubEngine
	affinity *corev1.VolumeNodeAffinity
	seen     **templating.Topology
}

func (e topologyEngine) Creation(ctx context.Context, p *v1alpha1.PavProvisioner, r templating.DynamicRequest) (*templating.CreationConfig, error) {
	cc, err := e.stubEngine.Creation(ctx, p, r)
	cc.NodeAffinity = e.affinity.DeepCopy()
	*e.seen = r.Topology
	return cc, err
}

// A provisioner with topology keys: the creation sees the requirement, and
// the PV's node affinity is the selected node's segment unless the template
// gave one.
func TestVolumeNodeAffinityDefaultsToTheSelectedSegment(t *testing.T) {
	const zone = "topology.kubernetes.io/zone"
	templated := protocol.Segment{"example.com/rack": "r7"}.NodeAffinity()
	for name, tc := range map[string]struct {
		keys               []string
		templated, want    *corev1.VolumeNodeAffinity
		requisite, preferd []protocol.Segment
	}{
		"default from the selected node": {keys: []string{zone}, want: protocol.Segment{zone: "b"}.NodeAffinity(),
			requisite: []protocol.Segment{{zone: "a"}, {zone: "b"}}, preferd: []protocol.Segment{{zone: "b"}, {zone: "a"}}},
		"templated wins": {keys: []string{zone}, templated: templated, want: templated,
			requisite: []protocol.Segment{{zone: "a"}, {zone: "b"}}, preferd: []protocol.Segment{{zone: "b"}, {zone: "a"}}},
		"no topology keys, no affinity": {},
	} {
		t.Run(name, func(t *testing.T) {
			objs := testObjects()
			wffc := storagev1.VolumeBindingWaitForFirstConsumer
			objs[0].(*storagev1.StorageClass).VolumeBindingMode = &wffc
			objs[1].(*corev1.PersistentVolumeClaim).Annotations[annSelectedNode] = "n2"
			objs = append(objs,
				&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{zone: "a"}}},
				&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2", Labels: map[string]string{zone: "b"}}})
			var seen *templating.Topology
			h := newHarness(t, objs...)
			h.prov.Spec.TopologyKeys = tc.keys
			h.engine = topologyEngine{affinity: tc.templated, seen: &seen}
			h.restart()
			provisioning.run(t, h, 10)
			pv, err := h.kube.CoreV1().PersistentVolumes().Get(context.Background(), testVolume, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(pv.Spec.NodeAffinity, tc.want) {
				t.Errorf("PV node affinity %+v, want %+v", pv.Spec.NodeAffinity, tc.want)
			}
			switch {
			case tc.requisite == nil && seen != nil:
				t.Errorf("creation saw topology %+v, want none", seen)
			case tc.requisite != nil && (seen == nil || !reflect.DeepEqual(seen.Requisite, tc.requisite) || !reflect.DeepEqual(seen.Preferred, tc.preferd)):
				t.Errorf("creation saw topology %+v, want requisite %v, preferred %v", seen, tc.requisite, tc.preferd)
			}
		})
	}
}

// A selected node without the topology label: the claim's Event says so and
// no pod runs.
func TestSelectedNodeWithoutTopologyLabel(t *testing.T) {
	objs := testObjects()
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	objs[0].(*storagev1.StorageClass).VolumeBindingMode = &wffc
	objs[1].(*corev1.PersistentVolumeClaim).Annotations[annSelectedNode] = "bare"
	objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "bare"}})
	h := newHarness(t, objs...)
	h.prov.Spec.TopologyKeys = []string{"topology.kubernetes.io/zone"}
	_ = h.step()
	events := strings.Join(drain(h.events), "\n")
	if !strings.Contains(events, `node bare has no label "topology.kubernetes.io/zone"`) {
		t.Errorf("events:\n%s\nwant one naming the missing label", events)
	}
	if pods, _ := h.kube.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{}); len(pods.Items) != 0 {
		t.Errorf("%d pods created", len(pods.Items))
	}
}

func TestImmediateNode(t *testing.T) {
	const zone, host = "topology.kubernetes.io/zone", "kubernetes.io/hostname"
	hz := func(name, z string) map[string]string { return map[string]string{host: name, zone: z} }
	notReady := readyNode("n1", hz("n1", "a"))
	notReady.Status.Conditions[0].Status = corev1.ConditionFalse
	cordoned := readyNode("n3", hz("n3", "b"))
	cordoned.Spec.Unschedulable = true
	noStatus := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n6", Labels: hz("n6", "c")}}
	tainted := readyNode("n7", hz("n7", "b"))
	tainted.Spec.Taints = []corev1.Taint{{Key: "example.com/pool", Effect: corev1.TaintEffectNoSchedule}}
	nodes := []*corev1.Node{notReady, readyNode("n2", hz("n2", "a")), cordoned, readyNode("n4", hz("n4", "b")),
		readyNode("n5", hz("n5", "b")), noStatus, readyNode("bare", nil), tainted}
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	allow := func(key string, values ...string) []corev1.TopologySelectorTerm {
		return []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: key, Values: values}}}}
	}
	for _, tc := range []struct {
		name     string
		keys     []string
		mode     *storagev1.VolumeBindingMode
		selected string
		allowed  []corev1.TopologySelectorTerm
		want     []string // any of these
		err      string
	}{
		{name: "no topology keys: no node", want: []string{""}},
		{name: "WaitForFirstConsumer: the scheduler's to pick", keys: []string{host}, mode: &wffc, want: []string{""}},
		{name: "selected already", keys: []string{host}, selected: "n2", want: []string{""}},
		{name: "only Ready, schedulable nodes with the labels", keys: []string{host}, want: []string{"n2", "n4", "n5"}},
		{name: "from allowedTopologies", keys: []string{host}, allowed: allow(host, "n1", "n4"), want: []string{"n4"}},
		{name: "a zone: one of its usable nodes", keys: []string{zone}, allowed: allow(zone, "b"), want: []string{"n4", "n5"}},
		{name: "a tainted node only when no other will do", keys: []string{host}, allowed: allow(host, "n4", "n7"), want: []string{"n4"}},
		{name: "a tainted node rather than none", keys: []string{host}, allowed: allow(host, "n7", "n1"), want: []string{"n7"}},
		{name: "no usable node in allowedTopologies", keys: []string{host}, allowed: allow(host, "n1", "n3", "n6", "gone"),
			err: `no Ready, schedulable node with the labels ["kubernetes.io/hostname"] of the spec.topologyKeys of PavProvisioner "p" is in the claim's requisite topology [kubernetes.io/hostname=gone kubernetes.io/hostname=n1 kubernetes.io/hostname=n3 kubernetes.io/hostname=n6]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := provisionerFixture("p")
			p.Spec.TopologyKeys = tc.keys
			class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "sc"}, Provisioner: "p", VolumeBindingMode: tc.mode, AllowedTopologies: tc.allowed}
			pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", UID: "u1", Annotations: map[string]string{}}}
			if tc.selected != "" {
				pvc.Annotations[annSelectedNode] = tc.selected
			}
			var stripped []*corev1.Node // as the controller's cache holds them
			for _, n := range nodes {
				o, _ := stripNode(n)
				stripped = append(stripped, o.(*corev1.Node))
			}
			got, err := ImmediateNode(p, class, pvc, stripped)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %q, %v; want the error %q", got, err, tc.err)
				}
				return
			}
			if err != nil || !slices.Contains(tc.want, got) {
				t.Fatalf("got %q, %v; want one of %q", got, err, tc.want)
			}
			// Deterministic: the same claim, the same node, whatever the order of the nodes.
			again, _ := ImmediateNode(p, class, pvc, append([]*corev1.Node{nodes[len(nodes)-1]}, nodes[:len(nodes)-1]...))
			if again != got {
				t.Errorf("nodes in another order: %q, then %q", got, again)
			}
		})
	}
}

// Claims of an Immediate class go round the usable nodes: by the claim's
// name over the segments, by its UID within a segment.
func TestImmediateNodeSpreads(t *testing.T) {
	const zone, host = "topology.kubernetes.io/zone", "kubernetes.io/hostname"
	nodes := []*corev1.Node{readyNode("n1", map[string]string{host: "n1", zone: "a"}), readyNode("n2", map[string]string{host: "n2", zone: "a"}),
		readyNode("n3", map[string]string{host: "n3", zone: "a"})}
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "sc"}, Provisioner: "p"}
	for _, keys := range [][]string{{host}, {zone}} {
		p := provisionerFixture("p")
		p.Spec.TopologyKeys = keys
		chosen := map[string]int{}
		for i := range 30 {
			pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("data-web-%d", i), UID: types.UID(fmt.Sprintf("uid-%d", i))}}
			n, err := ImmediateNode(p, class, pvc, nodes)
			if err != nil {
				t.Fatal(err)
			}
			chosen[n]++
		}
		if len(chosen) != len(nodes) {
			t.Errorf("topology keys %q: 30 claims went to %v, want every node", keys, chosen)
		}
	}
}

// requestsEngine is stubEngine recording the requests of the claim phases.
type requestsEngine struct {
	stubEngine
	seen *[]templating.DynamicRequest
}

func (e requestsEngine) Validation(ctx context.Context, p *v1alpha1.PavProvisioner, r templating.DynamicRequest) (*ValidationConfig, error) {
	*e.seen = append(*e.seen, r)
	return e.stubEngine.Validation(ctx, p, r)
}

func (e requestsEngine) Creation(ctx context.Context, p *v1alpha1.PavProvisioner, r templating.DynamicRequest) (*templating.CreationConfig, error) {
	*e.seen = append(*e.seen, r)
	return e.stubEngine.Creation(ctx, p, r)
}

// A claim of an Immediate class for a provisioner with topology keys: PaV
// chooses a Ready, schedulable node of the requisite topology, the
// templates see it as selectedNodeName with its segment preferred, the
// attempt keeps it even if the nodes change meanwhile, and the PV records it
// and gets its segment as node affinity.
func TestImmediateBindingChoosesANode(t *testing.T) {
	const host = "kubernetes.io/hostname"
	objs := testObjects()
	down := readyNode("n1", map[string]string{host: "n1"})
	down.Status.Conditions[0].Status = corev1.ConditionFalse
	objs = append(objs, down, readyNode("n2", map[string]string{host: "n2"}), readyNode("bare", nil))
	var seen []templating.DynamicRequest
	h := newHarness(t, objs...)
	h.prov.Spec.TopologyKeys = []string{host}
	h.engine = requestsEngine{seen: &seen}
	h.restart()
	if err := h.step(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pods, _ := h.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if len(pods.Items) != 1 || phaseOf(&pods.Items[0]) != protocol.PhaseValidation {
		t.Fatalf("want the validation pod:\n%s", h.describe())
	}
	if got := pods.Items[0].Annotations[protocol.AnnotationSelectedNode]; got != "n2" {
		t.Errorf("validation pod records node %q, want n2", got)
	}
	// n2 fails and n1 comes back: the attempt carries on for n2.
	down.Status.Conditions[0].Status = corev1.ConditionTrue
	n2 := readyNode("n2", map[string]string{host: "n2"})
	n2.Status.Conditions[0].Status = corev1.ConditionFalse
	for _, n := range []*corev1.Node{down, n2} {
		if _, err := h.kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	provisioning.run(t, h, 10)
	if len(seen) != 2 {
		t.Fatalf("%d evaluations, want validation and creation", len(seen))
	}
	for i, r := range seen {
		if r.SelectedNodeName != "n2" || r.Topology == nil || !reflect.DeepEqual(r.Topology.Preferred[0], protocol.Segment{host: "n2"}) {
			t.Errorf("evaluation %d: selectedNodeName %q, topology %+v; want n2 and its segment first", i, r.SelectedNodeName, r.Topology)
		}
	}
	pv, err := h.kube.CoreV1().PersistentVolumes().Get(ctx, testVolume, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := pv.Annotations[protocol.AnnotationSelectedNode]; got != "n2" {
		t.Errorf("PV records node %q, want n2", got)
	}
	if want := (protocol.Segment{host: "n2"}).NodeAffinity(); !reflect.DeepEqual(pv.Spec.NodeAffinity, want) {
		t.Errorf("PV node affinity %+v, want %+v", pv.Spec.NodeAffinity, want)
	}
}

// No usable node in the requisite topology: a ProvisioningFailed Event says
// why, no pod runs, and a later attempt succeeds once a node is Ready.
func TestImmediateBindingWithoutACandidate(t *testing.T) {
	const host = "kubernetes.io/hostname"
	objs := testObjects()
	down := readyNode("n1", map[string]string{host: "n1"})
	down.Status.Conditions[0].Status = corev1.ConditionFalse
	objs = append(objs, down)
	h := newHarness(t, objs...)
	h.prov.Spec.TopologyKeys = []string{host}
	_ = h.step()
	events := strings.Join(drain(h.events), "\n")
	if !strings.Contains(events, "Warning "+reasonProvisioningFailed+" no Ready, schedulable node") {
		t.Errorf("events:\n%s\nwant a ProvisioningFailed saying no node fits", events)
	}
	ctx := context.Background()
	if pods, _ := h.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); len(pods.Items) != 0 {
		t.Fatalf("%d pods created", len(pods.Items))
	}
	down.Status.Conditions[0].Status = corev1.ConditionTrue
	if _, err := h.kube.CoreV1().Nodes().Update(ctx, down, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	provisioning.run(t, h, 10)
	pv, err := h.kube.CoreV1().PersistentVolumes().Get(ctx, testVolume, metav1.GetOptions{})
	if err != nil || pv.Annotations[protocol.AnnotationSelectedNode] != "n1" {
		t.Errorf("PV %v, %v; want one for n1", pv, err)
	}
}

// Immediate binding with topology keys under faults: the volume is created
// once, for the node PaV chose.
func TestImmediateBindingSurvivesAFaultAtEveryWrite(t *testing.T) {
	const host = "kubernetes.io/hostname"
	sc := provisioning
	sc.objects = func() []runtime.Object {
		return append(testObjects(), readyNode("n1", map[string]string{host: "n1"}), readyNode("n2", map[string]string{host: "n2"}))
	}
	sc.setup = func(h *harness) { h.prov.Spec.TopologyKeys = []string{host} }
	sc.check = func(h *harness) {
		h.t.Helper()
		h.checkVolume()
		list, _ := h.kube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
		var nodes []*corev1.Node
		for i := range list.Items {
			nodes = append(nodes, &list.Items[i])
		}
		class, _ := h.kube.StorageV1().StorageClasses().Get(context.Background(), "sc", metav1.GetOptions{})
		want, err := ImmediateNode(h.prov, class, h.claim(), nodes)
		pv, gerr := h.kube.CoreV1().PersistentVolumes().Get(context.Background(), testVolume, metav1.GetOptions{})
		if err != nil || gerr != nil || want == "" || pv.Annotations[protocol.AnnotationSelectedNode] != want {
			h.t.Errorf("PV for node %q (%v, %v), want %q", pv.Annotations[protocol.AnnotationSelectedNode], err, gerr, want)
		}
	}
	testEveryFault(t, sc)
}
