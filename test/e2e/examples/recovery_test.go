//go:build e2e_slow

package examples

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/albertofaria/pav/test/e2e/framework"
)

// TestLoopBlockRecovery: loop-block with its staging made long-running (a
// daemon holds the device, as an NBD or iSCSI client would) and a fresh loop
// device per staging. Its daemon is killed under a client that writes a
// numbered sector every 0.2 s; PaV stages the volume again on another loop
// device and replaces the device node inside the running container (same
// container, no restart, the node now of the new device), and every sector
// acknowledged before and after is in the backing file. The old device
// number, given back, becomes another disk: the container may make a node of
// it (CAP_MKNOD) but its device cgroup no longer lets it open it.
func TestLoopBlockRecovery(t *testing.T) {
	sw := framework.NewStopwatch(t)
	prov := readFile(t, example("loop-block", "provisioner.yaml"))
	for old, new := range map[string]string{
		`dev=$(losetup -l -n -O NAME -j "$file" | head -n 1)`: `dev=""`,
		`                mknod /pav/volume b "$maj" "$min"` + "\n": `                mknod /pav/volume b "$maj" "$min"` + "\n" +
			"                touch /pav/ready\n                sleep infinity & wait $!\n",
	} {
		if !strings.Contains(prov, old) {
			t.Fatalf("examples/loop-block/provisioner.yaml no longer contains %q", old)
		}
		prov = strings.Replace(prov, old, new, 1)
	}
	file := filepath.Join(t.TempDir(), "provisioner.yaml")
	if err := os.WriteFile(file, []byte(prov), 0o644); err != nil {
		t.Fatal(err)
	}
	installProvisioner(t, file, "loop-block")
	deleteAtEnd(t, "storageclass", "loop-block")
	ns := newNamespace(t)
	usage := readFile(t, example("loop-block", "usage.yaml"))
	applyStdin(t, ns, onlyDoc(t, usage, "kind: StorageClass"))
	applyStdin(t, ns, onlyDoc(t, usage, "kind: PersistentVolumeClaim"))
	applyStdin(t, ns, `apiVersion: v1
kind: Pod
metadata:
  name: writer
spec:
  terminationGracePeriodSeconds: 0
  containers:
    - name: writer
      image: pav-example-loop:latest
      imagePullPolicy: IfNotPresent
      command:
        - /bin/bash
        - -c
        - |
          i=0
          while :; do
            i=$((i+1))
            if printf 'line %d\n' "$i" | dd of=/dev/xvda bs=512 seek="$i" conv=sync,notrunc,fsync status=none 2> /dev/null; then echo "ok $i"; else echo "err $i"; fi
            sleep 0.2
          done
      volumeDevices:
        - name: disk
          devicePath: /dev/xvda
  volumes:
    - name: disk
      persistentVolumeClaim:
        claimName: loop-block
`)
	waitPodReady(t, ns, "writer")
	framework.Eventually(t, time.Minute, "the writer to write", func() (bool, string) {
		ok := acknowledged(t, ns, "writer")
		return len(ok) >= 5, fmt.Sprintf("%d sectors acknowledged", len(ok))
	})
	container := kq("-n", ns, "get", "pod", "writer", "-o", "jsonpath={.status.containerStatuses[0].containerID}")
	device := func() string { return kq("-n", ns, "exec", "writer", "--", "stat", "-c", "%t:%T", "/dev/xvda") }
	before := device()
	sw.Lap("a client writing to the block device")

	staging := strings.Fields(kq("get", "pods", "-A", "-l", "pav.albertofaria.github.io/phase=staging,pav.albertofaria.github.io/provisioner=loop-block",
		"-o", `jsonpath={range .items[*]}{.metadata.namespace} {.metadata.name}{"\n"}{end}`))
	if len(staging) != 2 {
		t.Fatalf("staging pods %v, want 1", staging)
	}
	// the exec may end with its container (137): the daemon was its main process's child
	kq("-n", staging[0], "exec", staging[1], "--", "bash", "-c",
		`for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = sleep ] && kill -9 "${p#/proc/}"; done; true`)
	ok := acknowledged(t, ns, "writer")
	killed := ok[len(ok)-1]
	framework.Eventually(t, 3*time.Minute, "VolumeLost and VolumeRecovered Events on the writer", func() (bool, string) {
		out := kq("-n", ns, "get", "events", "--field-selector", "involvedObject.name=writer", "-o", `jsonpath={range .items[*]}{.reason}: {.message}{"\n"}{end}`)
		return strings.Contains(out, "VolumeLost") && strings.Contains(out, "VolumeRecovered"), out
	})
	framework.Eventually(t, time.Minute, "the writer to write on", func() (bool, string) {
		ok := acknowledged(t, ns, "writer")
		return ok[len(ok)-1] > killed+5, fmt.Sprintf("last acknowledged sector %d, %d at the kill", ok[len(ok)-1], killed)
	})
	if after := device(); after == before {
		t.Errorf("the container's /dev/xvda is still device %s: not replaced", before)
	}
	if id := kq("-n", ns, "get", "pod", "writer", "-o", "jsonpath={.status.containerStatuses[0].containerID}"); id != container {
		t.Errorf("container %s replaced by %s", container, id)
	}
	if n := kq("-n", ns, "get", "pod", "writer", "-o", "jsonpath={.status.containerStatuses[0].restartCount}"); n != "0" {
		t.Errorf("restarted %s times", n)
	}
	sw.Lap("the writer writes on the new device")
	oldNumberIsAnotherDisk(t, ns, "writer", before)
	sw.Lap("the old device number cannot be opened")

	pv := pvOf(t, ns, "loop-block")
	img := filepath.Join("/var/lib/pav-examples/loop-block", field(pv, "spec", "csi", "volumeHandle").(string)+".img")
	node := podNode(t, ns, "writer")
	acked := acknowledged(t, ns, "writer")
	k(t, "-n", ns, "delete", "pod", "writer", "--wait=true")
	// Each sector holds "line N\n" and zeros: without them, one line per sector.
	content, err := onNode(t, node, "sh", "-c", `tr -d '\000' < "$1"`, "sh", img)
	if err != nil {
		t.Fatal(err)
	}
	checkAcknowledged(t, "writer", acked, content, "in the backing file")
	noPavPodsLeft(t, "loop-block")
	k(t, "-n", ns, "delete", "pvc", "loop-block", "--wait=true")
	waitGone(t, 2*time.Minute, "pv", field(pv, "metadata", "name").(string), "")
	sw.Lap("unstaged, claim deleted")
}

