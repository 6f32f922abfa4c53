package controller

import (
	"context"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
