//go:build e2e || e2e_slow

// Package examples runs every example under examples/ end to end on a cluster
// where PaV is installed (make deploy), the way its README tells a user to:
// kubectl create the PavProvisioner and the usage manifest, wait for the client
// pod, check what it saw, delete everything and check nothing is left behind.
//
// Run with: flock /tmp/pav-e2e.lock go test -tags e2e ./test/e2e/examples/
package examples

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/test/e2e/framework"
)

// clientTimeout bounds how long a client pod of an example may take.
const clientTimeout = 3 * time.Minute

// repoRoot is the repository's root directory (test binaries run in their package directory).
var repoRoot = func() string {
	root, err := framework.RepoRoot()
	if err != nil {
		panic(err)
	}
	return root
}()

func example(parts ...string) string {
	return filepath.Join(append([]string{repoRoot, "examples"}, parts...)...)
}

// k runs kubectl and fails the test on error.
func k(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := framework.Kubectl(ctx, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// kq runs kubectl and returns its output, ignoring errors (for probes and diagnostics).
func kq(args ...string) string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, _ := framework.Kubectl(ctx, args...)
	return out
}

// installProvisioner creates a PavProvisioner from file and removes it when the
// test ends (after everything registered later, e.g. the namespace, is gone).
func installProvisioner(t *testing.T, file, name string) {
	t.Helper()
	if lane := os.Getenv("PAV_E2E_EXAMPLES"); lane != "" && !slices.Contains(strings.Fields(lane), name) {
		t.Fatalf("this process runs the tests of the examples %q beside another process (hack/cluster/e2e.sh's lanes), "+
			"but this test installs PavProvisioner %s: move the test to that example's lane", lane, name)
	}
	k(t, "apply", "-f", file)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if _, err := framework.Kubectl(ctx, "delete", "pavprovisioner", name, "--ignore-not-found", "--wait=true", "--timeout=150s"); err != nil {
			t.Errorf("deleting PavProvisioner %s: %v", name, err)
		}
	})
	// The controller reports Ready once the provisioner is valid and registered.
	framework.Eventually(t, 60*time.Second, "PavProvisioner "+name+" to be Ready", func() (bool, string) {
		s := kq("get", "pavprovisioner", name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return s == "True", "Ready=" + s
	})
}

// newNamespace creates the test's namespace (framework.New). At the end it
// dumps what PaV and Kubernetes said if the test failed, deletes the namespace
// and waits for every PV that was bound to one of its claims to be gone, so that
// the PavProvisioner (registered for deletion earlier, hence deleted later) can go.
func newNamespace(t *testing.T) string {
	t.Helper()
	f := framework.New(t)
	t.Cleanup(func() {
		if t.Failed() {
			f.Dump()
			dumpDiagnostics(t, f.Namespace)
		}
		deleteNamespaceAndVolumes(t, f.Namespace)
	})
	return f.Namespace
}

// namespaceNamed creates a namespace with a fixed name (an example's server
// namespace, named in its StorageClass, where PaV runs its pods, as the
// example's README says), deleted when the test ends.
func namespaceNamed(t *testing.T, ns string) string {
	t.Helper()
	kq("delete", "namespace", ns, "--ignore-not-found", "--wait=true", "--timeout=120s") // a leftover of an aborted run
	k(t, "create", "namespace", ns)
	k(t, "label", "namespace", ns, protocol.LabelAllowPods+"=true")
	framework.Eventually(t, time.Minute, "the default ServiceAccount of "+ns, func() (bool, string) {
		return kq("-n", ns, "get", "serviceaccount", "default", "-o", "name") != "", ""
	})
	t.Cleanup(func() {
		if t.Failed() {
			dumpDiagnostics(t, ns)
		}
		deleteNamespaceAndVolumes(t, ns)
	})
	return ns
}

func deleteNamespaceAndVolumes(t *testing.T, ns string) {
	pvs := strings.Fields(kq("-n", ns, "get", "pvc", "-o", "jsonpath={.items[*].spec.volumeName}"))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := framework.Kubectl(ctx, "delete", "namespace", ns, "--ignore-not-found", "--wait=true", "--timeout=150s"); err != nil {
		t.Errorf("deleting namespace %s: %v", ns, err)
	}
	for _, pv := range pvs {
		waitGone(t, 2*time.Minute, "pv", pv, "")
	}
}

