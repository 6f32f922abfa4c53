package authoring

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/albertofaria/pav/internal/cmdtest"
	"github.com/albertofaria/pav/protocol"
)

// run executes a fresh command in-process.
func run(t *testing.T, newCmd func() *cobra.Command, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	return cmdtest.Run(t, newCmd(), args...)
}

func render(t *testing.T, args ...string) (map[string]interface{}, string, error) {
	t.Helper()
	out, stderr, err := run(t, newRenderCmd, append([]string{"-f", "testdata/provisioner.yaml"}, args...)...)
	if err != nil {
		return nil, stderr, err
	}
	var m map[string]interface{}
	if err := yaml.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("output is not YAML: %v\n%s", err, out)
	}
	return m, stderr, nil
}

// argsAt digs the args of the first container out of an evaluated section.
func argsAt(t *testing.T, section map[string]interface{}) []string {
	t.Helper()
	pt, _ := section["podTemplate"].(map[string]interface{})
	spec, _ := pt["spec"].(map[string]interface{})
	cs, _ := spec["containers"].([]interface{})
	if len(cs) == 0 {
		t.Fatalf("no containers in %v", section)
	}
	raw, _ := cs[0].(map[string]interface{})["args"].([]interface{})
	out := make([]string, len(raw))
	for i, a := range raw {
		out[i], _ = a.(string)
	}
	return out
}

const defaultPVCUID = "pvc-" // prefix check only: the UID is derived from the claim's name

func TestRenderPhases(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string // args of the first container; "*" matches anything
		more func(t *testing.T, m map[string]interface{})
	}{
		{
			name: "dynamic validation",
			args: []string{"--phase", "validation", "--pvc", "testdata/pvc.yaml", "--sc", "testdata/sc.yaml", "--selected-node", "n1"},
			want: []string{"Filesystem", "ReadWriteOnce,ReadOnlyMany", "1073741824", "2147483648", "v", "echo-class", "claim", "no-pv", "no-handle", "n1"},
			more: func(t *testing.T, m map[string]interface{}) {
				if m["maxCapacity"] != "10Gi" || !reflect.DeepEqual(m["volumeModes"], []interface{}{"Filesystem", "Block"}) {
					t.Errorf("section %v", m)
				}
				if _, ok := m["accessModes"]; ok {
					t.Error("an absent field was printed")
				}
			},
		},
		{
			name: "dynamic validation, default class, no selected node",
			args: []string{"--phase", "validation", "--pvc", "testdata/pvc.yaml"},
			want: []string{"Filesystem", "ReadWriteOnce,ReadOnlyMany", "1073741824", "2147483648", "no-k", "echo-class", "claim", "no-pv", "no-handle", "none"},
		},
		{
			// the static context, without the pod template (dynamic provisioning only)
			name: "static validation",
			args: []string{"--phase", "validation", "--pv", "testdata/pv.yaml"},
			more: func(t *testing.T, m map[string]interface{}) {
				if m["podTemplate"] != nil || m["maxCapacity"] != "10Gi" {
					t.Errorf("static validation section %v", m)
				}
			},
		},
		{
			name: "creation",
			args: []string{"--phase", "creation", "--pvc", "testdata/pvc.yaml", "--sc", "testdata/sc.yaml", "--objects", "testdata/objects.yaml", "--selected-node", "n1"},
			want: []string{"other-volume"},
			more: func(t *testing.T, m map[string]interface{}) {
				if h, _ := m["handle"].(string); !strings.HasPrefix(h, defaultPVCUID) || len(h) != len("pvc-")+36 {
					t.Errorf("handle %v", m["handle"])
				}
				if m["capacity"] != "1073741824" {
					t.Errorf("capacity %v", m["capacity"])
				}
				want := map[string]interface{}{"required": map[string]interface{}{"nodeSelectorTerms": []interface{}{
					map[string]interface{}{"matchFields": []interface{}{map[string]interface{}{"key": "metadata.name", "operator": "In", "values": []interface{}{"n1"}}}}}}}
				if !reflect.DeepEqual(m["nodeAffinity"], want) {
					t.Errorf("nodeAffinity %v", m["nodeAffinity"])
				}
			},
		},
		{
			name: "deletion",
			args: []string{"--phase", "deletion", "--pvc", "testdata/pvc.yaml", "--selected-node", "n1"},
			want: []string{"*", "echo"},
		},
		{
			name: "staging with defaults",
			args: []string{"--phase", "staging", "--pvc", "testdata/pvc.yaml", "--sc", "testdata/sc.yaml"},
			want: []string{"Filesystem", "ReadWriteOnce,ReadOnlyMany", "1073741824", "v", "*", "False", "claim", "*", "node", "", ""},
		},
		{
			name: "staging a static volume, read-only, on a given node",
			args: []string{"--phase", "staging", "--pv", "testdata/pv.yaml", "--node", "testdata/node.yaml", "--read-only"},
			want: []string{"Block", "ReadOnlyMany", "3221225472", "attr", "static-handle", "True", "static-claim", "static-pv", "worker-3", "", ""},
		},
		{
			name: "unstaging",
			args: []string{"--phase", "unstaging", "--pv", "testdata/pv.yaml"},
			want: []string{"static-handle"},
		},
		{
			// the PV's current capacity (3Gi) and the claim's request (1Gi)
			name: "expansion",
			args: []string{"--phase", "expansion", "--pvc", "testdata/pvc.yaml", "--pv", "testdata/pv.yaml"},
			want: []string{"static-handle", "3221225472", "1073741824", "static-pv"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, stderr, err := render(t, tt.args...)
			if err != nil {
				t.Fatalf("error %v\n%s", err, stderr)
			}
			if tt.want == nil {
				tt.more(t, m)
				return
			}
			got := argsAt(t, m)
			if len(got) != len(tt.want) {
				t.Fatalf("args %q, want %q", got, tt.want)
			}
			for i := range got {
				if tt.want[i] != "*" && got[i] != tt.want[i] {
					t.Errorf("arg %d = %q, want %q", i, got[i], tt.want[i])
				}
			}
			if tt.more != nil {
				tt.more(t, m)
			}
		})
	}
}

