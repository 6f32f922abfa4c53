package controller

import (
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/templating"
)

// Topology is the topology in the validation and creation context of claim
// pvc of class, which the scheduler placed on selected ("" for none), for
// provisioner p on a cluster of nodes: nil without topology keys. The
// controller's rule, also `pav render`'s.
func Topology(p *v1alpha1.PavProvisioner, class *storagev1.StorageClass, pvc *corev1.PersistentVolumeClaim, selected string, nodes []*corev1.Node) (*templating.Topology, error) {
	return topologyRequirement(p.Name, p.Spec.TopologyKeys, nodes, class.AllowedTopologies, selected, pvc.Name)
}

// topologyRequirement is the requisite and preferred topology that
// external-provisioner would pass to a CSI driver's CreateVolume
// (pkg/controller/topology.go, GenerateAccessibilityRequirements, with its
// default immediate topology and without strict topology), for a provisioner
// with the given topology keys: requisite is the class's allowedTopologies
// (each term's values multiplied out) or else every node's segment; preferred
// is requisite rotated so that the selected node's segment comes first, or
// for immediate binding by a hash of the claim's name (spreading a
// StatefulSet's claims). nil without topology keys. nodes are the cluster's,
// selected the scheduler's choice ("" for none).
func topologyRequirement(provisioner string, keys []string, nodes []*corev1.Node, allowed []corev1.TopologySelectorTerm, selected, claimName string) (*templating.Topology, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	var selectedSeg protocol.Segment
	if selected != "" {
		i := slices.IndexFunc(nodes, func(n *corev1.Node) bool { return n.Name == selected })
		if i < 0 {
			return nil, fmt.Errorf("the selected node %s does not exist", selected)
		}
		var missing string
		if selectedSeg, missing = protocol.NodeSegment(keys, nodes[i].Labels); missing != "" {
			return nil, fmt.Errorf("%s", protocol.MissingTopologyLabel(selected, provisioner, missing))
		}
	}
	var requisite []protocol.Segment
	if len(allowed) > 0 {
		requisite = flattenTopology(allowed)
	} else {
		for _, n := range nodes {
			if seg, missing := protocol.NodeSegment(keys, n.Labels); missing == "" {
				requisite = append(requisite, seg)
			}
		}
	}
	if len(requisite) == 0 {
		return nil, fmt.Errorf("no node has all the labels %q of the spec.topologyKeys of PavProvisioner %q, and the StorageClass has no allowedTopologies", keys, provisioner)
	}
	sort.Slice(requisite, func(i, j int) bool { return requisite[i].Key() < requisite[j].Key() })
	requisite = slices.CompactFunc(requisite, func(a, b protocol.Segment) bool { return a.Key() == b.Key() })

	var first int
	if selectedSeg == nil {
		hash, index := claimNameHash(claimName)
		first = int((hash + index) % uint32(len(requisite)))
	} else {
		first = slices.IndexFunc(requisite, func(t protocol.Segment) bool { return subset(t, selectedSeg) })
		if first < 0 {
			return nil, fmt.Errorf("the topology %s of the selected node %s is not in the StorageClass's allowedTopologies", selectedSeg.Key(), selected)
		}
	}
	preferred := append(slices.Clone(requisite[first:]), requisite[:first]...)
	return &templating.Topology{Requisite: requisite, Preferred: preferred}, nil
}

// flattenTopology turns allowedTopologies (terms ORed, expressions of a term
// ANDed, values of an expression ORed) into segments.
func flattenTopology(terms []corev1.TopologySelectorTerm) []protocol.Segment {
	var out []protocol.Segment
	for _, term := range terms {
		var segs []protocol.Segment
		for _, expr := range term.MatchLabelExpressions {
			var next []protocol.Segment
			for _, v := range expr.Values {
				if len(segs) == 0 {
					next = append(next, protocol.Segment{expr.Key: v})
					continue
				}
				for _, s := range segs {
					n := protocol.Segment{expr.Key: v}
					for k, x := range s {
						n[k] = x
					}
					next = append(next, n)
				}
			}
			segs = next
		}
		out = append(out, segs...)
	}
	return out
}

