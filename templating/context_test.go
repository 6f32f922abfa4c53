package templating

import (
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/protocol"
)

func keys(m map[string]interface{}) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

func TestDynamicContext(t *testing.T) {
	block := corev1.PersistentVolumeBlock
	tests := []struct {
		name string
		req  func() DynamicRequest
		want map[string]interface{} // scalar variables; objects checked separately
	}{
		{
			name: "defaults",
			req:  func() DynamicRequest { return DynamicRequest{PVC: testPVC(), Class: testClass()} },
			want: map[string]interface{}{
				"requestedVolumeMode":  "Filesystem",
				"requestedAccessModes": []interface{}{"ReadWriteOnce"},
				"requestedMinCapacity": int64(1 << 30),
				"requestedMaxCapacity": nil,
				"params":               map[string]interface{}{"path": "/data", "size": "5"},
				"selectedNodeName":     nil,
				"requisiteTopology":    nil,
				"preferredTopology":    nil,
				"vac":                  nil,
				"mutableParams":        map[string]interface{}{},
			},
		},
		{
			name: "block, limit, several modes, selected node, no parameters",
			req: func() DynamicRequest {
				pvc, sc := testPVC(), testClass()
				pvc.Spec.VolumeMode = &block
				pvc.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany, corev1.ReadOnlyMany}
				pvc.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("1.5k")
				pvc.Spec.Resources.Limits = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2M")}
				sc.Parameters = nil
				return DynamicRequest{PVC: pvc, Class: sc, SelectedNodeName: "node-7", VolumeAttributesClass: testVAC("gold", "iops", "3000"), Topology: &Topology{
					Requisite: []protocol.Segment{{"zone": "a"}, {"zone": "b"}},
					Preferred: []protocol.Segment{{"zone": "b"}, {"zone": "a"}},
				}}
			},
			want: map[string]interface{}{
				"requestedVolumeMode":  "Block",
				"requestedAccessModes": []interface{}{"ReadWriteMany", "ReadOnlyMany"},
				"requestedMinCapacity": int64(1500),
				"requestedMaxCapacity": int64(2000000),
				"params":               map[string]interface{}{},
				"selectedNodeName":     "node-7",
				"requisiteTopology":    []interface{}{map[string]interface{}{"zone": "a"}, map[string]interface{}{"zone": "b"}},
				"preferredTopology":    []interface{}{map[string]interface{}{"zone": "b"}, map[string]interface{}{"zone": "a"}},
				"mutableParams":        map[string]interface{}{"iops": "3000"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.req()
			vars, err := dynamicVars(r)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := keys(vars), sortedCopy([]string{"requestedVolumeMode", "requestedAccessModes", "requestedMinCapacity", "requestedMaxCapacity", "params", "sc", "pvc", "selectedNodeName", "requisiteTopology", "preferredTopology", "vac", "mutableParams"}); !reflect.DeepEqual(got, want) {
				t.Errorf("variables %v, want %v", got, want)
			}
			for k, w := range tt.want {
				if !reflect.DeepEqual(vars[k], w) {
					t.Errorf("%s = %#v, want %#v", k, vars[k], w)
				}
			}
			pvc := vars["pvc"].(map[string]interface{})
			if pvc["apiVersion"] != "v1" || pvc["kind"] != "PersistentVolumeClaim" {
				t.Errorf("pvc type %v %v", pvc["apiVersion"], pvc["kind"])
			}
			if md := pvc["metadata"].(map[string]interface{}); md["name"] != "claim" || md["uid"] != "1111-2222" {
				t.Errorf("pvc metadata %v", md)
			}
			if vac, ok := vars["vac"].(map[string]interface{}); ok && (vac["kind"] != "VolumeAttributesClass" || vac["driverName"] != "test") {
				t.Errorf("vac %v", vac)
			}
			sc := vars["sc"].(map[string]interface{})
			if sc["apiVersion"] != "storage.k8s.io/v1" || sc["kind"] != "StorageClass" || sc["provisioner"] != "test" {
				t.Errorf("sc %v", sc)
			}

			cvars, err := creationVars(r)
			if err != nil {
				t.Fatal(err)
			}
			if cvars["defaultHandle"] != "pvc-1111-2222" {
				t.Errorf("defaultHandle %v", cvars["defaultHandle"])
			}
			delete(cvars, "defaultHandle")
			if !reflect.DeepEqual(cvars, vars) {
				t.Error("creation context is not the validation context plus defaultHandle")
			}
		})
	}
	if _, err := dynamicVars(DynamicRequest{PVC: testPVC()}); err == nil {
		t.Error("no error without a StorageClass")
	}
}

