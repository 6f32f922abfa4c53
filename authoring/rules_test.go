package authoring

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/templating"
)

// The creation record on a rendered creation pod is the controller's: with
// topology keys and no nodeAffinity in the section, it records the
// preferred segment (the selected node's zone) as the PV's node affinity.
func TestRenderRecordsTheCreationAsTheControllerDoes(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "zoned.yaml")
	doc := "apiVersion: pav.albertofaria.github.io/v1alpha1\nkind: PavProvisioner\nmetadata: {name: zoned}\nspec:\n  provisioningModes: [Dynamic]\n" +
		"  topologyKeys: [topology.kubernetes.io/zone]\n" +
		"  volumeCreation:\n    capacity: 1Gi\n    podTemplate:\n      spec:\n        containers: [{name: c, image: busybox}]\n" +
		"  volumeStaging:\n    podTemplate:\n      spec:\n        containers: [{name: s, image: busybox}]\n"
	objects := filepath.Join(dir, "objects.yaml")
	nodes := ""
	for i, zone := range []string{"a", "b"} {
		nodes += fmt.Sprintf("---\napiVersion: v1\nkind: Node\nmetadata: {name: n%d, labels: {topology.kubernetes.io/zone: %s}}\n", i, zone)
	}
	writeFile(t, f, doc)
	writeFile(t, objects, nodes)
	out, stderr, err := run(t, newRenderCmd, "-f", f, "--phase", "creation", "--pvc", "testdata/pvc.yaml", "--objects", objects, "--selected-node", "n1", "--pods", "-o", "json")
	if err != nil {
		t.Fatalf("render: %v\n%s", err, stderr)
	}
	pod := &corev1.Pod{}
	if err := json.Unmarshal([]byte(out), pod); err != nil {
		t.Fatalf("not a pod: %v\n%s", err, out)
	}
	recorded, err := templating.RecordedCreation(pod)
	if err != nil {
		t.Fatal(err)
	}
	if want := (protocol.Segment{"topology.kubernetes.io/zone": "b"}).NodeAffinity(); !equality.Semantic.DeepEqual(recorded.NodeAffinity, want) {
		t.Errorf("recorded nodeAffinity %+v, want the selected node's segment %+v", recorded.NodeAffinity, want)
	}
}

// A claim whose StorageClass names another provisioner is rendered with a
// warning: the controller would not provision it for this one.
func TestRenderWarnsOfAClaimForAnotherProvisioner(t *testing.T) {
	sc := filepath.Join(t.TempDir(), "sc.yaml")
	writeFile(t, sc, "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: echo-class}\nprovisioner: someone-else\n")
	_, stderr, err := run(t, newRenderCmd, "-f", "testdata/provisioner.yaml", "--phase", "validation", "--pvc", "testdata/pvc.yaml", "--sc", sc)
	if err != nil {
		t.Fatal(err)
	}
	if want := `warning: the claim is for provisioner "someone-else"`; !strings.Contains(stderr, want) {
		t.Errorf("stderr %q, want %q", stderr, want)
	}
	_, stderr, err = run(t, newRenderCmd, "-f", "testdata/provisioner.yaml", "--phase", "validation", "--pvc", "testdata/pvc.yaml", "--sc", "testdata/sc.yaml")
	if err != nil || strings.Contains(stderr, "is for provisioner") {
		t.Errorf("the provisioner's own class: %v, stderr %q", err, stderr)
	}
}
