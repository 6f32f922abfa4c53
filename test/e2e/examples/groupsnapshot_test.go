//go:build e2e

package examples

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/albertofaria/pav/test/e2e/framework"
)

// TestHostDirectoryGroupSnapshot takes a VolumeGroupSnapshot of two
// host-directory claims through the real snapshot-controller: PaV's group
// creation pod copies both at once, the snapshot-controller makes a member
// VolumeSnapshot per claim, a claim restored from one member has that
// claim's data (and not the other's), and deleting the group runs the group
// deletion pod, which removes both copies.
func TestHostDirectoryGroupSnapshot(t *testing.T) {
	sw := framework.NewStopwatch(t)
	installProvisioner(t, example("host-directory", "provisioner.yaml"), "host-directory")
	deleteAtEnd(t, "storageclass", "host-directory")
	applyStdin(t, "default", `apiVersion: groupsnapshot.storage.k8s.io/v1
kind: VolumeGroupSnapshotClass
metadata:
  name: host-directory-group
driver: host-directory
deletionPolicy: Delete
`)
	deleteAtEnd(t, "volumegroupsnapshotclass", "host-directory-group")
	ns := newNamespace(t)
	usage := readFile(t, example("host-directory", "usage.yaml"))
	claim := func(name string) string {
		return `apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: ` + name + `
  labels: {group: pair}
spec:
  storageClassName: host-directory
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 100Mi}}
`
	}
	// One client writes a different file to each claim, so both are
	// provisioned on its node.
	applyStdin(t, ns, onlyDoc(t, usage, "kind: StorageClass")+"\n---\n"+claim("first")+"---\n"+claim("second")+`---
apiVersion: v1
kind: Pod
metadata:
  name: writer
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 0
  containers:
    - name: client
      image: pav-test:latest
      imagePullPolicy: IfNotPresent
      command: [/bin/sh, -c, 'echo one > /first/one && echo two > /second/two']
      volumeMounts: [{name: first, mountPath: /first}, {name: second, mountPath: /second}]
  volumes:
    - {name: first, persistentVolumeClaim: {claimName: first}}
    - {name: second, persistentVolumeClaim: {claimName: second}}
`)
	waitPodDone(t, ns, "writer", clientTimeout)
	node := podNode(t, ns, "writer")
	sw.Lap("two claims written")

	applyStdin(t, ns, `apiVersion: groupsnapshot.storage.k8s.io/v1
kind: VolumeGroupSnapshot
metadata:
  name: pair
spec:
  volumeGroupSnapshotClassName: host-directory-group
  source:
    selector:
      matchLabels: {group: pair}
`)
	framework.Eventually(t, 2*time.Minute, "VolumeGroupSnapshot pair to be ready", func() (bool, string) {
		out := kq("-n", ns, "get", "volumegroupsnapshot", "pair", "-o", "jsonpath={.status.readyToUse} {.status.error.message}")
		return strings.HasPrefix(out, "true"), out
	})
	sw.Lap("group snapshot ready")
	content := strings.TrimSpace(k(t, "-n", ns, "get", "volumegroupsnapshot", "pair", "-o", "jsonpath={.status.boundVolumeGroupSnapshotContentName}"))
	uid := strings.TrimSpace(k(t, "get", "volumegroupsnapshotcontent", content, "-o", "jsonpath={.metadata.uid}"))
	if got := strings.TrimSpace(k(t, "get", "volumegroupsnapshotcontent", content, "-o", "jsonpath={.status.volumeGroupSnapshotHandle}")); got != node+"/"+uid {
		t.Fatalf("group handle %q, want %q", got, node+"/"+uid)
	}
	copies := []string{
		filepath.Join("/var/lib/pav-examples/host-directory-snapshots", uid+"-0"),
		filepath.Join("/var/lib/pav-examples/host-directory-snapshots", uid+"-1"),
	}
	for _, c := range copies {
		if !existsOnNode(t, node, c) {
			t.Fatalf("no group member copy %s on node %s", c, node)
		}
	}

	// The member of claim second: the snapshot-controller's VolumeSnapshot
	// whose source is that claim.
	var member string
	framework.Eventually(t, 2*time.Minute, "a ready member VolumeSnapshot of claim second", func() (bool, string) {
		out := kq("-n", ns, "get", "volumesnapshot", "-o",
			`jsonpath={range .items[*]}{.metadata.name} {.spec.source.persistentVolumeClaimName} {.status.readyToUse}{"\n"}{end}`)
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) == 3 && f[1] == "second" && f[2] == "true" {
				member = f[0]
				return true, out
			}
		}
		return false, out
	})
	sw.Lap("member VolumeSnapshots ready")

	applyStdin(t, ns, `apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: restored
spec:
  storageClassName: host-directory
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 100Mi}}
  dataSource: {apiGroup: snapshot.storage.k8s.io, kind: VolumeSnapshot, name: `+member+`}
---
apiVersion: v1
kind: Pod
metadata:
  name: reader
spec:
  nodeSelector: {kubernetes.io/hostname: `+node+`}
  restartPolicy: Never
  terminationGracePeriodSeconds: 0
  containers:
    - name: client
      image: pav-test:latest
      imagePullPolicy: IfNotPresent
      command: [/bin/sh, -c, 'cat /data/two; if [ -e /data/one ]; then echo one is there; else echo no one; fi']
      volumeMounts: [{name: data, mountPath: /data}]
  volumes:
    - {name: data, persistentVolumeClaim: {claimName: restored}}
`)
	out := waitPodDone(t, ns, "reader", clientTimeout)
	mustContain(t, out, "two")
	mustContain(t, out, "no one")
	sw.Lap("member restored")

	// Deleting the group deletes its members, then the group deletion pod
	// removes both copies and the content goes.
	k(t, "-n", ns, "delete", "volumegroupsnapshot", "pair", "--wait=true", "--timeout=120s")
	waitGone(t, 2*time.Minute, "volumegroupsnapshotcontent", content, "")
	for _, c := range copies {
		if existsOnNode(t, node, c) {
			t.Errorf("group member copy %s still on node %s after its Delete group snapshot was deleted", c, node)
		}
	}
	framework.Eventually(t, 2*time.Minute, "the member VolumeSnapshots to go with their group", func() (bool, string) {
		out := kq("-n", ns, "get", "volumesnapshot", "-o", "name")
		return strings.TrimSpace(out) == "", out
	})
	sw.Lap("group snapshot deleted, copies removed")
	k(t, "-n", ns, "delete", "pod", "--all", "--wait=true")
}