func TestStaticContext(t *testing.T) {
	vars, err := staticVars(StaticRequest{PV: testPV()})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := keys(vars), sortedCopy([]string{"requestedVolumeMode", "requestedAccessModes", "requestedMinCapacity", "requestedMaxCapacity", "params", "handle", "pv"}); !reflect.DeepEqual(got, want) {
		t.Errorf("variables %v, want %v", got, want)
	}
	want := map[string]interface{}{
		"requestedVolumeMode":  "Block",
		"requestedAccessModes": []interface{}{"ReadWriteOnce", "ReadOnlyMany"},
		"requestedMinCapacity": int64(2 << 30),
		"requestedMaxCapacity": int64(2 << 30),
		"params":               map[string]interface{}{"a": "b"},
		"handle":               "h-1",
	}
	for k, w := range want {
		if !reflect.DeepEqual(vars[k], w) {
			t.Errorf("%s = %#v, want %#v", k, vars[k], w)
		}
	}
	pv := vars["pv"].(map[string]interface{})
	if pv["apiVersion"] != "v1" || pv["kind"] != "PersistentVolume" {
		t.Errorf("pv type %v %v", pv["apiVersion"], pv["kind"])
	}
}

func TestStagingContext(t *testing.T) {
	pvc := testPVC()
	pvc.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany}
	for _, readOnly := range []bool{false, true} {
		vars, err := stagingVars(StagingRequest{PVC: pvc, PV: testPV(), Node: testNode(), ReadOnly: readOnly,
			MountOptions: []string{"noatime", "context=\"a,b\""}, FSType: "ext4"})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := keys(vars), sortedCopy([]string{"volumeMode", "accessModes", "capacity", "params", "handle", "readOnly", "pvc", "pv", "node",
			"mountOptions", "fsType"}); !reflect.DeepEqual(got, want) {
			t.Errorf("variables %v, want %v", got, want)
		}
		want := map[string]interface{}{
			"volumeMode":   "Block", // the PVC does not say; the PV does
			"accessModes":  []interface{}{"ReadOnlyMany"},
			"capacity":     int64(2 << 30),
			"params":       map[string]interface{}{"a": "b"},
			"handle":       "h-1",
			"readOnly":     readOnly,
			"mountOptions": []interface{}{"noatime", `context="a,b"`},
			"fsType":       "ext4",
		}
		for k, w := range want {
			if !reflect.DeepEqual(vars[k], w) {
				t.Errorf("%s = %#v, want %#v", k, vars[k], w)
			}
		}
		for k, kind := range map[string]string{"pvc": "PersistentVolumeClaim", "pv": "PersistentVolume", "node": "Node"} {
			if m := vars[k].(map[string]interface{}); m["kind"] != kind || m["apiVersion"] != "v1" {
				t.Errorf("%s type %v %v", k, m["apiVersion"], m["kind"])
			}
		}
	}
	fs := corev1.PersistentVolumeFilesystem
	pvc.Spec.VolumeMode = &fs
	vars, _ := stagingVars(StagingRequest{PVC: pvc, PV: testPV(), Node: testNode()})
	if vars["volumeMode"] != "Filesystem" {
		t.Errorf("volumeMode %v: the PVC's must win", vars["volumeMode"])
	}
	// Nothing passed (a Block volume): an empty list and an empty string,
	// so that templates can iterate and compare without a test for none.
	if !reflect.DeepEqual(vars["mountOptions"], []interface{}{}) || vars["fsType"] != "" {
		t.Errorf("without mount flags: mountOptions %#v, fsType %#v", vars["mountOptions"], vars["fsType"])
	}
	if _, err := stagingVars(StagingRequest{PVC: pvc, PV: testPV()}); err == nil {
		t.Error("no error without a Node")
	}
}

func TestVolumeRequests(t *testing.T) {
	pvc := testPVC()
	r, err := DynamicVolumeRequest(pvc)
	if err != nil {
		t.Fatal(err)
	}
	if r.VolumeMode != corev1.PersistentVolumeFilesystem || r.MinCapacity != 1<<30 || r.MaxCapacity != nil || !reflect.DeepEqual(r.AccessModes, pvc.Spec.AccessModes) {
		t.Errorf("dynamic %+v", r)
	}
	if r, err = StaticVolumeRequest(testPV()); err != nil {
		t.Fatal(err)
	}
	if r.VolumeMode != corev1.PersistentVolumeBlock || r.MinCapacity != 2<<30 || r.MaxCapacity == nil || *r.MaxCapacity != 2<<30 {
		t.Errorf("static %+v", r)
	}
}

