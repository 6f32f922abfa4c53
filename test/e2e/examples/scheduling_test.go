//go:build e2e_slow

package examples

// What the scheduler plans around (topology, storage capacity) on the local
// cluster's three nodes.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	utilrand "k8s.io/apimachinery/pkg/util/rand"

	"github.com/albertofaria/pav/test/e2e/framework"
)

// notEnoughStorage is the scheduler's reason for a node whose
// CSIStorageCapacity cannot hold a WaitForFirstConsumer claim.
const notEnoughStorage = "did not have enough free storage"

// unpinnedClientPod is clientPod without a node and without its toleration
// of node 3's taint: the scheduler picks one of the other nodes.
func unpinnedClientPod(name, claim, script string) string {
	pod := framework.ClientPodManifest(name, claim, "", "Never", script)
	for _, line := range []string{"  nodeSelector: {kubernetes.io/hostname: }\n", "  tolerations: [{key: " + framework.KubeletRootLabel + ", operator: Exists, effect: NoSchedule}]\n"} {
		if !strings.Contains(pod, line) {
			panic("clientPod no longer has the line " + line)
		}
		pod = strings.Replace(pod, line, "", 1)
	}
	return pod
}

func claimManifest(name, class, size string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: %s
spec:
  storageClassName: %s
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: %s}}
`, name, class, size)
}

// capacities returns the bytes of the CSIStorageCapacity objects of a
// StorageClass by the node name of their segment (topology key
// kubernetes.io/hostname).
func capacities(t *testing.T, class string) map[string]int64 {
	t.Helper()
	out := kq("-n", "pav", "get", "csistoragecapacities", "-o",
		`jsonpath={range .items[?(@.storageClassName=="`+class+`")]}{.nodeTopology.matchLabels.kubernetes\.io/hostname} {.capacity}{"\n"}{end}`)
	got := map[string]int64{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		q, err := resource.ParseQuantity(f[1])
		if err != nil {
			t.Fatalf("CSIStorageCapacity of %s for node %s: %v", class, f[0], err)
		}
		got[f[0]] = q.Value()
	}
	return got
}

// waitCapacities waits until the class's CSIStorageCapacity objects are
// exactly want (node to bytes).
func waitCapacities(t *testing.T, class string, want map[string]int64) {
	t.Helper()
	framework.Eventually(t, 2*time.Minute, fmt.Sprintf("the CSIStorageCapacities of %s to be %v", class, want), func() (bool, string) {
		got := capacities(t, class)
		return fmt.Sprint(got) == fmt.Sprint(want), fmt.Sprint(got)
	})
}

// waitUnschedulable waits until a pod is refused by the scheduler with a
// message containing reason, and checks it was bound to no node.
func waitUnschedulable(t *testing.T, ns, pod, reason string) string {
	t.Helper()
	var msg string
	framework.Eventually(t, 2*time.Minute, "the scheduler to refuse pod "+pod+" ("+reason+")", func() (bool, string) {
		msg = kq("-n", ns, "get", "pod", pod, "-o", `jsonpath={.status.conditions[?(@.type=="PodScheduled")].message}`)
		return strings.Contains(msg, reason), msg
	})
	if node := kq("-n", ns, "get", "pod", pod, "-o", "jsonpath={.spec.nodeName}"); node != "" {
		t.Fatalf("pod %s was bound to %s", pod, node)
	}
	return msg
}

// events returns the messages of the Events with reason about an object.
func events(name, reason string) string {
	return kq("get", "events", "-A", "--field-selector", "involvedObject.name="+name+",reason="+reason,
		"-o", `jsonpath={range .items[*]}{.message}{"\n"}{end}`)
}

// TestMultiNodeStorageCapacity: host-directory with capacity tracking and a
// quota per node. A volume that takes the first node's whole quota makes its
// CSIStorageCapacity 0, so WaitForFirstConsumer claims go elsewhere (and the
// second node's object then shows what is left) and a client pinned to the
// full node stays Pending with the scheduler's reason; once that volume is
// deleted the node has room again and the pending client is placed there.
//
// Node 3's kubelet root is another (docs/install.md: "Nodes with another kubelet
// root"): its capacity pod keeps /pav under that root, where its pool's node
// plugin collects it, so its segment is measured too (its NoSchedule taint
// keeps the unpinned clients off it).
func TestMultiNodeStorageCapacity(t *testing.T) {
	nodes := threeNodes(t)
	const (
		class = "host-directory-quota"
		path  = "/var/lib/pav-examples/host-directory-quota"
		quota = 64 << 20
		small = 16 << 20
	)
	all := []string{nodes.first, nodes.second, nodes.altRoot}
	clean := func() {
		for _, n := range all {
			if out, err := onNode(t, n, "rm", "-rf", path); err != nil {
				t.Errorf("removing %s on %s: %v %s", path, n, err, out)
			}
		}
	}
	clean() // what an aborted run left would count against the quota
	installProvisioner(t, example("host-directory", "provisioner.yaml"), "host-directory")
	t.Cleanup(clean)
	ns := classAndNamespace(t, class, "host-directory", fmt.Sprintf("parameters:\n  path: %s\n  quota: \"%d\"\n", path, quota))
	if got := kq("get", "csidriver", "host-directory", "-o", "jsonpath={.spec.storageCapacity}"); got != "true" {
		t.Fatalf("CSIDriver host-directory has storageCapacity %q", got)
	}
	waitCapacities(t, class, map[string]int64{nodes.first: quota, nodes.second: quota, nodes.altRoot: quota})

	// Fill the first node.
	applyStdin(t, ns, claimManifest("filler", class, fmt.Sprint(quota)))
	applyStdin(t, ns, framework.ClientPodManifest("filler", "filler", nodes.first, "Never", "true"))
	waitPodDone(t, ns, "filler", clientTimeout)
	fillerPV := field(pvOf(t, ns, "filler"), "metadata", "name").(string)
	waitCapacities(t, class, map[string]int64{nodes.first: 0, nodes.second: quota, nodes.altRoot: quota})

	// Claims of clients the scheduler places: never on the full node (nor on
	// node 3, tainted). Four fit on the second.
	used := map[string]int64{}
	for i := range 4 {
		name := fmt.Sprintf("c%d", i)
		applyStdin(t, ns, claimManifest(name, class, fmt.Sprint(small))+"---\n"+unpinnedClientPod(name, name, "echo on $(hostname) > /data/hello"))
	}
	for i := range 4 {
		name := fmt.Sprintf("c%d", i)
		waitPodDone(t, ns, name, clientTimeout)
		node := podNode(t, ns, name)
		if node != nodes.second {
			t.Errorf("client %s was placed on %s, not on %s, the only node with room", name, node, nodes.second)
		}
		used[node] += small
	}
	t.Logf("placed: %v", used)
	waitCapacities(t, class, map[string]int64{nodes.first: 0, nodes.second: quota - used[nodes.second], nodes.altRoot: quota})

	// A client pinned to the full node waits, with the scheduler's reason.
	applyStdin(t, ns, claimManifest("again", class, fmt.Sprint(small))+"---\n"+framework.ClientPodManifest("again", "again", nodes.first, "Never", "echo again > /data/hello"))
	t.Logf("pod again: %s", waitUnschedulable(t, ns, "again", notEnoughStorage))
	if v := kq("-n", ns, "get", "pvc", "again", "-o", "jsonpath={.spec.volumeName}"); v != "" {
		t.Fatalf("claim again got volume %s while the node was full", v)
	}

	// Deleting the filler frees the node: the waiting client is placed there.
	k(t, "-n", ns, "delete", "pod", "filler", "--wait=true")
	k(t, "-n", ns, "delete", "pvc", "filler", "--wait=true")
	waitGone(t, 2*time.Minute, "pv", fillerPV, "")
	waitPodDone(t, ns, "again", clientTimeout)
	if n := podNode(t, ns, "again"); n != nodes.first {
		t.Fatalf("pod again ran on %s, not %s", n, nodes.first)
	}
	waitCapacities(t, class, map[string]int64{nodes.first: quota - small, nodes.second: quota - used[nodes.second], nodes.altRoot: quota})

	k(t, "-n", ns, "delete", "pod", "--all", "--wait=true")
	k(t, "-n", ns, "delete", "pvc", "--all", "--wait=true")
	waitCapacities(t, class, map[string]int64{nodes.first: quota, nodes.second: quota, nodes.altRoot: quota})
	noPavPodsLeft(t, "host-directory")
}

// emptyStaging is a staging section whose volumes are empty directories.
const emptyStaging = `  volumeStaging:
    podTemplate:
      spec:
        restartPolicy: Never
        containers:
          - name: stage
            image: pav-test:latest
            imagePullPolicy: IfNotPresent
            command: [/bin/sh, -c, "mkdir /pav/volume"]
