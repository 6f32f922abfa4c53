//go:build e2e

package examples

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/albertofaria/pav/test/e2e/framework"
)

// TestHostDirectorySnapshot takes a VolumeSnapshot of a host-directory volume
// in use, through the real snapshot-controller: a claim restored from it has
// what was written before the snapshot and not what was written after;
// deleting a snapshot of a Delete class runs the deletion pod, which removes
// the copy, and a Retain class keeps it; a pre-provisioned content for the
// kept copy restores too, and its Delete policy removes the copy.
func TestHostDirectorySnapshot(t *testing.T) {
	sw := framework.NewStopwatch(t)
	installProvisioner(t, example("host-directory", "provisioner.yaml"), "host-directory")
	deleteAtEnd(t, "storageclass", "host-directory")
	snapshotClass(t, "host-directory-delete", "host-directory", "Delete")
	snapshotClass(t, "host-directory-retain", "host-directory", "Retain")
	ns := newNamespace(t)
	k(t, "-n", ns, "apply", "-f", example("host-directory", "usage.yaml"))
	out := waitPodDone(t, ns, "host-directory-client", clientTimeout)
	mustContain(t, out, "written by host-directory-client")
	node := podNode(t, ns, "host-directory-client")

	// A client keeps the volume in use while the snapshot is taken.
	applyStdin(t, ns, `apiVersion: v1
kind: Pod
metadata:
  name: writer
spec:
  nodeSelector: {kubernetes.io/hostname: `+node+`}
  terminationGracePeriodSeconds: 0
  containers:
    - name: client
      image: pav-test:latest
      imagePullPolicy: IfNotPresent
      command: [/bin/sh, -c, 'echo before > /data/before && sleep 3600']
      volumeMounts: [{name: data, mountPath: /data}]
  volumes:
    - name: data
      persistentVolumeClaim: {claimName: host-directory}
`)
	k(t, "-n", ns, "wait", "--for=condition=Ready", "pod/writer", "--timeout=180s")
	framework.Eventually(t, time.Minute, "the writer to write /data/before", func() (bool, string) {
		out := kq("-n", ns, "exec", "writer", "--", "cat", "/data/before")
		return strings.TrimSpace(out) == "before", out
	})
	takeSnapshot(t, ns, "snap", "host-directory-delete", "host-directory")
	sw.Lap("snapshot of a volume in use ready")
	k(t, "-n", ns, "exec", "writer", "--", "sh", "-c", "echo after > /data/after")

	content, uid := snapshotContentOf(t, ns, "snap", node)
	copyDir := filepath.Join("/var/lib/pav-examples/host-directory-snapshots", uid)
	if !existsOnNode(t, node, copyDir) {
		t.Fatalf("no snapshot copy %s on node %s", copyDir, node)
	}

	// Restore: the new claim has what was written before the snapshot only.
	// restoreAndRead restores snapshot into claim; its reader prints whether
	// /data/after is there (afterState).
	restoreAndRead := func(claim, snapshot, afterState string) {
		applyStdin(t, ns, `apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: `+claim+`
spec:
  storageClassName: host-directory
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 100Mi}}
  dataSource: {apiGroup: snapshot.storage.k8s.io, kind: VolumeSnapshot, name: `+snapshot+`}
---
apiVersion: v1
kind: Pod
metadata:
  name: `+claim+`-reader
spec:
  nodeSelector: {kubernetes.io/hostname: `+node+`}
  restartPolicy: Never
  terminationGracePeriodSeconds: 0
  containers:
    - name: client
      image: pav-test:latest
      imagePullPolicy: IfNotPresent
      command: [/bin/sh, -c, 'cat /data/before; if [ -e /data/after ]; then echo after is there; else echo no after; fi']
      volumeMounts: [{name: data, mountPath: /data}]
  volumes:
    - name: data
      persistentVolumeClaim: {claimName: `+claim+`}
`)
		out := waitPodDone(t, ns, claim+"-reader", clientTimeout)
		mustContain(t, out, "before")
		mustContain(t, out, afterState)
	}
	restoreAndRead("restored", "snap", "no after")
	sw.Lap("restored claim read the snapshot's data")

	// Delete: the deletion pod removes the copy, and the content goes.
	deleteSnapshotAndCopy(t, ns, "snap", content, node, copyDir)
	sw.Lap("Delete snapshot deleted, copy removed")

	// Retain: the content and the copy stay.
	takeSnapshot(t, ns, "kept", "host-directory-retain", "host-directory")
	kept, keptUID := snapshotContentOf(t, ns, "kept", node)
	keptDir := filepath.Join("/var/lib/pav-examples/host-directory-snapshots", keptUID)
	t.Cleanup(func() {
		kq("delete", "volumesnapshotcontent", kept, "--ignore-not-found", "--wait=false")
		onNode(t, node, "rm", "-rf", keptDir)
	})
	k(t, "-n", ns, "delete", "volumesnapshot", "kept", "--wait=true", "--timeout=120s")
	if got := strings.TrimSpace(k(t, "get", "volumesnapshotcontent", kept, "-o", "jsonpath={.spec.deletionPolicy}")); got != "Retain" {
		t.Fatalf("content %s: deletionPolicy %q", kept, got)
	}
	if !existsOnNode(t, node, keptDir) {
		t.Fatalf("snapshot copy %s of a Retain snapshot was removed", keptDir)
	}
	sw.Lap("Retain snapshot deleted, copy kept")

	// Pre-provisioned: a content made by hand for the kept copy's handle, as
	// Kubernetes' documentation shows, bound to a VolumeSnapshot that names
	// it, restores; its Delete policy removes the copy when it goes.
	pre := "pre-provisioned-" + ns
	t.Cleanup(func() {
		kq("-n", ns, "delete", "volumesnapshot", "pre-provisioned", "--ignore-not-found", "--wait=false")
		kq("delete", "volumesnapshotcontent", pre, "--ignore-not-found", "--wait=false")
	})
	applyStdin(t, ns, `apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshotContent
metadata:
  name: `+pre+`
spec:
  deletionPolicy: Delete
  driver: host-directory
  source:
    snapshotHandle: `+node+"/"+keptUID+`
  sourceVolumeMode: Filesystem
  volumeSnapshotRef:
    name: pre-provisioned
    namespace: `+ns+`
---
apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshot
metadata:
  name: pre-provisioned
  namespace: `+ns+`
spec:
  source:
    volumeSnapshotContentName: `+pre+`
`)
	waitSnapshotReady(t, ns, "pre-provisioned")
	restoreAndRead("restored-pre", "pre-provisioned", "after is there") // kept was taken after /data/after
	sw.Lap("pre-provisioned snapshot restored")
	deleteSnapshotAndCopy(t, ns, "pre-provisioned", pre, node, keptDir)
	sw.Lap("pre-provisioned snapshot deleted, copy removed")
	k(t, "-n", ns, "delete", "pod", "--all", "--wait=true")
}

