//go:build e2e

package examples

import (
	"fmt"
	"strings"
	"testing"
	"time"

	utilrand "k8s.io/apimachinery/pkg/util/rand"

	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/test/e2e/framework"
)

// TestHostDirectoryImmediateBinding: host-directory, topology-aware, with
// Immediate binding (the storage conformance suite's topology test): PaV
// chooses the node, before any pod, from the class's allowedTopologies, and
// the claim's pod, pinned nowhere, follows the PV there; without
// allowedTopologies the node is not the one whose taint keeps pods away.
func TestHostDirectoryImmediateBinding(t *testing.T) {
	nodes := threeNodes(t)
	sw := framework.NewStopwatch(t)
	installProvisioner(t, example("host-directory", "provisioner.yaml"), "host-directory")
	ns := newNamespace(t)
	allowed, anywhere := "hd-immediate-"+utilrand.String(5), "hd-immediate-any-"+utilrand.String(5)
	deleteAtEnd(t, "storageclass", allowed, anywhere)
	applyStdin(t, ns, fmt.Sprintf(`apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: %s}
provisioner: host-directory
volumeBindingMode: Immediate
allowedTopologies:
  - matchLabelExpressions:
      - {key: kubernetes.io/hostname, values: [%s]}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: %s}
provisioner: host-directory
volumeBindingMode: Immediate
`, allowed, nodes.second, anywhere))
	claim := func(name, class string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: %s}\nspec:\n  storageClassName: %s\n  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 10Mi}}\n", name, class)
	}
	applyStdin(t, ns, claim("pinned", allowed)+"---\n"+claim("free", anywhere))
	for _, c := range []string{"pinned", "free"} {
		framework.Eventually(t, 2*time.Minute, "claim "+c+" bound before any pod uses it", func() (bool, string) {
			phase := kq("-n", ns, "get", "pvc", c, "-o", "jsonpath={.status.phase}")
			return phase == "Bound", "phase " + phase
		})
	}
	sw.Lap("both claims bound without a pod")
	nodeOf := func(c string) string {
		pv := pvOf(t, ns, c)
		n, _ := field(pv, "metadata", "annotations", protocol.AnnotationSelectedNode).(string)
		return n
	}
	if n := nodeOf("pinned"); n != nodes.second {
		t.Fatalf("claim of allowedTopologies [%s]: volume on node %q", nodes.second, n)
	}
	if n := nodeOf("free"); n != nodes.first && n != nodes.second {
		t.Errorf("claim without allowedTopologies: volume on node %q, want an untainted one (%s or %s)", n, nodes.first, nodes.second)
	}
	// A client pinned nowhere (and not tolerating node 3's taint) runs on the volume's node.
	pod := framework.ClientPodManifest("immediate-client", "pinned", "", "Never", `echo "written by $(hostname)" > /data/hello && cat /data/hello`)
	pod = strings.Replace(pod, "  nodeSelector: {kubernetes.io/hostname: }\n", "", 1)
	applyStdin(t, ns, pod)
	mustContain(t, waitPodDone(t, ns, "immediate-client", clientTimeout), "written by")
	if n := podNode(t, ns, "immediate-client"); n != nodes.second {
		t.Errorf("the client ran on %s, not on the volume's node %s", n, nodes.second)
	}
	sw.Lap("client ran on the chosen node")
}