`

// classAndNamespace creates the test's namespace and a WaitForFirstConsumer
// StorageClass of the provisioner (wffcClass).
func classAndNamespace(t *testing.T, class, provisioner, extra string) string {
	t.Helper()
	ns := newNamespace(t)
	wffcClass(t, ns, class, provisioner, extra)
	return ns
}

// wffcClass creates a WaitForFirstConsumer StorageClass of the provisioner
// (extra: more fields, e.g. parameters), deleted at the end.
func wffcClass(t *testing.T, ns, class, provisioner, extra string) {
	t.Helper()
	deleteAtEnd(t, "storageclass", class)
	applyStdin(t, ns, fmt.Sprintf(`apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: %s
provisioner: %s
volumeBindingMode: WaitForFirstConsumer
reclaimPolicy: Delete
%s`, class, provisioner, extra))
}

// installInline creates the PavProvisioner name with the given spec
// (installProvisioner).
func installInline(t *testing.T, name, spec string) {
	t.Helper()
	manifest := "apiVersion: pav.albertofaria.github.io/v1alpha1\nkind: PavProvisioner\nmetadata:\n  name: " + name + "\nspec:\n" + spec
	file := filepath.Join(t.TempDir(), name+".yaml")
	if err := os.WriteFile(file, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	installProvisioner(t, file, name)
}

// TestMultiNodeCapacityPodFaults: a capacity pod that writes garbage (class
// A on the first node) or never ends (class B on the second) is a
// CapacityUnknown Event naming the class, the segment and the problem, and
// leaves that class without a CSIStorageCapacity there, so no
// WaitForFirstConsumer claim of the class is placed there: a client pinned
// to such a node stays Pending with the scheduler's reason, and an unpinned
// one goes to the node measured (node 3, measured too, is tainted).
func TestMultiNodeCapacityPodFaults(t *testing.T) {
	nodes := threeNodes(t)
	name := "capacity-faults-" + utilrand.String(5)
	installInline(t, name, `  provisioningModes: [Dynamic]
  topologyKeys: [kubernetes.io/hostname]
  storageCapacity:
    refreshPeriod: 20s
    podTemplate:
      spec:
        restartPolicy: Never
        terminationGracePeriodSeconds: 0
        containers:
          - name: measure
            image: pav-test:latest
            imagePullPolicy: IfNotPresent
            command:
              - /bin/sh
              - -c
              - |
                # the class's parameter named after the node says how to fail
                case {{ params[nodeName] | default('') | tobash }} in
                  garbage) echo 'plenty of room' > /pav/capacity ;;
                  hang) exec sleep 3600 ;;
                  *) echo 1Gi > /pav/capacity ;;
                esac
  volumeCreation:
    capacity: "{{ requestedMinCapacity }}"