// subset: every label of t has the same value in of.
func subset(t, of protocol.Segment) bool {
	for k, v := range t {
		if of[k] != v {
			return false
		}
	}
	return true
}

// claimNameHash is external-provisioner's spreading hash: for a name like
// claim-statefulset-3 it hashes "statefulset" and offsets by 3, so that a
// StatefulSet's claims go round the segments and one member's claims stay
// together.
func claimNameHash(name string) (hash, index uint32) {
	s := name
	if dash := strings.LastIndexByte(name, '-'); dash != -1 {
		if id, err := strconv.ParseUint(name[dash+1:], 10, 32); err == nil {
			index = uint32(id)
			s = name[:dash]
			if dash := strings.LastIndexByte(s, '-'); dash != -1 {
				s = s[dash+1:]
			}
		}
	}
	h := fnv.New32()
	_, _ = h.Write([]byte(s))
	return h.Sum32(), index
}

// ImmediateNode is the node PaV creates claim pvc's volume for when nothing
// else picks one: for a provisioner with topology keys and a class that
// does not wait for the first consumer, as a CSI driver picks from the
// requisite topology external-provisioner passes for Immediate binding.
// It takes the first segment of the preferred topology (spread by
// external-provisioner's hash of the claim's name) that holds a Ready,
// schedulable node with every topology label (a node whose node plugin
// reports a segment, see protocol.NodeSegment), and among that segment's
// nodes, sorted by name, the one a hash of the claim's UID points at;
// nodes with a NoSchedule or NoExecute taint only when no other will do.
// "" without topology keys, for WaitForFirstConsumer, or when the
// scheduler has selected a node; an error saying why when no node fits.
// The controller's rule, also `pav render`'s.
func ImmediateNode(p *v1alpha1.PavProvisioner, class *storagev1.StorageClass, pvc *corev1.PersistentVolumeClaim, nodes []*corev1.Node) (string, error) {
	keys := p.Spec.TopologyKeys
	if len(keys) == 0 || pvc.Annotations[annSelectedNode] != "" ||
		(class.VolumeBindingMode != nil && *class.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer) {
		return "", nil
	}
	topology, err := Topology(p, class, pvc, "", nodes)
	if err != nil {
		return "", err
	}
	type candidate struct {
		name    string
		seg     protocol.Segment
		tainted bool
	}
	var candidates []candidate
	for _, n := range nodes {
		if seg, missing := protocol.NodeSegment(keys, n.Labels); missing == "" && nodeUsable(n) {
			candidates = append(candidates, candidate{n.Name, seg, nodeTainted(n)})
		}
	}
	sort.Slice(candidates, func(i, j int) bool { return candidates[i].name < candidates[j].name })
	// Untainted nodes first: the claim's pods may not tolerate a taint.
	for _, tainted := range []bool{false, true} {
		for _, want := range topology.Preferred {
			var in []string
			for _, c := range candidates {
				if c.tainted == tainted && subset(want, c.seg) {
					in = append(in, c.name)
				}
			}
			if len(in) > 0 {
				h := fnv.New32a()
				_, _ = h.Write([]byte(pvc.UID))
				return in[h.Sum32()%uint32(len(in))], nil
			}
		}
	}
	keysOf := make([]string, len(topology.Requisite))
	for i, s := range topology.Requisite {
		keysOf[i] = s.Key()
	}
	return "", fmt.Errorf("no Ready, schedulable node with the labels %q of the spec.topologyKeys of PavProvisioner %q is in the claim's requisite topology [%s] (the StorageClass's allowedTopologies, else every node's segment), so there is no node to create the volume for (volumeBindingMode Immediate)",
		keys, p.Name, strings.Join(keysOf, " "))
}
