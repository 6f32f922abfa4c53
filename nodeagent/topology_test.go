package nodeagent

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/albertofaria/pav/crds/v1alpha1"
	pavcsi "github.com/albertofaria/pav/csi"
)

// NodeGetInfo reports the node's segment for the provisioner's topology
// keys; a node without one of the labels reports none and gets an Event.
func TestNodeGetInfoTopology(t *testing.T) {
	const zone, host = "topology.kubernetes.io/zone", "kubernetes.io/hostname"
	for name, tc := range map[string]struct {
		keys   []string
		labels map[string]string
		want   map[string]string
		event  string
	}{
		"no topology keys":  {labels: map[string]string{zone: "a"}},
		"segment of labels": {keys: []string{zone, host}, labels: map[string]string{zone: "a", host: "node1", "other": "x"}, want: map[string]string{zone: "a", host: "node1"}},
		"a label missing": {keys: []string{zone, host}, labels: map[string]string{host: "node1"},
			event: `Warning MissingTopologyLabel node node1 has no label "topology.kubernetes.io/zone", one of the spec.topologyKeys of PavProvisioner "` + testDriver + `"`},
	} {
		t.Run(name, func(t *testing.T) {
			f := newStagerFixture(t, nil)
			ctx := context.Background()
			node, _ := f.kube.CoreV1().Nodes().Get(ctx, "node1", metav1.GetOptions{})
			node.Labels = tc.labels
			if _, err := f.kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			_ = f.provs.Update(&v1alpha1.PavProvisioner{ObjectMeta: metav1.ObjectMeta{Name: testDriver},
				Spec: v1alpha1.PavProvisionerSpec{ProvisioningModes: []v1alpha1.ProvisioningMode{v1alpha1.Dynamic}, TopologyKeys: tc.keys}})
			events := record.NewFakeRecorder(10)
			f.stager.recorder = events
			resp, err := pavcsi.NewDriver(testDriver, "v", "node1", f.stager).NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]string
			if resp.AccessibleTopology != nil {
				got = resp.AccessibleTopology.Segments
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("accessible topology %v, want %v", got, tc.want)
			}
			close(events.Events)
			var all []string
			for e := range events.Events {
				all = append(all, e)
			}
			if (tc.event == "") != (len(all) == 0) || (tc.event != "" && !strings.HasPrefix(strings.Join(all, "\n"), tc.event)) {
				t.Errorf("events %q, want %q", all, tc.event)
			}
		})
	}
}

// A driver whose PavProvisioner is gone is still served while kubelet tracks
// volumes of it (the node plugin restarted while draining it, say): kubelet
// registers it again and must succeed, or it can never unmount those
// volumes. NodeGetInfo then reports no topology instead of failing.
func TestNodeGetInfoOfADrainedDriver(t *testing.T) {
	f := newStagerFixture(t, nil)
	if err := f.provs.Delete(&v1alpha1.PavProvisioner{ObjectMeta: metav1.ObjectMeta{Name: testDriver}}); err != nil {
		t.Fatal(err)
	}
	resp, err := pavcsi.NewDriver(testDriver, "v", "node1", f.stager).NodeGetInfo(context.Background(), &csi.NodeGetInfoRequest{})
	if err != nil {
		t.Fatalf("NodeGetInfo of a driver without its PavProvisioner: %v", err)
	}
	if resp.NodeId != "node1" || resp.AccessibleTopology != nil {
		t.Errorf("NodeGetInfo = %v, want node1 without topology", resp)
	}
}