// snapshotClass creates a VolumeSnapshotClass of driver, deleted when the
// test ends.
func snapshotClass(t *testing.T, name, driver, deletionPolicy string) {
	t.Helper()
	applyStdin(t, "default", `apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshotClass
metadata:
  name: `+name+`
driver: `+driver+`
deletionPolicy: `+deletionPolicy+`
`)
	deleteAtEnd(t, "volumesnapshotclass", name)
}

// takeSnapshot creates a VolumeSnapshot of claim and waits until it is ready.
func takeSnapshot(t *testing.T, ns, name, class, claim string) {
	t.Helper()
	applyStdin(t, ns, `apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshot
metadata:
  name: `+name+`
spec:
  volumeSnapshotClassName: `+class+`
  source: {persistentVolumeClaimName: `+claim+`}
`)
	waitSnapshotReady(t, ns, name)
}

func waitSnapshotReady(t *testing.T, ns, name string) {
	t.Helper()
	framework.Eventually(t, 2*time.Minute, "VolumeSnapshot "+name+" to be ready", func() (bool, string) {
		out := kq("-n", ns, "get", "volumesnapshot", name, "-o", "jsonpath={.status.readyToUse} {.status.error.message}")
		return strings.HasPrefix(out, "true"), out
	})
}

// deleteSnapshotAndCopy deletes a VolumeSnapshot of a Delete content and
// checks that the content goes and its deletion pod removed the copy.
func deleteSnapshotAndCopy(t *testing.T, ns, snapshot, content, node, copyPath string) {
	t.Helper()
	k(t, "-n", ns, "delete", "volumesnapshot", snapshot, "--wait=true", "--timeout=120s")
	waitGone(t, 2*time.Minute, "volumesnapshotcontent", content, "")
	if existsOnNode(t, node, copyPath) {
		t.Fatalf("snapshot copy %s still on node %s after its Delete snapshot %s was deleted", copyPath, node, snapshot)
	}
}

// snapshotContentOf returns the name and UID of the content bound to a
// VolumeSnapshot of an example that names its snapshots <node>/<content UID>,
// checking its handle says so.
func snapshotContentOf(t *testing.T, ns, snapshot, node string) (name, uid string) {
	t.Helper()
	name = strings.TrimSpace(k(t, "-n", ns, "get", "volumesnapshot", snapshot, "-o", "jsonpath={.status.boundVolumeSnapshotContentName}"))
	uid = strings.TrimSpace(k(t, "get", "volumesnapshotcontent", name, "-o", "jsonpath={.metadata.uid}"))
	if got := strings.TrimSpace(k(t, "get", "volumesnapshotcontent", name, "-o", "jsonpath={.status.snapshotHandle}")); got != node+"/"+uid {
		t.Fatalf("snapshot handle %q, want %q", got, node+"/"+uid)
	}
	return name, uid
}

