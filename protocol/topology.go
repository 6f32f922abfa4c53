package protocol

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Segment is a CSI topology segment: topology key to value, e.g.
// {"topology.kubernetes.io/zone": "a"}.
type Segment map[string]string

// NodeSegment is the segment of a node with the given labels for a
// provisioner's topology keys; missing names the first key the node has no
// label for (the segment is then nil: such a node belongs to no segment).
func NodeSegment(keys []string, labels map[string]string) (seg Segment, missing string) {
	seg = make(Segment, len(keys))
	for _, k := range keys {
		v, ok := labels[k]
		if !ok {
			return nil, k
		}
		seg[k] = v
	}
	return seg, ""
}

// MissingTopologyLabel says why a node has no segment.
func MissingTopologyLabel(node, provisioner, key string) string {
	return fmt.Sprintf("node %s has no label %q, one of the spec.topologyKeys of PavProvisioner %q: it belongs to no topology segment of that provisioner", node, key, provisioner)
}

// Key is a segment's canonical text, sorted by key: "k1=v1,k2=v2".
func (s Segment) Key() string {
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := ""
	for i, k := range keys {
		if i > 0 {
			out += ","
		}
		out += k + "=" + s[k]
	}
	return out
}

// NodeAffinity is the PersistentVolume node affinity that keeps a volume in
// the segment: the nodes carrying each of its labels.
func (s Segment) NodeAffinity() *corev1.VolumeNodeAffinity {
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	term := corev1.NodeSelectorTerm{}
	for _, k := range keys {
		term.MatchExpressions = append(term.MatchExpressions, corev1.NodeSelectorRequirement{
			Key: k, Operator: corev1.NodeSelectorOpIn, Values: []string{s[k]},
		})
	}
	return &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{term}}}
}

// LabelSelector selects the nodes of the segment (a CSIStorageCapacity's
// nodeTopology).
func (s Segment) LabelSelector() *metav1.LabelSelector {
	m := make(map[string]string, len(s))
	for k, v := range s {
		m[k] = v
	}
	return &metav1.LabelSelector{MatchLabels: m}
}