`+emptyStaging)
	classA, classB := name+"-a", name+"-b"
	ns := classAndNamespace(t, classA, name, fmt.Sprintf("parameters: {%s: garbage}\n", nodes.first))
	wffcClass(t, ns, classB, name, fmt.Sprintf("parameters: {%s: hang}\n", nodes.second))

	framework.Eventually(t, 3*time.Minute, "CapacityUnknown Events for both faults", func() (bool, string) {
		msgs := events(name, "CapacityUnknown")
		garbage := strings.Contains(msgs, fmt.Sprintf("StorageClass %q in topology segment kubernetes.io/hostname=%s unknown", classA, nodes.first)) &&
			strings.Contains(msgs, `wrote "plenty of room" to /pav/capacity, which is not a quantity`)
		stuck := strings.Contains(msgs, fmt.Sprintf("StorageClass %q in topology segment kubernetes.io/hostname=%s unknown", classB, nodes.second)) &&
			strings.Contains(msgs, "did not finish within the refresh period (20s)")
		return garbage && stuck, msgs
	})
	waitCapacities(t, classA, map[string]int64{nodes.second: 1 << 30, nodes.altRoot: 1 << 30})
	waitCapacities(t, classB, map[string]int64{nodes.first: 1 << 30, nodes.altRoot: 1 << 30})

	applyStdin(t, ns, claimManifest("pinned", classA, "1Mi")+"---\n"+framework.ClientPodManifest("pinned", "pinned", nodes.first, "Never", "true"))
	applyStdin(t, ns, claimManifest("free", classA, "1Mi")+"---\n"+unpinnedClientPod("free", "free", "true"))
	waitPodDone(t, ns, "free", clientTimeout)
	if n := podNode(t, ns, "free"); n != nodes.second {
		t.Errorf("pod free ran on %s, not on %s, the only node measured for its class", n, nodes.second)
	}
	t.Logf("pod pinned: %s", waitUnschedulable(t, ns, "pinned", notEnoughStorage))
	if v := kq("-n", ns, "get", "pvc", "pinned", "-o", "jsonpath={.spec.volumeName}"); v != "" {
		t.Fatalf("claim pinned got volume %s on a node whose capacity is unknown", v)
	}
	if got := capacities(t, classA); len(got) != 2 {
		t.Errorf("CSIStorageCapacities of %s: %v, want only %s's and %s's", classA, got, nodes.second, nodes.altRoot)
	}
}

// TestMultiNodeTopology: a provisioner with a topology key and no templated
// node affinity. Its volumes get node affinity for the segment of the node
// the scheduler chose, the creation context's preferred topology starts
// there, and requisite topology lists the labelled nodes' segments. A node
// without the label gets a MissingTopologyLabel Event from its node plugin;
// a claim whose client is pinned there gets a ProvisioningFailed Event and no
// volume, until the node is labelled.
func TestMultiNodeTopology(t *testing.T) {
	nodes := threeNodes(t)
	const key = "pav-e2e.local/zone"
	label := func(node, value string) {
		if value == "" {
			k(t, "label", "node", node, key+"-")
		} else {
			k(t, "label", "node", node, "--overwrite", key+"="+value)
		}
	}
	// The labels must be there when the driver registers (NodeGetInfo).
	label(nodes.first, "a")
	label(nodes.second, "b")
	label(nodes.altRoot, "")
	t.Cleanup(func() {
		for _, n := range []string{nodes.first, nodes.second, nodes.altRoot} {
			kq("label", "node", n, key+"-")
		}
	})
	name := "zones-" + utilrand.String(5)
	installInline(t, name, fmt.Sprintf(`  provisioningModes: [Dynamic]
  topologyKeys: [%s]
  volumeCreation:
    capacity: "{{ requestedMinCapacity }}"
    # the creation context's topology, for the test to read on the PV
    handle: "{{ preferredTopology[0]['%s'] }}-of-{{ requisiteTopology | length }}-{{ defaultHandle }}"