// Sizes the API server accepts but no int64 holds are refused, never wrapped
// (a wrapped request would be 0 or negative and pass any maxCapacity).
func TestVolumeRequestsRefuseOverflowingSizes(t *testing.T) {
	for _, size := range []string{"1e19", "1e100", "9223372036854775808", "10E"} {
		pvc := testPVC()
		pvc.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse(size)
		if _, err := DynamicVolumeRequest(pvc); err == nil || !strings.Contains(err.Error(), "larger than") {
			t.Errorf("request %s: %v, want an error", size, err)
		}
		if _, err := dynamicVars(DynamicRequest{PVC: pvc, Class: testClass()}); err == nil {
			t.Errorf("request %s: the template context was built", size)
		}
		pvc = testPVC()
		pvc.Spec.Resources.Limits = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}
		if _, err := DynamicVolumeRequest(pvc); err == nil {
			t.Errorf("limit %s: no error", size)
		}
		pv := testPV()
		pv.Spec.Capacity[corev1.ResourceStorage] = resource.MustParse(size)
		if _, err := StaticVolumeRequest(pv); err == nil {
			t.Errorf("PV capacity %s: no error", size)
		}
	}
	pvc := testPVC()
	pvc.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("9223372036854775807")
	if r, err := DynamicVolumeRequest(pvc); err != nil || r.MinCapacity != 1<<63-1 {
		t.Errorf("the largest int64: %v %v", r.MinCapacity, err)
	}
}

// ContextVariables names exactly what the contexts hold when everything is
// known (a clone, a restore, a topology, a volume with a handle), together
// with what an inline volume's creation, deletion and staging hold instead
// (inlinePod).
func TestContextVariablesMatchContexts(t *testing.T) {
	pv := testPV()
	full := DynamicRequest{PVC: testPVC(), Class: testClass(), SelectedNodeName: "n", PV: pv, Handle: "h",
		SourcePVC: testPVC(), SourcePV: pv,
		SourceSnapshot: &snapshotv1.VolumeSnapshot{}, SourceContent: &snapshotv1.VolumeSnapshotContent{},
		Topology: &Topology{}, VolumeAttributesClass: testVAC("new", "tier", "fast"), CurrentVolumeAttributesClass: testVAC("old", "tier", "slow")}
	staging := StagingRequest{PVC: testPVC(), PV: pv, Node: testNode()}
	iv := protocol.InlineVolume{VolumeID: "csi-1", PodNamespace: "ns", PodName: "p", PodUID: "u"}
	inline := DynamicRequest{Inline: &iv, SelectedNodeName: "n"}
	inlinePV, err := protocol.InlinePV("d", iv, resource.MustParse("0"), nil)
	if err != nil {
		t.Fatal(err)
	}
	inlineStaging := StagingRequest{PVC: protocol.InlineClaim(iv), PV: inlinePV, Node: testNode()}
	bothStagings := func() (map[string]interface{}, error) {
		vars, err := stagingVars(staging)
		if err != nil {
			return nil, err
		}
		more, err := stagingVars(inlineStaging)
		maps.Copy(vars, more)
		return vars, err
	}
	// union adds the names of an inline volume's context.
	union := func(build func(DynamicRequest) (map[string]interface{}, error), r DynamicRequest) func() (map[string]interface{}, error) {
		return func() (map[string]interface{}, error) {
			vars, err := build(full)
			if err != nil {
				return nil, err
			}
			more, err := build(r)
			maps.Copy(vars, more)
			return vars, err
		}
	}
	for _, tc := range []struct {
		phase protocol.Phase
		modes []v1alpha1.ProvisioningMode
		build func() (map[string]interface{}, error)
	}{
		{protocol.PhaseValidation, []v1alpha1.ProvisioningMode{v1alpha1.Dynamic}, union(dynamicVars, inline)},
		{protocol.PhaseValidation, []v1alpha1.ProvisioningMode{v1alpha1.Static}, func() (map[string]interface{}, error) {
			vars, err := staticVars(StaticRequest{PV: pv})
			if err != nil {
				return nil, err
			}
			more := inlineVars(inline) // InlineValidation, whatever the modes
			maps.Copy(vars, more)
			return vars, nil
		}},
		{protocol.PhaseCreation, nil, union(creationVars, inline)},
		{protocol.PhaseDeletion, nil, union(deletionVars, DynamicRequest{Inline: &iv, PV: inlinePV, Handle: "csi-1"})},
		{protocol.PhaseExpansion, nil, func() (map[string]interface{}, error) { return expansionVars(full) }},
		{protocol.PhaseModification, nil, func() (map[string]interface{}, error) { return modificationVars(full) }},
		{protocol.PhaseStaging, nil, bothStagings},
		{protocol.PhaseUnstaging, nil, bothStagings},
	} {
		vars, err := tc.build()
		if err != nil {
			t.Fatal(err)
		}
		if got, want := ContextVariables(tc.phase, tc.modes), keys(vars); !reflect.DeepEqual(got, want) {
			t.Errorf("%s %v: ContextVariables %v, the context has %v", tc.phase, tc.modes, got, want)
		}
	}
	both := ContextVariables(protocol.PhaseValidation, []v1alpha1.ProvisioningMode{v1alpha1.Dynamic, v1alpha1.Static})
	if !slices.Contains(both, "pvc") || !slices.Contains(both, "pv") {
		t.Errorf("validation with both modes: %v, want both contexts' names", both)
	}
}