// deleteAtEnd deletes the cluster-scoped objects of a manifest
// (StorageClasses) when the test ends.
func deleteAtEnd(t *testing.T, kind string, names ...string) {
	t.Cleanup(func() {
		for _, n := range names {
			kq("delete", kind, n, "--ignore-not-found")
		}
	})
}

func waitGone(t *testing.T, timeout time.Duration, kind, name, ns string) {
	t.Helper()
	args := []string{"get", kind, name, "--ignore-not-found", "-o", "name"}
	if ns != "" {
		args = append([]string{"-n", ns}, args...)
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if strings.TrimSpace(kq(args...)) == "" {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Errorf("%s %s still exists after %v", kind, name, timeout)
}

// waitPodDone waits for a run-to-completion pod to succeed and returns its log.
func waitPodDone(t *testing.T, ns, pod string, timeout time.Duration) string {
	t.Helper()
	framework.Eventually(t, timeout, "pod "+ns+"/"+pod+" to succeed", func() (bool, string) {
		phase := kq("-n", ns, "get", "pod", pod, "-o", "jsonpath={.status.phase}")
		if phase == "Failed" {
			t.Fatalf("pod %s/%s failed:\n%s", ns, pod, kq("-n", ns, "logs", pod))
		}
		return phase == "Succeeded", "phase=" + phase
	})
	return k(t, "-n", ns, "logs", pod)
}

// pvOf returns the PersistentVolume bound to a claim, decoded.
func pvOf(t *testing.T, ns, claim string) map[string]interface{} {
	t.Helper()
	name := strings.TrimSpace(k(t, "-n", ns, "get", "pvc", claim, "-o", "jsonpath={.spec.volumeName}"))
	if name == "" {
		t.Fatalf("claim %s/%s is not bound", ns, claim)
	}
	var pv map[string]interface{}
	if err := json.Unmarshal([]byte(k(t, "get", "pv", name, "-o", "json")), &pv); err != nil {
		t.Fatal(err)
	}
	return pv
}

// field walks a decoded object, e.g. field(pv, "spec", "csi", "volumeHandle").
func field(obj interface{}, path ...string) interface{} {
	for _, p := range path {
		m, ok := obj.(map[string]interface{})
		if !ok {
			return nil
		}
		obj = m[p]
	}
	return obj
}

// dumpDiagnostics logs what a user would look at when a volume fails: the
// claims, pods and events of the namespace, PaV's own pods and their logs, and
// the logs of PaV's controller and node agents.
func dumpDiagnostics(t *testing.T, ns string) {
	t.Logf("---- diagnostics for namespace %s ----", ns)
	t.Logf("claims:\n%s", kq("-n", ns, "describe", "pvc"))
	t.Logf("pods:\n%s", kq("-n", ns, "describe", "pods"))
	t.Logf("events:\n%s", kq("-n", ns, "get", "events", "--sort-by=.lastTimestamp"))
	t.Logf("PaV's pods:\n%s", kq("get", "pods", "-A", "-l", "pav.albertofaria.github.io/phase", "-o", "wide", "--show-labels"))
	for _, line := range strings.Split(strings.TrimSpace(kq("get", "pods", "-A", "-l", "pav.albertofaria.github.io/phase", "-o", `jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name}{"\n"}{end}`)), "\n") {
		if nsName := strings.SplitN(line, "/", 2); len(nsName) == 2 {
			t.Logf("log of %s:\n%s", line, kq("-n", nsName[0], "logs", nsName[1], "--all-containers"))
		}
	}
	t.Logf("controller-agent log (tail):\n%s", kq("-n", "pav", "logs", "deployment/controller-agent", "--tail=60"))
	t.Logf("node-agent log (tail):\n%s", kq("-n", "pav", "logs", "daemonset/node-agent", "--tail=60"))
}

// noPavPodsLeft checks that PaV removed all the pods it made for a provisioner.
func noPavPodsLeft(t *testing.T, provisioner string) {
	t.Helper()
	framework.Eventually(t, 60*time.Second, "PaV's pods of "+provisioner+" to be removed", func() (bool, string) {
		// Capacity pods measure free space on a period, whatever the volumes.
		out := strings.TrimSpace(kq("get", "pods", "-A", "-l", "pav.albertofaria.github.io/provisioner="+provisioner+",pav.albertofaria.github.io/phase!=capacity", "-o", "name"))
		return out == "", out
	})
}

func mustContain(t *testing.T, got, want string) {
	t.Helper()
	if !strings.Contains(got, want) {
		t.Fatalf("output %q does not contain %q", got, want)
	}
}

// onNode runs a command in a node's namespaces (hack/cluster/node-exec).
func onNode(t *testing.T, node string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(repoRoot, "hack/cluster/node-exec"), append([]string{node}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("node-exec %s %v: %w: %s", node, args, err, out)
	}
	return string(out), nil
}

// podNode returns the node a pod of ns was scheduled to.
func podNode(t *testing.T, ns, pod string) string {
	t.Helper()
	node := strings.TrimSpace(k(t, "-n", ns, "get", "pod", pod, "-o", "jsonpath={.spec.nodeName}"))
	if node == "" {
		t.Fatalf("pod %s/%s has no node", ns, pod)
	}
	return node
}

// readOnNode returns the content of a file as node sees it.
func readOnNode(t *testing.T, node, path string) (string, error) {
	t.Helper()
	return onNode(t, node, "cat", path)
}

// existsOnNode reports whether path exists on node (failing the test if the
// node cannot be asked).
func existsOnNode(t *testing.T, node, path string) bool {
	t.Helper()
	out, err := onNode(t, node, "sh", "-c", `if [ -e "$1" ]; then echo yes; else echo no; fi`, "sh", path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out) == "yes"
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func applyStdin(t *testing.T, ns, manifest string) {
	t.Helper()
	ctx := t.Context()
	if _, err := framework.KubectlManifest(ctx, manifest, "-n", ns, "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
}

// onlyDoc returns the documents of a multi-document manifest that contain marker.
func onlyDoc(t *testing.T, manifest, marker string) string {
	t.Helper()
	var keep []string
	for _, doc := range strings.Split(manifest, "\n---\n") {
		if strings.Contains(doc, marker) {
			keep = append(keep, doc)
		}
	}
	if len(keep) == 0 {
		t.Fatalf("no document with %q", marker)
	}
	return strings.Join(keep, "\n---\n")
}

// waitPodReady waits for a long-running pod (an example's server) to be Ready.
func waitPodReady(t *testing.T, ns, pod string) {
	t.Helper()
	framework.Eventually(t, 2*time.Minute, "pod "+ns+"/"+pod+" to be Ready", func() (bool, string) {
		s := kq("-n", ns, "get", "pod", pod, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return s == "True", "Ready=" + s
	})
}

func randomSecret(t *testing.T) string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// threeNodes returns the nodes of a cluster of at least three, or skips the
// test on a smaller one unless PAV_E2E_MULTINODE=1 (make test) requires them.
func threeNodes(t *testing.T) clusterNodes {
	t.Helper()
	var names []string
	var n clusterNodes
	for _, line := range strings.Split(strings.TrimSpace(kq("get", "nodes", "-o", `jsonpath={range .items[*]}{.metadata.name} {.metadata.labels.pav-cluster\.local/kubelet-root}{"\n"}{end}`)), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && n.altRoot == "":
			n.altRoot = f[0]
		case len(f) >= 1:
			names = append(names, f[0])
		}
	}
	sort.Strings(names)
	if len(names) < 2 || n.altRoot == "" {
		if os.Getenv("PAV_E2E_MULTINODE") == "1" {
			t.Fatalf("PAV_E2E_MULTINODE=1 but the cluster has the nodes %v and the non-default kubelet root node %q (make cluster-up NODES=3)", names, n.altRoot)
		}
		t.Skipf("needs three nodes, one with label %s (make cluster-up NODES=3); the cluster has %v", framework.KubeletRootLabel, names)
	}
	n.first, n.second = names[0], names[1]
	return n
}

// clusterNodes are the local cluster's nodes by role.
type clusterNodes struct {
	first   string // node 1: the control plane's, this machine's mount namespace
	second  string // its own mount namespace, default kubelet root
	altRoot string // its own mount namespace, kubelet root /var/lib/k0s/kubelet
}