`+emptyStaging, key, key))
	ns := classAndNamespace(t, name, name, "")

	framework.Eventually(t, 2*time.Minute, "a MissingTopologyLabel Event on node "+nodes.altRoot, func() (bool, string) {
		msgs := events(nodes.altRoot, "MissingTopologyLabel")
		return strings.Contains(msgs, fmt.Sprintf("PavProvisioner %q", name)), msgs
	})
	// Each node's kubelet registers the driver on its own time.
	framework.Eventually(t, 2*time.Minute, "CSINode "+nodes.second+" lists "+name+" with topology key "+key, func() (bool, string) {
		keys := kq("get", "csinode", nodes.second, "-o", `jsonpath={.spec.drivers[?(@.name=="`+name+`")].topologyKeys}`)
		return keys == `["`+key+`"]`, "topology keys: " + keys
	})

	applyStdin(t, ns, claimManifest("zoned", name, "1Mi")+"---\n"+framework.ClientPodManifest("zoned", "zoned", nodes.second, "Never", "true"))
	waitPodDone(t, ns, "zoned", clientTimeout)
	pv := pvOf(t, ns, "zoned")
	if h := field(pv, "spec", "csi", "volumeHandle").(string); !strings.HasPrefix(h, "b-of-2-") {
		t.Errorf("handle %s: the creation context's preferred segment is not b first, or requisite is not the two labelled nodes'", h)
	}
	if aff := kq("get", "pv", field(pv, "metadata", "name").(string), "-o", "jsonpath={.spec.nodeAffinity.required.nodeSelectorTerms}"); aff != `[{"matchExpressions":[{"key":"`+key+`","operator":"In","values":["b"]}]}]` {
		t.Errorf("PV node affinity %s, want %s In [b]", aff, key)
	}

	// A client pinned to the node without the label: no volume, an Event
	// on the claim saying why.
	applyStdin(t, ns, claimManifest("unlabelled", name, "1Mi")+"---\n"+framework.ClientPodManifest("unlabelled", "unlabelled", nodes.altRoot, "Never", "true"))
	framework.Eventually(t, 2*time.Minute, "a ProvisioningFailed Event on claim unlabelled", func() (bool, string) {
		msgs := events("unlabelled", "ProvisioningFailed")
		return strings.Contains(msgs, fmt.Sprintf("node %s has no label %q", nodes.altRoot, key)), msgs
	})
	if v := kq("-n", ns, "get", "pvc", "unlabelled", "-o", "jsonpath={.spec.volumeName}"); v != "" {
		t.Fatalf("claim unlabelled got volume %s", v)
	}
	if phase := kq("-n", ns, "get", "pod", "unlabelled", "-o", "jsonpath={.status.phase}"); phase != "Pending" {
		t.Fatalf("pod unlabelled is %s", phase)
	}

	// Labelled, the node is a segment of its own: the claim is provisioned there.
	label(nodes.altRoot, "c")
	waitPodDone(t, ns, "unlabelled", clientTimeout)
	if h := field(pvOf(t, ns, "unlabelled"), "spec", "csi", "volumeHandle").(string); !strings.HasPrefix(h, "c-of-3-") {
		t.Errorf("handle %s after labelling the node", h)
	}
	k(t, "-n", ns, "delete", "pod", "--all", "--wait=true")
	k(t, "-n", ns, "delete", "pvc", "--all", "--wait=true")
	noPavPodsLeft(t, name)
}
