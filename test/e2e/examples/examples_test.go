//go:build e2e

package examples

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/albertofaria/pav/test/e2e/framework"
)

// TestHelloWorld is what make demo shows: the staging pod writes a greeting
// and the client pod reads it.
func TestHelloWorld(t *testing.T) {
	sw := framework.NewStopwatch(t)
	installProvisioner(t, example("hello-world", "provisioner.yaml"), "hello-world")
	sw.Lap("provisioner Ready")
	deleteAtEnd(t, "storageclass", "hello-world")
	ns := newNamespace(t)
	k(t, "-n", ns, "apply", "-f", example("hello-world", "usage.yaml"))
	out := waitPodDone(t, ns, "hello-world-client", clientTimeout)
	sw.Lap("client pod read the volume")
	mustContain(t, out, "Hello world!")
	k(t, "-n", ns, "delete", "pod", "hello-world-client", "--wait=true")
	noPavPodsLeft(t, "hello-world")
	sw.Lap("client gone, volume unstaged")
}

// TestHostDirectory checks the node-local provisioner: the directory exists on
// the node, the PV has node affinity for the selected node, a second pod sees
// the first one's data, and deleting the claim removes the directory.
func TestHostDirectory(t *testing.T) {
	sw := framework.NewStopwatch(t)
	installProvisioner(t, example("host-directory", "provisioner.yaml"), "host-directory")
	deleteAtEnd(t, "storageclass", "host-directory")
	ns := newNamespace(t)
	k(t, "-n", ns, "apply", "-f", example("host-directory", "usage.yaml"))
	out := waitPodDone(t, ns, "host-directory-client", clientTimeout)
	sw.Lap("client pod wrote the volume")
	mustContain(t, out, "written by host-directory-client")

	pv := pvOf(t, ns, "host-directory")
	handle, _ := field(pv, "spec", "csi", "volumeHandle").(string)
	node := podNode(t, ns, "host-directory-client")
	terms, _ := field(pv, "spec", "nodeAffinity", "required", "nodeSelectorTerms").([]interface{})
	if len(terms) != 1 || !strings.Contains(k(t, "get", "pv", field(pv, "metadata", "name").(string), "-o", "jsonpath={.spec.nodeAffinity}"), `"`+node+`"`) {
		t.Fatalf("PV node affinity %v does not name node %s", field(pv, "spec", "nodeAffinity"), node)
	}
	// The directory is on that node (only there, on several nodes).
	dir := filepath.Join("/var/lib/pav-examples/host-directory", handle)
	data, err := readOnNode(t, node, filepath.Join(dir, "hello"))
	if err != nil {
		t.Fatalf("volume directory on node %s: %v", node, err)
	}
	mustContain(t, data, "written by host-directory-client")

	// A second client sees the data (and is scheduled to the same node by the PV's affinity).
	second := strings.NewReplacer("name: host-directory-client", "name: host-directory-reader",
		`echo "written by $(hostname)" > /data/hello && cat /data/hello`, "cat /data/hello").
		Replace(readFile(t, example("host-directory", "usage.yaml")))
	applyStdin(t, ns, onlyDoc(t, second, "kind: Pod"))
	mustContain(t, waitPodDone(t, ns, "host-directory-reader", clientTimeout), "written by host-directory-client")
	if n := podNode(t, ns, "host-directory-reader"); n != node {
		t.Fatalf("the second client ran on %s, not on the volume's node %s", n, node)
	}
	sw.Lap("second client read the data")

	// A clone (dataSource: the claim) starts with a copy of the data, and
	// writing to it leaves the original alone. The example copies on the
	// node the scheduler picks, so its client asks for the source's node, as
	// a user must: left to choose among three nodes, the scheduler retried
	// the wrong ones past the test's timeout in one CI run.
	applyStdin(t, ns, `apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: host-directory-clone
spec:
  storageClassName: host-directory
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 100Mi}}
  dataSource: {kind: PersistentVolumeClaim, name: host-directory}
---
apiVersion: v1
kind: Pod
metadata:
  name: host-directory-clone-reader
spec:
  nodeSelector: {kubernetes.io/hostname: `+node+`}
  restartPolicy: Never
  terminationGracePeriodSeconds: 0
  containers:
    - name: client
      image: pav-test:latest
      imagePullPolicy: IfNotPresent
      command: [/bin/sh, -c, 'cat /data/hello && echo changed > /data/hello']
      volumeMounts: [{name: data, mountPath: /data}]
  volumes:
    - name: data
      persistentVolumeClaim: {claimName: host-directory-clone}
`)
	mustContain(t, waitPodDone(t, ns, "host-directory-clone-reader", clientTimeout), "written by host-directory-client")
	clone := pvOf(t, ns, "host-directory-clone")
	cloneDir := filepath.Join("/var/lib/pav-examples/host-directory", field(clone, "spec", "csi", "volumeHandle").(string))
	if n := podNode(t, ns, "host-directory-clone-reader"); n != node {
		t.Fatalf("the clone's client ran on %s, not on its source's node %s", n, node)
	}
	if data, err := readOnNode(t, node, filepath.Join(dir, "hello")); err != nil || !strings.Contains(data, "written by host-directory-client") {
		t.Fatalf("the original changed with its clone: %q %v", data, err)
	}
	sw.Lap("clone read a copy of the data")

	// Expansion only records the new size (directories have none).
	k(t, "-n", ns, "patch", "pvc", "host-directory", "-p", `{"spec":{"resources":{"requests":{"storage":"200Mi"}}}}`)
	framework.Eventually(t, clientTimeout, "the claim's status to show 200Mi", func() (bool, string) {
		out := kq("-n", ns, "get", "pvc", "host-directory", "-o", "jsonpath={.status.capacity.storage}")
		return out == "200Mi", out
	})
	sw.Lap("expanded")

	k(t, "-n", ns, "delete", "pod", "--all", "--wait=true")
	k(t, "-n", ns, "delete", "pvc", "host-directory-clone", "--wait=true")
	waitGone(t, 2*time.Minute, "pv", field(clone, "metadata", "name").(string), "")
	if existsOnNode(t, node, cloneDir) {
		t.Fatalf("clone directory %s still exists on %s after its claim was deleted", cloneDir, node)
	}
	k(t, "-n", ns, "delete", "pvc", "host-directory", "--wait=true")
	waitGone(t, 2*time.Minute, "pv", field(pv, "metadata", "name").(string), "")
	if existsOnNode(t, node, dir) {
		t.Fatalf("volume directory %s still exists on %s after the claim was deleted", dir, node)
	}
	noPavPodsLeft(t, "host-directory")
	sw.Lap("claim deleted, directory removed")
}