// TestLoopBlockSnapshot takes a VolumeSnapshot of a loop-block volume in use
// (a copy of its image): a claim restored from it reads the block written
// before the snapshot, not the one written over it after; deleting the
// snapshot (Delete class) removes the copy.
func TestLoopBlockSnapshot(t *testing.T) {
	sw := framework.NewStopwatch(t)
	installProvisioner(t, example("loop-block", "provisioner.yaml"), "loop-block")
	deleteAtEnd(t, "storageclass", "loop-block")
	snapshotClass(t, "loop-block-delete", "loop-block", "Delete")
	ns := newNamespace(t)
	usage := readFile(t, example("loop-block", "usage.yaml"))
	applyStdin(t, ns, onlyDoc(t, usage, "kind: StorageClass")+"\n---\n"+onlyDoc(t, usage, "kind: PersistentVolumeClaim"))

	// A client of the claim's device on node (any if ""), running script.
	client := func(pod, claim, node, script string) string {
		selector := ""
		if node != "" {
			selector = "\n  nodeSelector: {kubernetes.io/hostname: " + node + "}"
		}
		return `apiVersion: v1
kind: Pod
metadata:
  name: ` + pod + `
spec:` + selector + `
  restartPolicy: Never
  terminationGracePeriodSeconds: 0
  containers:
    - name: client
      image: pav-example-loop:latest
      imagePullPolicy: IfNotPresent
      command: [bash, -c, ` + strconv.Quote(script) + `]
      volumeDevices: [{name: disk, devicePath: /dev/xvda}]
  volumes:
    - name: disk
      persistentVolumeClaim: {claimName: ` + claim + `}
`
	}
	// One sector at 1 MiB: the pattern padded with zeros, flushed to the
	// image (conv=fsync: the loop device writes it to its backing file).
	write := func(pattern string) {
		k(t, "-n", ns, "exec", "writer", "--", "bash", "-c",
			`printf %s "$1" | dd of=/dev/xvda bs=512 seek=2048 conv=sync,fsync status=none && sync`, "bash", pattern)
	}
	const read = `dd if=/dev/xvda bs=512 skip=2048 count=1 status=none | tr -d '\0'`
	// The writer keeps the volume in use while the snapshot is taken.
	applyStdin(t, ns, client("writer", "loop-block", "", "sleep infinity"))
	k(t, "-n", ns, "wait", "--for=condition=Ready", "pod/writer", "--timeout=180s")
	node := podNode(t, ns, "writer")
	write("before the snapshot")
	sw.Lap("writer wrote the first pattern")

	takeSnapshot(t, ns, "snap", "loop-block-delete", "loop-block")
	sw.Lap("snapshot of a volume in use ready")
	write("after the snapshot!")
	if got := k(t, "-n", ns, "exec", "writer", "--", "bash", "-c", read); got != "after the snapshot!" {
		t.Fatalf("the writer reads %q back, want the second pattern", got)
	}
	content, uid := snapshotContentOf(t, ns, "snap", node)
	img := filepath.Join("/var/lib/pav-examples/loop-block-snapshots", uid+".img")
	if !existsOnNode(t, node, img) {
		t.Fatalf("no snapshot copy %s on node %s", img, node)
	}
	if got := kq("-n", ns, "get", "volumesnapshot", "snap", "-o", "jsonpath={.status.restoreSize}"); got != "64Mi" {
		t.Fatalf("restore size %q, want the image's size, 64Mi", got)
	}

	// Restore into a larger claim: the image is copied and grown.
	applyStdin(t, ns, `apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: restored
spec:
  storageClassName: loop-block
  volumeMode: Block
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 100Mi}}
  dataSource: {apiGroup: snapshot.storage.k8s.io, kind: VolumeSnapshot, name: snap}
---
`+client("restored-reader", "restored", node, `echo "size: $(blockdev --getsize64 /dev/xvda)"; echo "read: $(`+read+`)"`))
	out := waitPodDone(t, ns, "restored-reader", clientTimeout)
	mustContain(t, out, "size: 104857600")
	mustContain(t, out, "read: before the snapshot\n")
	sw.Lap("restored claim read the snapshot's data")

	// Delete: the deletion pod removes the copy, and the content goes.
	deleteSnapshotAndCopy(t, ns, "snap", content, node, img)
	sw.Lap("Delete snapshot deleted, copy removed")
	k(t, "-n", ns, "delete", "pod", "--all", "--wait=true")
}
