//go:build e2e

package examples

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHostDirectorySnapshot takes a VolumeSnapshot of a host-directory volume
// in use, through the real snapshot-controller: a claim restored from it has
// what was written before the snapshot and not what was written after;
// deleting a snapshot of a Delete class runs the deletion pod, which removes
// the copy, and a Retain class keeps it.
func TestHostDirectorySnapshot(t *testing.T) {
	sw := newStopwatch(t)
	installProvisioner(t, example("host-directory", "provisioner.yaml"), "host-directory")
	deleteAtEnd(t, "storageclass", "host-directory")
	applyStdin(t, "default", `apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshotClass
metadata:
  name: host-directory-delete
driver: host-directory
deletionPolicy: Delete
---
apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshotClass
metadata:
  name: host-directory-retain
driver: host-directory
deletionPolicy: Retain
`)
	deleteAtEnd(t, "volumesnapshotclass", "host-directory-delete", "host-directory-retain")
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
	eventually(t, time.Minute, "the writer to write /data/before", func() (bool, string) {
		out := kq("-n", ns, "exec", "writer", "--", "cat", "/data/before")
		return strings.TrimSpace(out) == "before", out
	})
	snapshot := func(name, class string) {
		applyStdin(t, ns, `apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshot
metadata:
  name: `+name+`
spec:
  volumeSnapshotClassName: `+class+`
  source: {persistentVolumeClaimName: host-directory}
`)
		eventually(t, 2*time.Minute, "VolumeSnapshot "+name+" to be ready", func() (bool, string) {
			out := kq("-n", ns, "get", "volumesnapshot", name, "-o", "jsonpath={.status.readyToUse} {.status.error.message}")
			return strings.HasPrefix(out, "true"), out
		})
	}
	snapshot("snap", "host-directory-delete")
	sw.lap("snapshot of a volume in use ready")
	k(t, "-n", ns, "exec", "writer", "--", "sh", "-c", "echo after > /data/after")

	content := strings.TrimSpace(k(t, "-n", ns, "get", "volumesnapshot", "snap", "-o", "jsonpath={.status.boundVolumeSnapshotContentName}"))
	uid := strings.TrimSpace(k(t, "get", "volumesnapshotcontent", content, "-o", "jsonpath={.metadata.uid}"))
	if got := strings.TrimSpace(k(t, "get", "volumesnapshotcontent", content, "-o", "jsonpath={.status.snapshotHandle}")); got != node+"/"+uid {
		t.Fatalf("snapshot handle %q, want %q", got, node+"/"+uid)
	}
	copyDir := filepath.Join("/var/lib/pav-examples/host-directory-snapshots", uid)
	if !existsOnNode(t, node, copyDir) {
		t.Fatalf("no snapshot copy %s on node %s", copyDir, node)
	}

	// Restore: the new claim has what was written before the snapshot only.
	applyStdin(t, ns, `apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: restored
spec:
  storageClassName: host-directory
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 100Mi}}
  dataSource: {apiGroup: snapshot.storage.k8s.io, kind: VolumeSnapshot, name: snap}
---
apiVersion: v1
kind: Pod
metadata:
  name: restored-reader
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
      persistentVolumeClaim: {claimName: restored}
`)
	out = waitPodDone(t, ns, "restored-reader", clientTimeout)
	mustContain(t, out, "before")
	mustContain(t, out, "no after")
	sw.lap("restored claim read the snapshot's data")

	// Delete: the deletion pod removes the copy, and the content goes.
	k(t, "-n", ns, "delete", "volumesnapshot", "snap", "--wait=true", "--timeout=120s")
	waitGone(t, 2*time.Minute, "volumesnapshotcontent", content, "")
	if existsOnNode(t, node, copyDir) {
		t.Fatalf("snapshot copy %s still on node %s after its Delete snapshot was deleted", copyDir, node)
	}
	sw.lap("Delete snapshot deleted, copy removed")

	// Retain: the content and the copy stay.
	snapshot("kept", "host-directory-retain")
	kept := strings.TrimSpace(k(t, "-n", ns, "get", "volumesnapshot", "kept", "-o", "jsonpath={.status.boundVolumeSnapshotContentName}"))
	keptDir := filepath.Join("/var/lib/pav-examples/host-directory-snapshots", strings.TrimSpace(k(t, "get", "volumesnapshotcontent", kept, "-o", "jsonpath={.metadata.uid}")))
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
	sw.lap("Retain snapshot deleted, copy kept")
	k(t, "-n", ns, "delete", "pod", "--all", "--wait=true")
}