// -o json prints the same as the default YAML; --pods of expansion is the
// pod the controller creates for the PV.
func TestRenderJSONAndExpansionPod(t *testing.T) {
	args := []string{"-f", "testdata/provisioner.yaml", "--phase", "expansion", "--pvc", "testdata/pvc.yaml", "--pv", "testdata/pv.yaml"}
	y, stderr, err := run(t, newRenderCmd, args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	j, stderr, err := run(t, newRenderCmd, append(args, "-o", "json")...)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var fromYAML, fromJSON interface{}
	if err := yaml.Unmarshal([]byte(y), &fromYAML); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(j), &fromJSON); err != nil {
		t.Fatalf("-o json: %v\n%s", err, j)
	}
	if !reflect.DeepEqual(fromYAML, fromJSON) {
		t.Errorf("-o json %v, yaml %v", fromJSON, fromYAML)
	}
	out, stderr, err := run(t, newRenderCmd, append(args, "--pods", "-o", "json")...)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var pod corev1.Pod
	if err := json.Unmarshal([]byte(out), &pod); err != nil {
		t.Fatal(err)
	}
	if pod.Labels[protocol.LabelPhase] != string(protocol.PhaseExpansion) || pod.Labels[protocol.LabelVolume] != "static-pv" || pod.Annotations[protocol.AnnotationExpansionTarget] == "" {
		t.Errorf("expansion pod labels %v annotations %v", pod.Labels, pod.Annotations)
	}
	if _, _, err := run(t, newRenderCmd, append(args, "-o", "xml")...); err == nil || !strings.Contains(err.Error(), "yaml or json") {
		t.Errorf("-o xml: %v", err)
	}
}