func testVAC(name, key, value string) *storagev1.VolumeAttributesClass {
	return &storagev1.VolumeAttributesClass{ObjectMeta: metav1.ObjectMeta{Name: name}, DriverName: "test", Parameters: map[string]string{key: value}}
}

func TestModificationContext(t *testing.T) {
	r := DynamicRequest{PVC: testPVC(), Class: testClass(), PV: testPV(), VolumeAttributesClass: testVAC("gold", "iops", "3000")}
	vars, err := modificationVars(r)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := vars["mutableParams"], map[string]interface{}{"iops": "3000"}; !reflect.DeepEqual(got, want) {
		t.Errorf("mutableParams = %v, want %v", got, want)
	}
	if vars["currentVac"] != nil || !reflect.DeepEqual(vars["currentMutableParams"], map[string]interface{}{}) {
		t.Errorf("without a current class: currentVac %v, currentMutableParams %v; want none and {}", vars["currentVac"], vars["currentMutableParams"])
	}
	r.CurrentVolumeAttributesClass = testVAC("silver", "iops", "1000")
	if vars, err = modificationVars(r); err != nil {
		t.Fatal(err)
	}
	if got, want := vars["currentMutableParams"], map[string]interface{}{"iops": "1000"}; !reflect.DeepEqual(got, want) {
		t.Errorf("currentMutableParams = %v, want %v", got, want)
	}
	if md := vars["currentVac"].(map[string]interface{})["metadata"].(map[string]interface{}); md["name"] != "silver" {
		t.Errorf("currentVac metadata %v", md)
	}
}

// An inline volume's creation context: its attributes as params, kubelet's
// volume ID as defaultHandle, the pod's node and the pod; no claim or class.
// Its staging context: inlinePod in place of pvc, the made-up pv.
func TestInlineContexts(t *testing.T) {
	iv := protocol.InlineVolume{VolumeID: "csi-abc", Attributes: map[string]string{"size": "5"}, PodNamespace: "ns", PodName: "p", PodUID: "u", ServiceAccount: "sa"}
	vars, err := creationVars(DynamicRequest{Inline: &iv, SelectedNodeName: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	pod := map[string]interface{}{"name": "p", "namespace": "ns", "uid": "u", "serviceAccountName": "sa"}
	for k, want := range map[string]interface{}{
		"params": map[string]interface{}{"size": "5"}, "defaultHandle": "csi-abc", "selectedNodeName": "n1", "inlinePod": pod,
		"requestedVolumeMode": "Filesystem", "requestedAccessModes": []interface{}{"ReadWriteOncePod"}, "requestedMinCapacity": int64(0),
	} {
		if !reflect.DeepEqual(vars[k], want) {
			t.Errorf("%s = %#v, want %#v", k, vars[k], want)
		}
	}
	for _, k := range []string{"pvc", "sc", "sourcePvc"} {
		if _, ok := vars[k]; ok {
			t.Errorf("%s is defined", k)
		}
	}
	pv, err := protocol.InlinePV("d", iv, resource.MustParse("1Gi"), map[string]string{"endpoint": "e"})
	if err != nil {
		t.Fatal(err)
	}
	staging, err := stagingVars(StagingRequest{PVC: protocol.InlineClaim(iv), PV: pv, Node: testNode()})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := staging["pvc"]; ok {
		t.Error("pvc is defined in an inline volume's staging context")
	}
	if !reflect.DeepEqual(staging["inlinePod"], pod) || staging["handle"] != "csi-abc" || staging["capacity"] != int64(1<<30) ||
		!reflect.DeepEqual(staging["params"], map[string]interface{}{"size": "5", "endpoint": "e"}) {
		t.Errorf("staging context: inlinePod %v handle %v capacity %v params %v", staging["inlinePod"], staging["handle"], staging["capacity"], staging["params"])
	}
}