// TestGocryptfsRecovery kills the gocryptfs daemons of an encrypted volume
// in use by two writing clients (one with a private mount, one with
// HostToContainer): the same containers write again, and every line they
// acknowledged, before the kill and after, reads back through the
// recovered volume.
func TestGocryptfsRecovery(t *testing.T) {
	sw := framework.NewStopwatch(t)
	ns := gocryptfsNamespace(t)
	usage := readFile(t, example("gocryptfs", "usage.yaml"))
	applyStdin(t, ns, onlyDoc(t, usage, "kind: StorageClass"))
	applyStdin(t, ns, onlyDoc(t, usage, "kind: PersistentVolumeClaim"))
	writers := startWriters(t, ns, "gocryptfs")
	sw.Lap("two clients writing through gocryptfs")

	killDaemonsAndWaitRecovered(t, ns, writers, 0, "gocryptfs", "gocryptfs")
	sw.Lap("both clients write again")

	for name := range writers {
		acked := acknowledged(t, ns, name)
		checkAcknowledged(t, name, acked, k(t, "-n", ns, "exec", name, "--", "cat", "/data/"+name+".log"), "in the volume")
		k(t, "-n", ns, "delete", "pod", name, "--wait=true")
	}
	noPavPodsLeft(t, "gocryptfs")
	outer := pvOf(t, ns, "gocryptfs")
	k(t, "-n", ns, "delete", "pvc", "gocryptfs", "--wait=true")
	waitGone(t, 2*time.Minute, "pv", field(outer, "metadata", "name").(string), "")
	sw.Lap("unstaged, claim deleted")
}