// Modification sees the claim's new class and its current one (from
// --objects), and its pod records the new class; creation sees the class too.
func TestRenderModification(t *testing.T) {
	dir := t.TempDir()
	pvc := filepath.Join(dir, "pvc.yaml")
	objects := filepath.Join(dir, "objects.yaml")
	writeFile(t, pvc, `apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: claim, namespace: ns}
spec:
  storageClassName: echo-class
  volumeAttributesClassName: gold
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
status:
  currentVolumeAttributesClassName: silver
`)
	writeFile(t, objects, `apiVersion: storage.k8s.io/v1
kind: VolumeAttributesClass
metadata: {name: gold}
driverName: echo
parameters: {iops: "3000"}
---
apiVersion: storage.k8s.io/v1
kind: VolumeAttributesClass
metadata: {name: silver}
driverName: echo
parameters: {iops: "1000"}
`)
	args := []string{"--phase", "modification", "--pvc", pvc, "--pv", "testdata/pv.yaml", "--objects", objects}
	m, stderr, err := render(t, args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if got, want := argsAt(t, m), []string{"static-handle", "1000", "3000", "gold"}; !reflect.DeepEqual(got, want) {
		t.Errorf("args %q, want %q", got, want)
	}
	out, stderr, err := run(t, newRenderCmd, append([]string{"-f", "testdata/provisioner.yaml", "--pods", "-o", "json"}, args...)...)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var pod corev1.Pod
	if err := json.Unmarshal([]byte(out), &pod); err != nil {
		t.Fatal(err)
	}
	if pod.Labels[protocol.LabelPhase] != string(protocol.PhaseModification) || pod.Annotations[protocol.AnnotationModificationTarget] != "gold" {
		t.Errorf("modification pod labels %v annotations %v", pod.Labels, pod.Annotations)
	}
	if _, _, err := render(t, "--phase", "modification", "--pvc", pvc, "--pv", "testdata/pv.yaml"); err == nil || !strings.Contains(err.Error(), `VolumeAttributesClass "gold": give it in --objects`) {
		t.Errorf("without the class: %v", err)
	}
	if _, _, err := render(t, "--phase", "modification", "--pvc", "testdata/pvc.yaml"); err == nil || !strings.Contains(err.Error(), "spec.volumeAttributesClassName") {
		t.Errorf("a claim without a class: %v", err)
	}
}

// Staging sees the mount options and fsType kubelet would pass for a
// Filesystem volume: the PV's (from the class for a dynamic one), and the
// staging pod records them for unstaging.
// The snapshot phases see the content of --objects and the volume.
func TestRenderSnapshotPhases(t *testing.T) {
	dir := t.TempDir()
	content := filepath.Join(dir, "content.yaml")
	if err := os.WriteFile(content, []byte(`apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshotContent
metadata: {name: snapcontent-x, uid: content-uid}
spec:
  driver: host-directory
  deletionPolicy: Delete
  source: {volumeHandle: pvc-1}
  volumeSnapshotRef: {namespace: default, name: snap}
status: {snapshotHandle: pav-node2/content-uid}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	prov := "../examples/host-directory/provisioner.yaml"
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--phase", "snapshot-deletion", "--objects", content}, []string{"rm -rf /snapshots/content-uid", "nodeName: pav-node2"}},
		{[]string{"--phase", "snapshot-creation", "--pvc", "../examples/host-directory/usage.yaml", "--selected-node", "pav-node3", "--pods"},
			[]string{"echo pav-node3/", "> /pav/snapshot-handle", "nodeName: pav-node3", "name: pav-snapshot-creation-", protocol.FinalizerResult}},
	} {
		var out, errOut bytes.Buffer
		if err := runRender(context.Background(), &out, &errOut, &renderOptions{file: prov, phase: tc.args[1], kubeletDir: protocol.DefaultKubeletDir,
			objects: flagValues(tc.args, "--objects"), pvc: flagValue(tc.args, "--pvc"), selectedNode: flagValue(tc.args, "--selected-node"), pods: slices.Contains(tc.args, "--pods")}); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%v: output lacks %q:\n%s", tc.args, w, out.String())
			}
		}
	}
	var out, errOut bytes.Buffer
	err := runRender(context.Background(), &out, &errOut, &renderOptions{file: prov, phase: "snapshot-deletion", kubeletDir: protocol.DefaultKubeletDir})
	if err == nil || !strings.Contains(err.Error(), "VolumeSnapshotContent") {
		t.Errorf("snapshot-deletion without a content: %v", err)
	}
}

func TestRenderGroupSnapshotPhases(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pv := func(handle, node string) string {
		return `apiVersion: v1
kind: PersistentVolume
metadata: {name: ` + handle + `, annotations: {pav.albertofaria.github.io/selected-node: ` + node + `}}
spec:
  capacity: {storage: 1Mi}
  accessModes: [ReadWriteOnce]
  csi: {driver: host-directory, volumeHandle: ` + handle + `}
`
	}
	volumes := write("pvs.yaml", pv("pvc-a", "pav-node2")+"---\n"+pv("pvc-b", "pav-node2"))
	content := write("content.yaml", `apiVersion: groupsnapshot.storage.k8s.io/v1
kind: VolumeGroupSnapshotContent
metadata: {name: groupsnapcontent-x, uid: group-uid}
spec:
  driver: host-directory
  deletionPolicy: Delete
  source: {volumeHandles: [pvc-a, pvc-b]}
  volumeGroupSnapshotRef: {namespace: default, name: group}
status:
  volumeGroupSnapshotHandle: pav-node2/group-uid
  volumeSnapshotInfoList:
    - {volumeHandle: pvc-a, snapshotHandle: pav-node2/group-uid-0}
    - {volumeHandle: pvc-b, snapshotHandle: pav-node2/group-uid-1}
`)
	prov := "../examples/host-directory/provisioner.yaml"
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--phase", "group-snapshot-creation", "--objects", volumes, "--pods"},
			[]string{"nodeName: pav-node2", "cp -a /volumes/pvc-a", "cp -a /volumes/pvc-b", "name: pav-group-snapshot-creation-", protocol.FinalizerResult}},
		{[]string{"--phase", "group-snapshot-creation", "--objects", volumes, "--objects", content},
			[]string{"group=group-uid", "cp -a /volumes/pvc-b"}},
		{[]string{"--phase", "group-snapshot-deletion", "--objects", content},
			[]string{"nodeName: pav-node2", "rm -rf /snapshots/group-uid-0", "rm -rf /snapshots/group-uid-1"}},
	} {
		var out, errOut bytes.Buffer
		if err := runRender(context.Background(), &out, &errOut, &renderOptions{file: prov, phase: tc.args[1], kubeletDir: protocol.DefaultKubeletDir,
			objects: flagValues(tc.args, "--objects"), pods: slices.Contains(tc.args, "--pods")}); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%v: output lacks %q:\n%s", tc.args, w, out.String())
			}
		}
	}
	for phase, want := range map[string]string{
		"group-snapshot-creation": "PersistentVolumes of driver host-directory",
		"group-snapshot-deletion": "needs a VolumeGroupSnapshotContent",
	} {
		var out, errOut bytes.Buffer
		err := runRender(context.Background(), &out, &errOut, &renderOptions{file: prov, phase: phase, kubeletDir: protocol.DefaultKubeletDir})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s without a content or volumes: %v, want an error with %q", phase, err, want)
		}
	}
}

func flagValue(args []string, name string) string {
	if v := flagValues(args, name); len(v) > 0 {
		return v[0]
	}
	return ""
}

func flagValues(args []string, name string) []string {
	var out []string
	for i := 0; i+1 < len(args); i++ {
		if args[i] == name {
			out = append(out, args[i+1])
		}
	}
	return out
}

func TestRenderStagingMountOptions(t *testing.T) {
	dir := t.TempDir()
	sc := filepath.Join(dir, "sc.yaml")
	pv := filepath.Join(dir, "pv.yaml")
	if err := os.WriteFile(sc, []byte("apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: echo-class}\nprovisioner: echo\nmountOptions: [noatime, nfsvers=4.1]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pv, []byte(`apiVersion: v1
kind: PersistentVolume
metadata: {name: fs-pv}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  mountOptions: [ro, sync]
  claimRef: {namespace: ns2, name: fs-claim}
  csi: {driver: echo, volumeHandle: fs-handle, fsType: xfs}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args            []string
		options, fsType string
	}{
		{[]string{"--pvc", "testdata/pvc.yaml", "--sc", sc}, "noatime,nfsvers=4.1", ""},
		{[]string{"--pv", pv}, "ro,sync", "xfs"},
	} {
		m, stderr, err := render(t, append([]string{"--phase", "staging"}, tt.args...)...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", tt.args, err, stderr)
		}
		if got := argsAt(t, m); got[9] != tt.options || got[10] != tt.fsType {
			t.Errorf("%v: mountOptions %q, fsType %q; want %q, %q", tt.args, got[9], got[10], tt.options, tt.fsType)
		}
	}
	out, stderr, err := run(t, newRenderCmd, "-f", "testdata/provisioner.yaml", "--phase", "staging", "--pv", pv, "--pods")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var pod corev1.Pod
	if err := yaml.Unmarshal([]byte(out), &pod); err != nil {
		t.Fatal(err)
	}
	if pub := protocol.PublicationOf(&pod); !reflect.DeepEqual(pub.MountOptions, []string{"ro", "sync"}) || pub.FSType != "xfs" {
		t.Errorf("staging pod records %+v", pub)
	}
}

// A PersistentVolume whose handle the node plugin refuses renders no staging.
func TestRenderStagingRefusesAnUnsafeHandle(t *testing.T) {
	pv := filepath.Join(t.TempDir(), "pv.yaml")
	if err := os.WriteFile(pv, []byte(`apiVersion: v1
kind: PersistentVolume
metadata: {name: bad-pv}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  claimRef: {namespace: ns2, name: bad-claim}
  csi: {driver: echo, volumeHandle: "vol$(reboot)"}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := run(t, newRenderCmd, "-f", "testdata/provisioner.yaml", "--phase", "staging", "--pv", pv)
	if err == nil || !strings.Contains(err.Error(), `PersistentVolume bad-pv: spec.csi.volumeHandle: the handle "vol$(reboot)" contains '$'`) {
		t.Fatalf("err = %v, output:\n%s", err, out)
	}
}

// With --kubelet-dir, a rendered pod keeps /pav and is published where a node
// with that kubelet root has them.
func TestRenderPodsKubeletDir(t *testing.T) {
	out, stderr, err := run(t, newRenderCmd, "-f", "testdata/provisioner.yaml", "--phase", "staging", "--pv", "testdata/pv.yaml", "--node", "testdata/node.yaml", "--pods", "--kubelet-dir", "/var/lib/k0s/kubelet")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	pod := &corev1.Pod{}
	if err := yaml.UnmarshalStrict([]byte(out), pod); err != nil {
		t.Fatalf("not a pod: %v\n%s", err, out)
	}
	var hostDir string
	for _, v := range pod.Spec.Volumes {
		if v.Name == protocol.PavVolumeName {
			hostDir = v.HostPath.Path
		}
	}
	if !strings.HasPrefix(hostDir, "/var/lib/k0s/kubelet/plugins/pav.albertofaria.github.io/pods/pav-staging-") ||
		!strings.HasPrefix(pod.Annotations[protocol.AnnotationTargetPath], "/var/lib/k0s/kubelet/pods/") {
		t.Errorf("/pav at %q, target path %q: not under the kubelet dir", hostDir, pod.Annotations[protocol.AnnotationTargetPath])
	}
	if _, stderr, err := run(t, newRenderCmd, "-f", "testdata/provisioner.yaml", "--phase", "staging", "--pv", "testdata/pv.yaml", "--node", "testdata/node.yaml", "--pods", "--kubelet-dir", "var/lib/kubelet"); err == nil || !strings.Contains(err.Error(), "--kubelet-dir") {
		t.Errorf("a relative --kubelet-dir: err %v, stderr %s", err, stderr)
	}
}

func TestRenderPods(t *testing.T) {
	out, stderr, err := run(t, newRenderCmd, "-f", "testdata/provisioner.yaml", "--phase", "staging", "--pv", "testdata/pv.yaml", "--node", "testdata/node.yaml", "--read-only", "--pods")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	pod := &corev1.Pod{}
	if err := yaml.UnmarshalStrict([]byte(out), pod); err != nil {
		t.Fatalf("not a pod: %v\n%s", err, out)
	}
	if pod.Kind != "Pod" || pod.Spec.NodeName != "worker-3" || pod.Namespace != "default" || !strings.HasPrefix(pod.Name, "pav-staging-") {
		t.Errorf("pod %s/%s kind %s node %s", pod.Namespace, pod.Name, pod.Kind, pod.Spec.NodeName)
	}
	if pod.Labels[protocol.LabelProvisioner] != "echo" || pod.Labels[protocol.LabelVolume] != "static-pv" || pod.Labels[protocol.LabelPhase] != "staging" {
		t.Errorf("labels %v", pod.Labels)
	}
	if pod.Annotations[protocol.AnnotationClaim] != "ns2/static-claim" || pod.Annotations[protocol.AnnotationReadOnly] != "true" {
		t.Errorf("annotations %v", pod.Annotations)
	}
	m := pod.Spec.Containers[0].VolumeMounts
	if len(m) != 1 || m[0].MountPath != "/pav" || *m[0].MountPropagation != corev1.MountPropagationBidirectional {
		t.Errorf("mounts %+v", m)
	}

	out, _, err = run(t, newRenderCmd, "-f", "testdata/provisioner.yaml", "--phase", "creation", "--pvc", "testdata/pvc.yaml", "--selected-node", "n1", "--pods")
	if err != nil {
		t.Fatal(err)
	}
	pod = &corev1.Pod{}
	if err := yaml.UnmarshalStrict([]byte(out), pod); err != nil {
		t.Fatal(err)
	}
	uid := pod.Labels[protocol.LabelClaimUID]
	// As the controller makes it: no volume label (the PV does not exist
	// yet), the attempt's StorageClass and evaluated volumeCreation recorded.
	if pod.Namespace != "ns" || pod.Name != protocol.PodName(protocol.PhaseCreation, uid) || uid == "" || pod.Labels["app"] != "create" || pod.Labels[protocol.LabelVolume] != "" {
		t.Errorf("creation pod %s/%s labels %v", pod.Namespace, pod.Name, pod.Labels)
	}
	for _, k := range []string{protocol.AnnotationClaim, protocol.AnnotationClassSnapshot, protocol.AnnotationCreationConfig} {
		if pod.Annotations[k] == "" {
			t.Errorf("creation pod lacks annotation %s: %v", k, pod.Annotations)
		}
	}

	// Deterministic defaults: the same claim gets the same UID every time.
	out2, _, _ := run(t, newRenderCmd, "-f", "testdata/provisioner.yaml", "--phase", "creation", "--pvc", "testdata/pvc.yaml", "--selected-node", "n1")
	out3, _, _ := run(t, newRenderCmd, "-f", "testdata/provisioner.yaml", "--phase", "creation", "--pvc", "testdata/pvc.yaml", "--selected-node", "n1")
	if out2 != out3 || !strings.Contains(out2, uid) {
		t.Errorf("renders differ or UID %s missing:\n%s\n%s", uid, out2, out3)
	}

	// Static volumes get no validation pod (the pod template is for dynamic
	// provisioning), so render shows none either.
	out, stderr, err = run(t, newRenderCmd, "-f", "testdata/provisioner.yaml", "--phase", "validation", "--pv", "testdata/pv.yaml", "--pods")
	if err != nil || out != "" || !strings.Contains(stderr, "no pod") {
		t.Errorf("static validation pod: %v %q %s", err, out, stderr)
	}
}

func TestRenderErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no phase", []string{"-f", "testdata/provisioner.yaml", "--pvc", "testdata/pvc.yaml"}, "--phase is required"},
		{"bad phase", []string{"-f", "testdata/provisioner.yaml", "--phase", "mount", "--pvc", "testdata/pvc.yaml"}, `unknown phase "mount"`},
		{"no file", []string{"--phase", "creation", "--pvc", "testdata/pvc.yaml", "--selected-node", "n1"}, "-f FILE"},
		{"missing file", []string{"-f", "testdata/nope.yaml", "--phase", "creation"}, "no such file"},
		{"no claim", []string{"-f", "testdata/provisioner.yaml", "--phase", "creation"}, "needs --pvc"},
		{"no claim for staging", []string{"-f", "testdata/provisioner.yaml", "--phase", "staging"}, "needs --pvc or --pv"},
		{"no storageCapacity", []string{"-f", "testdata/provisioner.yaml", "--phase", "capacity"}, "has no spec.storageCapacity"},
		{"node without the topology label", []string{"-f", "../examples/host-directory/provisioner.yaml", "--phase", "capacity", "--node", "testdata/unlabelled-node.yaml"},
			`node bare has no label "kubernetes.io/hostname", one of the spec.topologyKeys of PavProvisioner "host-directory"`},
		{"not a claim", []string{"-f", "testdata/provisioner.yaml", "--phase", "creation", "--pvc", "testdata/sc.yaml"}, "want exactly one PersistentVolumeClaim, found 0"},
		{"invalid provisioner", []string{"-f", "testdata/invalid.yaml", "--phase", "creation", "--pvc", "testdata/pvc.yaml"}, "want exactly one PavProvisioner, found 2"},
		// Placed in the file as pav validate places problems.
		{"none where a string is needed", []string{"-f", "testdata/provisioner.yaml", "--phase", "creation", "--pvc", "testdata/pvc.yaml"},
			`testdata/provisioner.yaml:33:72: PavProvisioner "echo": spec.volumeCreation.nodeAffinity.required.nodeSelectorTerms[0].matchFields[0].values[0]: expression evaluated to none`},
		{"get_pvc error", []string{"-f", "testdata/provisioner.yaml", "--phase", "creation", "--pvc", "testdata/pvc.yaml", "--sc", "testdata/sc.yaml", "--selected-node", "n"},
			`spec.volumeCreation.podTemplate.spec.containers[0].args[0]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _, err := run(t, newRenderCmd, tt.args...)
			if err == nil {
				t.Fatalf("no error; output:\n%s", out)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q\nwant %q", err, tt.want)
			}
			if out != "" {
				t.Errorf("output on error:\n%s", out)
			}
		})
	}
}

func TestValidateCommand(t *testing.T) {
	out, _, err := run(t, newValidateCmd, "-f", "testdata/provisioner.yaml")
	if err != nil || out != "valid\n" {
		t.Errorf("valid file: %v %q", err, out)
	}
	for _, ex := range []string{"../examples/host-directory/provisioner.yaml", "../examples/loop-block/provisioner.yaml", "../examples/hello-world/provisioner.yaml"} {
		if out, _, err := run(t, newValidateCmd, "-f", ex); err != nil {
			t.Errorf("%s: %v\n%s", ex, err, out)
		}
	}

	out, stderr, err := run(t, newValidateCmd, "-f", "testdata/invalid.yaml")
	if err == nil || !strings.Contains(err.Error(), "problem(s) found") {
		t.Errorf("invalid file: error %v", err)
	}
	for _, want := range []string{
		`testdata/invalid.yaml:10:5: PavProvisioner "Bad_Name": spec.volumeStaging.podTemplat: Forbidden: unknown field`,
		`testdata/invalid.yaml:4:3: PavProvisioner "Bad_Name": metadata.name: Invalid value: "Bad_Name"`,
		`testdata/invalid.yaml:7:3: PavProvisioner "Bad_Name": spec.volumeCreation: Forbidden: may only be specified if provisioningModes contains Dynamic`,
		`testdata/invalid.yaml:9:3: PavProvisioner "Bad_Name": spec.volumeStaging.podTemplate: Required value`,
		`testdata/invalid.yaml:8:5: PavProvisioner "Bad_Name": spec.volumeCreation.capacity: Invalid value: "lots"`,
		// the unclosed tag: where the template ends, inside the quotes
		`testdata/invalid.yaml:25:34: PavProvisioner "second": spec.volumeStaging.podTemplate.spec.containers[0].command[0]: '}}' expected here`,
		`testdata/invalid.yaml:21:9: PavProvisioner "second": spec.volumeStaging.podTemplate.spec.restartPolicy: Forbidden`,
		`testdata/invalid.yaml:16:1: PavProvisioner "second": spec.volumeCreation: Required value: a provisioner with provisioningModes Dynamic needs`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "\n"); n != 8 {
		t.Errorf("%d problems printed, want 8:\n%s", n, out)
	}
	if !strings.Contains(stderr, `testdata/invalid.yaml: skipping ConfigMap "not-a-provisioner": not a PavProvisioner`) {
		t.Errorf("stderr %q", stderr)
	}
	if _, _, err := run(t, newValidateCmd, "-f", "testdata/pvc.yaml"); err == nil {
		t.Error("a file without PavProvisioners is valid")
	}
	if _, _, err := run(t, newValidateCmd); err == nil {
		t.Error("no -f accepted")
	}
}

// Names a phase's context lacks are problems, at their line and column in
// the file: in a block scalar, a quoted and a plain one.
func TestValidateReportsUnknownNamesWithPositions(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	bad := `apiVersion: pav.albertofaria.github.io/v1alpha1
kind: PavProvisioner
metadata:
  name: typo
spec:
  provisioningModes: [Dynamic]
  volumeCreation:
    capacity: "{{ requestedMinCapcity }}"
  volumeStaging:
    podTemplate:
      spec:
        containers:
          - name: c
            image: {{ '{{' }}
            command:
              - sh
              - -c
              - |
                echo {{ readOnly }}
                  echo {{ handel }}
`
	bad = strings.Replace(bad, "image: {{ '{{' }}", "image: x-{{ imageName }}", 1)
	if err := os.WriteFile(filepath.Join(sub, "typo.yaml"), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile("testdata/provisioner.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "good.yml"), good, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not YAML: {{"), 0o644); err != nil {
		t.Fatal(err)
	}

	// A directory: its files only; with -R its subdirectories' too.
	if out, _, err := run(t, newValidateCmd, "-f", dir); err != nil || out != "valid\n" {
		t.Errorf("-f DIR: %v %q", err, out)
	}
	out, _, err := run(t, newValidateCmd, "-f", dir, "-R")
	if err == nil || !strings.Contains(err.Error(), "3 problem(s)") {
		t.Errorf("-R: error %v, want 3 problems\n%s", err, out)
	}
	file := filepath.Join(sub, "typo.yaml")
	for _, want := range []string{
		file + `:8:19: warning: PavProvisioner "typo": spec.volumeCreation.capacity: 'requestedMinCapcity' is not a variable of volumeCreation's context (did you mean 'requestedMinCapacity'?)`,
		file + `:14:25: warning: PavProvisioner "typo": spec.volumeStaging.podTemplate.spec.containers[0].image: 'imageName' is not a variable of volumeStaging's context`,
		file + `:20:27: warning: PavProvisioner "typo": spec.volumeStaging.podTemplate.spec.containers[0].command[2]: 'handel' is not a variable of volumeStaging's context (did you mean 'handle'?)`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// A value of the wrong type is named in YAML's terms, at its field.
func TestValidateTypeErrorsNameNoGoTypes(t *testing.T) {
	f := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(f, []byte("apiVersion: pav.albertofaria.github.io/v1alpha1\nkind: PavProvisioner\nmetadata: {name: p}\nspec:\n  provisioningModes: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, _ := run(t, newValidateCmd, "-f", f)
	if want := f + `:5:3: PavProvisioner "p": spec.provisioningModes: Invalid value: must be a list, not a number`; strings.TrimSpace(out) != want {
		t.Errorf("output %q, want %q", out, want)
	}
}

// Whatever render prints ends with a newline, so that what a shell prints
// next (an error, a prompt) starts on its own line.
func TestRenderOutputEndsWithNewline(t *testing.T) {
	for _, args := range [][]string{
		{"--phase", "validation", "--pvc", "testdata/pvc.yaml"},
		{"--phase", "creation", "--pvc", "testdata/pvc.yaml", "--selected-node", "n1"},
		{"--phase", "creation", "--pvc", "testdata/pvc.yaml", "--selected-node", "n1", "--pods"},
		{"--phase", "deletion", "--pvc", "testdata/pvc.yaml"},
		{"--phase", "staging", "--pv", "testdata/pv.yaml", "--node", "testdata/node.yaml"},
		{"--phase", "staging", "--pv", "testdata/pv.yaml", "--node", "testdata/node.yaml", "--pods"},
		{"--phase", "unstaging", "--pv", "testdata/pv.yaml", "--pods"},
	} {
		out, stderr, err := run(t, newRenderCmd, append([]string{"-f", "testdata/provisioner.yaml"}, args...)...)
		if err != nil {
			t.Errorf("%v: %v\n%s", args, err, stderr)
			continue
		}
		for name, s := range map[string]string{"stdout": out, "stderr": stderr} {
			if s != "" && !strings.HasSuffix(s, "\n") {
				t.Errorf("%v: %s does not end with a newline: %q", args, name, s[max(0, len(s)-40):])
			}
		}
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// restoreObjects writes a VolumeSnapshot "snap" of driver, ready, bound to
// its content, whose handle is pav-node2/content-uid and whose source volume
// had mode sourceMode; and a claim of class class (mode mode) restored from
// it. It returns the claim's file and the objects' file.
func restoreObjects(t *testing.T, driver, class, mode, sourceMode string) (pvc, objects string) {
	t.Helper()
	dir := t.TempDir()
	pvc, objects = filepath.Join(dir, "pvc.yaml"), filepath.Join(dir, "snapshot.yaml")
	write := func(path, s string) {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(pvc, `apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: restored}
spec:
  storageClassName: `+class+`
  volumeMode: `+mode+`
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 64Mi}}
  dataSource: {apiGroup: snapshot.storage.k8s.io, kind: VolumeSnapshot, name: snap}
`)
	write(objects, `apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshot
metadata: {name: snap, namespace: default, uid: snap-uid}
spec: {source: {persistentVolumeClaimName: original}}
status: {boundVolumeSnapshotContentName: snapcontent-x, readyToUse: true}
---
apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshotContent
metadata: {name: snapcontent-x, uid: content-uid}
spec:
  driver: `+driver+`
  deletionPolicy: Delete
  source: {volumeHandle: pvc-1}
  sourceVolumeMode: `+sourceMode+`
  volumeSnapshotRef: {namespace: default, name: snap, uid: snap-uid}
status: {snapshotHandle: pav-node2/content-uid, readyToUse: true, restoreSize: 1048576}
`)
	return pvc, objects
}

// The creation pod of a claim restored from a VolumeSnapshot of --objects
// gets the snapshot's handle, as the controller's would; without the
// snapshot, or across volume modes, render says what the controller would.
func TestRenderRestore(t *testing.T) {
	for _, tc := range []struct{ example, mode string }{{"host-directory", "Filesystem"}, {"loop-block", "Block"}} {
		t.Run(tc.example, func(t *testing.T) {
			prov := "../examples/" + tc.example + "/provisioner.yaml"
			pvc, objects := restoreObjects(t, tc.example, tc.example, tc.mode, tc.mode)
			opts := func(objs ...string) *renderOptions {
				return &renderOptions{file: prov, phase: string(protocol.PhaseCreation), kubeletDir: protocol.DefaultKubeletDir,
					pvc: pvc, objects: append([]string{"../examples/" + tc.example + "/usage.yaml"}, objs...), selectedNode: "pav-node2", pods: true}
			}
			var out, errOut bytes.Buffer
			if err := runRender(context.Background(), &out, &errOut, opts(objects)); err != nil {
				t.Fatal(err)
			}
			pod := &corev1.Pod{}
			if err := yaml.UnmarshalStrict(out.Bytes(), pod); err != nil {
				t.Fatalf("not a pod: %v\n%s", err, out.String())
			}
			if script := strings.Join(pod.Spec.Containers[0].Command, " "); !strings.Contains(script, "# A restore") || !strings.Contains(script, "src=/snapshots/content-uid") {
				t.Errorf("the creation pod does not restore the snapshot's handle:\n%s", script)
			}

			out.Reset()
			err := runRender(context.Background(), &out, &errOut, opts())
			if err == nil || !strings.Contains(err.Error(), `the VolumeSnapshot "snap" to restore: no VolumeSnapshot default/snap in --objects`) {
				t.Errorf("without the snapshot: %v", err)
			}

			other := map[string]string{"Filesystem": "Block", "Block": "Filesystem"}[tc.mode]
			_, crossed := restoreObjects(t, tc.example, tc.example, tc.mode, other)
			err = runRender(context.Background(), &out, &errOut, opts(crossed))
			if err == nil || !strings.Contains(err.Error(), "volumeMode "+other) || !strings.Contains(err.Error(), "allow-volume-mode-change") {
				t.Errorf("across volume modes: %v", err)
			}
		})
	}
}

// What the controller would refuse of a creation is a warning, by the
// controller's own rule (protocol.ClaimVolume).
func TestRenderWarnsOfACapacityTheControllerRefuses(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "small.yaml")
	doc := "apiVersion: pav.albertofaria.github.io/v1alpha1\nkind: PavProvisioner\nmetadata: {name: small}\nspec:\n  provisioningModes: [Dynamic]\n" +
		"  volumeCreation:\n    capacity: \"{{ params.size | default('512Mi') }}\"\n  volumeStaging:\n    podTemplate:\n      spec:\n        containers: [{name: s, image: busybox}]\n"
	if err := os.WriteFile(f, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := run(t, newRenderCmd, "-f", f, "--phase", "creation", "--pvc", "testdata/pvc.yaml")
	if err != nil || !strings.Contains(out, "capacity: 512Mi") {
		t.Fatalf("render: %v\n%s", err, out)
	}
	if want := "warning: PaV would refuse the volume this creation makes: the volume's capacity 512Mi is less than the 1Gi the claim requests"; !strings.Contains(stderr, want) {
		t.Errorf("stderr %q, want %q", stderr, want)
	}
	// Within the request and the limit (2Gi): no warning.
	sc := filepath.Join(dir, "sc.yaml")
	if err := os.WriteFile(sc, []byte("apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: echo-class}\nprovisioner: small\nparameters: {size: 2Gi}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := run(t, newRenderCmd, "-f", f, "--phase", "creation", "--pvc", "testdata/pvc.yaml", "--sc", sc); err != nil || stderr != "" {
		t.Errorf("a capacity within bounds: %v, stderr %q", err, stderr)
	}
}

// A WaitForFirstConsumer class rendered without --selected-node: what
// evaluates to none for it comes with a hint.
func TestRenderHintsAtSelectedNode(t *testing.T) {
	sc := filepath.Join(t.TempDir(), "sc.yaml")
	if err := os.WriteFile(sc, []byte("apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: echo-class}\nprovisioner: echo\nvolumeBindingMode: WaitForFirstConsumer\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := run(t, newRenderCmd, "-f", "testdata/provisioner.yaml", "--phase", "creation", "--pvc", "testdata/pvc.yaml", "--sc", sc)
	if want := "hint: StorageClass echo-class is WaitForFirstConsumer: selectedNodeName is the node the scheduler picks, none until then: give --selected-node NODE"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want the hint %q", err, want)
	}
	if _, _, err := run(t, newRenderCmd, "-f", "testdata/provisioner.yaml", "--phase", "creation", "--pvc", "testdata/pvc.yaml", "--sc", sc, "--selected-node", "n1"); err != nil {
		t.Errorf("with --selected-node: %v", err)
	}
}

// A provisioner with topology keys gets the controller's requisite and
// preferred topology in its validation and creation contexts: from the
// Nodes of --objects, the selected node's segment first.
func TestRenderTopology(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "zoned.yaml")
	doc := "apiVersion: pav.albertofaria.github.io/v1alpha1\nkind: PavProvisioner\nmetadata: {name: zoned}\nspec:\n  provisioningModes: [Dynamic]\n" +
		"  topologyKeys: [topology.kubernetes.io/zone]\n" +
		"  volumeCreation:\n    handle: \"{% for s in preferredTopology %}{{ s['topology.kubernetes.io/zone'] }}.{% endfor %}{{ requisiteTopology | length }}\"\n    capacity: 1Gi\n" +
		"  volumeStaging:\n    podTemplate:\n      spec:\n        containers: [{name: s, image: busybox}]\n"
	objects := filepath.Join(dir, "objects.yaml")
	nodes := ""
	for i, zone := range []string{"a", "b", "b"} {
		nodes += fmt.Sprintf("---\napiVersion: v1\nkind: Node\nmetadata: {name: n%d, labels: {topology.kubernetes.io/zone: %s}}\n", i, zone)
	}
	for name, content := range map[string]string{f: doc, objects: nodes} {
		if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, _, err := run(t, newRenderCmd, "-f", f, "--phase", "creation", "--pvc", "testdata/pvc.yaml", "--objects", objects, "--selected-node", "n1")
	if err != nil || !strings.Contains(out, "b.a.2") {
		t.Fatalf("render: %v\n%s", err, out)
	}
	_, _, err = run(t, newRenderCmd, "-f", f, "--phase", "creation", "--pvc", "testdata/pvc.yaml")
	if want := "no node has all the labels"; err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "give --objects the cluster's Nodes") {
		t.Errorf("without Nodes: %v, want %q and a hint", err, want)
	}
}

// A provisioner with topology keys and an Immediate class, without
// --selected-node: render says which node the controller would choose, and
// renders for it (a Node without a Ready condition counts as Ready).
func TestRenderChoosesTheNodeOfAnImmediateClaim(t *testing.T) {
	objects := filepath.Join(t.TempDir(), "nodes.yaml")
	nodes := "apiVersion: v1\nkind: Node\nmetadata: {name: n1, labels: {kubernetes.io/hostname: n1}}\nstatus: {conditions: [{type: Ready, status: \"False\"}]}\n" +
		"---\napiVersion: v1\nkind: Node\nmetadata: {name: n2, labels: {kubernetes.io/hostname: n2}}\n"
	if err := os.WriteFile(objects, []byte(nodes), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := run(t, newRenderCmd, "-f", "../examples/host-directory/provisioner.yaml", "--phase", "creation", "--pvc", "testdata/pvc.yaml", "--objects", objects, "--pods")
	if err != nil {
		t.Fatalf("render: %v\n%s", err, stderr)
	}
	if want := "selectedNodeName: n2, the node PaV chooses for a claim of the Immediate StorageClass echo-class"; !strings.Contains(stderr, want) {
		t.Errorf("stderr %q, want %q", stderr, want)
	}
	for _, want := range []string{"nodeName: n2", protocol.AnnotationSelectedNode + ": n2"} {
		if !strings.Contains(out, want) {
			t.Errorf("creation pod lacks %q:\n%s", want, out)
		}
	}
	_, _, err = run(t, newRenderCmd, "-f", "../examples/host-directory/provisioner.yaml", "--phase", "creation", "--pvc", "testdata/pvc.yaml", "--objects", "testdata/unlabelled-node.yaml")
	if want := "no node has all the labels"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("without a labelled node: %v, want %q", err, want)
	}
}

// host-directory's volumeModification, rendered for the suite's class
// (testdriver-vac.yaml), for one with a parameter it does not know and for a
// mode that is not permissions, on the volume's node; its script run with
// its paths moved under a temporary directory: it changes the directory's
// permissions, or says the class is infeasible.
func TestRenderHostDirectoryModification(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	dir := t.TempDir()
	write := func(name, content string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	classes := write("classes.yaml", "apiVersion: storage.k8s.io/v1\nkind: VolumeAttributesClass\nmetadata: {name: unknown}\ndriverName: host-directory\nparameters: {xxInvalidParameterKey: v}\n"+
		"---\napiVersion: storage.k8s.io/v1\nkind: VolumeAttributesClass\nmetadata: {name: words}\ndriverName: host-directory\nparameters: {mode: rwx}\n")
	for _, tc := range []struct {
		class, infeasible string
		mode              os.FileMode
	}{
		{class: "host-directory", mode: 0o775},
		{class: "unknown", infeasible: `parameter xxInvalidParameterKey is not one of host-directory's (mode)`, mode: 0o700},
		{class: "words", infeasible: "mode must be octal permissions like 0775, not 'rwx'", mode: 0o700},
	} {
		t.Run(tc.class, func(t *testing.T) {
			pvc := write("pvc.yaml", "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: c, namespace: ns}\n"+
				"spec: {storageClassName: host-directory, volumeAttributesClassName: "+tc.class+", accessModes: [ReadWriteOncePod], resources: {requests: {storage: 1Gi}}}\n")
			out, stderr, err := run(t, newRenderCmd, "-f", "../examples/host-directory/provisioner.yaml", "--phase", "modification", "--pvc", pvc,
				"--objects", classes, "--objects", "../examples/host-directory/testdriver-vac.yaml", "--selected-node", "n1", "-o", "json")
			if err != nil {
				t.Fatalf("render: %v\n%s", err, stderr)
			}
			var section struct {
				PodTemplate corev1.PodTemplateSpec `json:"podTemplate"`
			}
			if err := json.Unmarshal([]byte(out), &section); err != nil {
				t.Fatalf("%v:\n%s", err, out)
			}
			spec := section.PodTemplate.Spec
			if spec.NodeName != "n1" || len(spec.Containers) != 1 || len(spec.Containers[0].Command) != 3 {
				t.Fatalf("want one container with a script, on node n1:\n%s", out)
			}
			root := t.TempDir()
			for _, d := range []string{"pav", "volume"} {
				if err := os.Mkdir(filepath.Join(root, d), 0o700); err != nil {
					t.Fatal(err)
				}
			}
			script := strings.NewReplacer("/pav/", root+"/pav/", "/volume", root+"/volume").Replace(spec.Containers[0].Command[2])
			runErr := exec.Command("sh", "-c", script).Run()
			infeasible, _ := os.ReadFile(filepath.Join(root, "pav", "infeasible"))
			switch {
			case tc.infeasible == "" && (runErr != nil || len(infeasible) > 0):
				t.Errorf("script: %v, /pav/infeasible %q; want success", runErr, infeasible)
			case tc.infeasible != "" && (runErr == nil || !strings.Contains(string(infeasible), tc.infeasible)):
				t.Errorf("script: %v, /pav/infeasible %q; want a failure saying %q", runErr, infeasible, tc.infeasible)
			}
			if fi, err := os.Stat(filepath.Join(root, "volume")); err != nil || fi.Mode().Perm() != tc.mode {
				t.Errorf("volume directory: %v, %v; want mode %v", fi.Mode(), err, tc.mode)
			}
		})
	}
}