// TestLoopBlock checks Block volumes: the device has exactly the capacity of
// the PV, data goes through, and no loop device stays attached.
func TestLoopBlock(t *testing.T) {
	sw := framework.NewStopwatch(t)
	installProvisioner(t, example("loop-block", "provisioner.yaml"), "loop-block")
	deleteAtEnd(t, "storageclass", "loop-block")
	ns := newNamespace(t)
	// An odd size, to see the rounding up to whole sectors reported as the capacity.
	usage := strings.Replace(readFile(t, example("loop-block", "usage.yaml")), "storage: 64Mi", "storage: 1000000", 1)
	applyStdin(t, ns, usage)
	out := waitPodDone(t, ns, "loop-block-client", clientTimeout)
	sw.Lap("client pod used the block device")
	mustContain(t, out, "size: 1000448")
	mustContain(t, out, "read back: hello, block device")
	pv := pvOf(t, ns, "loop-block")
	if c := field(pv, "spec", "capacity", "storage"); c != "1000448" {
		t.Fatalf("PV capacity = %v, want 1000448 (1000000 rounded up to 512-byte sectors)", c)
	}
	handle, _ := field(pv, "spec", "csi", "volumeHandle").(string)
	img := filepath.Join("/var/lib/pav-examples/loop-block", handle+".img")
	node := podNode(t, ns, "loop-block-client")
	k(t, "-n", ns, "delete", "pod", "loop-block-client", "--wait=true")

	// Expansion while in use: a client keeps printing the device's size
	// while the claim asks for more; the device grows under it.
	watcher := strings.NewReplacer("name: loop-block-client", "name: loop-block-watcher",
		`echo "size: $(blockdev --getsize64 /dev/xvda)"`, `while true; do echo "size: $(blockdev --getsize64 /dev/xvda)"; sleep 0.5; done`).
		Replace(readFile(t, example("loop-block", "usage.yaml")))
	applyStdin(t, ns, onlyDoc(t, watcher, "kind: Pod"))
	framework.Eventually(t, clientTimeout, "the watcher to see the device", func() (bool, string) {
		out := kq("-n", ns, "logs", "loop-block-watcher")
		return strings.Contains(out, "size: 1000448"), out
	})
	k(t, "-n", ns, "patch", "pvc", "loop-block", "-p", `{"spec":{"resources":{"requests":{"storage":"2000000"}}}}`)
	framework.Eventually(t, clientTimeout, "the device in use to grow to 2000384 bytes", func() (bool, string) {
		out := kq("-n", ns, "logs", "loop-block-watcher", "--tail=1")
		return strings.Contains(out, "size: 2000384"), out
	})
	framework.Eventually(t, clientTimeout, "the claim's status to show the new capacity", func() (bool, string) {
		out := kq("-n", ns, "get", "pvc", "loop-block", "-o", `jsonpath={.status.capacity.storage} {.status.allocatedResourceStatuses} {.status.conditions[?(@.type=="Resizing")].type}`)
		return strings.TrimSpace(out) == "2000384", out
	})
	if c := kq("get", "pv", field(pv, "metadata", "name").(string), "-o", "jsonpath={.spec.capacity.storage}"); c != "2000384" {
		t.Fatalf("PV capacity after expansion = %q, want 2000384", c)
	}
	sw.Lap("expanded in use")
	k(t, "-n", ns, "delete", "pod", "loop-block-watcher", "--wait=true")
	noPavPodsLeft(t, "loop-block")
	if out, err := onNode(t, node, "losetup", "-l", "-n", "-O", "NAME", "-j", img); err != nil || strings.TrimSpace(out) != "" {
		t.Fatalf("loop device(s) %s still attached to %s on %s after unstaging (%v)", strings.TrimSpace(out), img, node, err)
	}
	sw.Lap("unstaged, loop device detached")
	k(t, "-n", ns, "delete", "pvc", "loop-block", "--wait=true")
	waitGone(t, 2*time.Minute, "pv", field(pv, "metadata", "name").(string), "")
	if existsOnNode(t, node, img) {
		t.Fatalf("backing file %s still exists on %s after the claim was deleted", img, node)
	}
	sw.Lap("claim deleted, file removed")
}