// TestSSHFSRollingUpdate: with updateStrategy RollingUpdate, a change of
// the sshfs provisioner's staging section replaces the staging pods of two
// writing clients (one without mountPropagation) make-before-break: the same
// containers write on, without a single failed write. A read-only client
// that bound its volume again in a user and mount namespace of its own is
// left alone there (VolumeNotReplaced) and never gets a writable volume.
func TestSSHFSRollingUpdate(t *testing.T) {
	sw := framework.NewStopwatch(t)
	prov := strings.Replace(readFile(t, example("sshfs", "provisioner.yaml")), "  volumeStaging:\n", "  volumeStaging:\n    updateStrategy: RollingUpdate\n", 1)
	file := filepath.Join(t.TempDir(), "provisioner.yaml")
	if err := os.WriteFile(file, []byte(prov), 0o644); err != nil {
		t.Fatal(err)
	}
	installProvisioner(t, file, "sshfs")
	deleteAtEnd(t, "storageclass", "sshfs")
	srv := sshServer(t)
	ns, writers := sshfsWriters(t)
	startOwnNamespaceReader(t, ns, "reader-own-namespace", "sshfs")
	framework.Eventually(t, time.Minute, "three stagings, none outdated", func() (bool, string) {
		s := kq("get", "pavprovisioner", "sshfs", "-o", "jsonpath={.status.stagings}/{.status.outdatedStagings}")
		return s == "3/", s
	})
	sw.Lap("two clients writing through sshfs")

	k(t, "patch", "pavprovisioner", "sshfs", "--type=json", "-p",
		`[{"op":"add","path":"/spec/volumeStaging/podTemplate/metadata/labels","value":{"rollout":"two"}}]`)
	checkOwnNamespaceReader(t, ns, "reader-own-namespace", "StagingReplaced")
	for name := range writers {
		framework.Eventually(t, 3*time.Minute, "a StagingReplaced Event on "+name, func() (bool, string) {
			out := kq("-n", ns, "get", "events", "--field-selector", "involvedObject.name="+name, "-o", `jsonpath={range .items[*]}{.reason}: {.message}{"\n"}{end}`)
			return strings.Contains(out, "StagingReplaced"), out
		})
	}
	framework.Eventually(t, time.Minute, "no outdated staging left", func() (bool, string) {
		s := kq("get", "pavprovisioner", "sshfs", "-o", "jsonpath={.status.stagings}/{.status.outdatedStagings}")
		return s == "3/", s
	})
	if labels := kq("get", "pods", "-A", "-l", "pav.albertofaria.github.io/phase=staging,pav.albertofaria.github.io/provisioner=sshfs,rollout=two", "-o", "name"); len(strings.Fields(labels)) != 3 {
		t.Errorf("staging pods from the new section: %q, want 3", labels)
	}
	sw.Lap("both stagings replaced")
	for name := range writers {
		done := acknowledged(t, ns, name)
		framework.Eventually(t, time.Minute, name+" to write on", func() (bool, string) {
			ok := acknowledged(t, ns, name)
			return ok[len(ok)-1] > done[len(done)-1]+5, fmt.Sprintf("last acknowledged line %d", ok[len(ok)-1])
		})
		if logs := kq("-n", ns, "logs", name); strings.Contains(logs, "err ") {
			t.Errorf("%s: writes failed during the rollout:\n%s", name, logs)
		}
		if id := kq("-n", ns, "get", "pod", name, "-o", "jsonpath={.status.containerStatuses[0].containerID}"); id != writers[name] {
			t.Errorf("%s: container %s replaced by %s", name, writers[name], id)
		}
	}
	k(t, "-n", ns, "delete", "pod", "reader-own-namespace", "--wait=true")
	sshfsDone(t, srv, ns, writers)
	sw.Lap("unstaged, claim deleted")
}

// oldNumberIsAnotherDisk gives loop device number old ("%t:%T" of stat,
// hex) to a new file where the kernel lets it, as a new volume of another
// tenant would get it, and
// checks that the client pod, making a node of that number, cannot open it
// (EPERM from its device cgroup).
func oldNumberIsAnotherDisk(t *testing.T, ns, pod, old string) {
	t.Helper()
	var major, minor int
	if _, err := fmt.Sscanf(old, "%x:%x", &major, &minor); err != nil {
		t.Fatalf("device number %q: %v", old, err)
	}
	dir := t.TempDir()
	disk := filepath.Join(dir, "other-tenant.img")
	if err := os.WriteFile(disk, []byte(strings.Repeat("another tenant's disk\n", 1<<15)), 0o600); err != nil {
		t.Fatal(err)
	}
	node := filepath.Join(dir, "loop")
	if out, err := exec.Command("mknod", node, "b", strconv.Itoa(major), strconv.Itoa(minor)).CombinedOutput(); err != nil {
		t.Fatalf("mknod: %v: %s", err, out)
	}
	// Give the old number to another disk, as a busy node would: first detach
	// the old staging's loop device, which stays attached to the volume's
	// file (a kernel object). The kernel frees the number only once nothing
	// has the old device open; while kubelet holds it for the mapped volume
	// it stays busy, and the client is checked against it as it is.
	if out, err := exec.Command("losetup", node).CombinedOutput(); err == nil {
		t.Logf("the old device number %d:%d still holds %s: detaching it", major, minor, strings.TrimSpace(string(out)))
		if out, err := exec.Command("losetup", "-d", node).CombinedOutput(); err != nil {
			t.Fatalf("losetup -d %d:%d: %v: %s", major, minor, err, out)
		}
	}
	var attach []byte
	var err error
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Second) {
		if attach, err = exec.Command("losetup", node, disk).CombinedOutput(); err == nil {
			t.Cleanup(func() { _ = exec.Command("losetup", "-d", node).Run() })
			if out, err := exec.Command("head", "-c", "22", node).CombinedOutput(); err != nil || string(out) != "another tenant's disk\n" {
				t.Fatalf("the old device number %d:%d is not the other disk here: %q, %v", major, minor, out, err)
			}
			t.Logf("the old device number %d:%d is now another disk", major, minor)
			break
		}
		if time.Now().After(deadline) {
			t.Logf("the old device number %d:%d is still held open (%v: %s): checking it as it is", major, minor, err, attach)
			break
		}
	}
	out, err := framework.Kubectl(t.Context(), "-n", ns, "exec", pod, "--", "bash", "-c",
		fmt.Sprintf("mknod /tmp/old-device b %d %d && head -c 22 /tmp/old-device", major, minor))
	if err == nil || !strings.Contains(err.Error(), "Operation not permitted") { // head's message, in kubectl's error
		t.Errorf("the client opened its volume's old device number %d:%d (err %v): %q", major, minor, err, out)
	}
}
