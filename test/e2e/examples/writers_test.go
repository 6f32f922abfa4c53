//go:build e2e || e2e_slow

package examples

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/albertofaria/pav/test/e2e/framework"
)

// Clients that write a numbered, fsync'ed line (or sector) every 0.2 s, and
// what the recovery tests check with them.

// writerPod is a client that appends a numbered line to /data/<file> every
// 0.2 s, each synced to the volume, and logs "ok N" once line N was, "err N"
// if it was not; it never exits. propagation is its volumeMount's
// mountPropagation ("" for none: the mount is private to its container).
func writerPod(name, claim, file, propagation string) string {
	prop := ""
	if propagation != "" {
		prop = "\n          mountPropagation: " + propagation
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  terminationGracePeriodSeconds: 0
  containers:
    - name: writer
      image: pav-test:latest
      imagePullPolicy: IfNotPresent
      command:
        - /bin/bash
        - -c
        - |
          i=0
          while :; do
            i=$((i+1))
            if (echo "line $i" >> /data/%s && sync /data/%s) 2> /dev/null; then echo "ok $i"; else echo "err $i"; fi
            sleep 0.2
          done
      volumeMounts:
        - name: data
          mountPath: /data%s
  volumes:
    - name: data
      persistentVolumeClaim:
        claimName: %s
`, name, file, file, prop, claim)
}

// acknowledged returns the numbers of the lines a writerPod logged "ok".
func acknowledged(t *testing.T, ns, pod string) []int {
	t.Helper()
	var ok []int
	for _, line := range strings.Split(kq("-n", ns, "logs", pod), "\n") {
		var n int
		if _, err := fmt.Sscanf(line, "ok %d", &n); err == nil {
			ok = append(ok, n)
		}
	}
	return ok
}

// checkAcknowledged reports each line a writer acknowledged that its file's
// content (read where) lacks.
func checkAcknowledged(t *testing.T, writer string, acked []int, content, where string) {
	t.Helper()
	lines := map[string]bool{}
	for _, line := range strings.Split(content, "\n") {
		lines[line] = true
	}
	for _, n := range acked {
		if !lines[fmt.Sprintf("line %d", n)] {
			t.Errorf("%s: line %d was acknowledged but is not %s", writer, n, where)
		}
	}
}

// startWriters creates two writerPods of claim in ns, one whose mount is
// private to its container and one with mountPropagation HostToContainer,
// waits until both write, and returns each writer's container ID.
func startWriters(t *testing.T, ns, claim string) (containerIDs map[string]string) {
	t.Helper()
	propagation := map[string]string{"writer-private": "", "writer-hosttocontainer": "HostToContainer"}
	for name, prop := range propagation {
		applyStdin(t, ns, writerPod(name, claim, name+".log", prop))
	}
	containerIDs = map[string]string{}
	for name := range propagation {
		waitPodReady(t, ns, name)
		framework.Eventually(t, time.Minute, name+" to write", func() (bool, string) {
			ok := acknowledged(t, ns, name)
			return len(ok) >= 5, fmt.Sprintf("%d lines acknowledged", len(ok))
		})
		containerIDs[name] = kq("-n", ns, "get", "pod", name, "-o", "jsonpath={.status.containerStatuses[0].containerID}")
	}
	return containerIDs
}

// killDaemonsAndWaitRecovered kills the processes named comm in every
// staging pod of provisioner, one per writer and one per other client, then
// waits until each writer got VolumeLost and VolumeRecovered and writes
// again in the same container (same container ID, no restart).
func killDaemonsAndWaitRecovered(t *testing.T, ns string, writers map[string]string, others int, provisioner, comm string) {
	t.Helper()
	stagings := strings.Fields(kq("get", "pods", "-A", "-l", "pav.albertofaria.github.io/phase=staging,pav.albertofaria.github.io/provisioner="+provisioner,
		"-o", `jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name}{"\n"}{end}`))
	if len(stagings) != len(writers)+others {
		t.Fatalf("staging pods %v, want one per client", stagings)
	}
	for _, staging := range stagings {
		nsName := strings.SplitN(staging, "/", 2)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		_, err := framework.Kubectl(ctx, "-n", nsName[0], "exec", nsName[1], "--", "bash", "-c",
			`for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = `+comm+` ] && kill -9 "${p#/proc/}"; done; true`)
		cancel()
		// A daemon that is its container's main process takes the container,
		// and this exec with it (killed: 137), before the exec returns; the
		// Events below say whether the kill took.
		if err != nil && !strings.Contains(err.Error(), "exit code 137") {
			t.Fatal(err)
		}
	}
	killed := map[string]int{}
	for name := range writers {
		ok := acknowledged(t, ns, name)
		killed[name] = ok[len(ok)-1]
	}
	for name := range writers {
		framework.Eventually(t, 3*time.Minute, "VolumeLost and VolumeRecovered Events on "+name, func() (bool, string) {
			out := kq("-n", ns, "get", "events", "--field-selector", "involvedObject.name="+name, "-o", `jsonpath={range .items[*]}{.reason}: {.message}{"\n"}{end}`)
			return strings.Contains(out, "VolumeLost") && strings.Contains(out, "VolumeRecovered"), out
		})
		framework.Eventually(t, time.Minute, name+" to write again", func() (bool, string) {
			ok := acknowledged(t, ns, name)
			return ok[len(ok)-1] > killed[name]+5, fmt.Sprintf("last acknowledged line %d, %d at the kill", ok[len(ok)-1], killed[name])
		})
		if id := kq("-n", ns, "get", "pod", name, "-o", "jsonpath={.status.containerStatuses[0].containerID}"); id != writers[name] {
			t.Errorf("%s: container %s replaced by %s", name, writers[name], id)
		}
		if n := kq("-n", ns, "get", "pod", name, "-o", "jsonpath={.status.containerStatuses[0].restartCount}"); n != "0" {
			t.Errorf("%s: restarted %s times", name, n)
		}
	}
}

// sshServer runs the sshfs example's SSH server as its README says (a key
// pair, a Secret holding both halves, server.yaml) and returns its namespace,
// deleted when the test ends.
func sshServer(t *testing.T) string {
	t.Helper()
	srv := namespaceNamed(t, "pav-example-sshfs")

	// The README's commands: a key pair, then a Secret holding both halves.
	key := filepath.Join(t.TempDir(), "sshfs-key")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "pav-sshfs-example", "-f", key).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v: %s", err, out)
	}
	k(t, "-n", srv, "create", "secret", "generic", "sshfs-key", "--type=kubernetes.io/ssh-auth",
		"--from-file=ssh-privatekey="+key, "--from-file=ssh-publickey="+key+".pub")
	k(t, "apply", "-f", example("sshfs", "server.yaml"))
	waitPodReady(t, srv, "ssh-server")
	return srv
}

// sshfsWriters creates, in a new namespace, the sshfs example's claim and
// two writerPods of it, one whose mount is private to its container and one
// with mountPropagation HostToContainer, waits until both write, and returns
// the namespace and each writer's container ID.
func sshfsWriters(t *testing.T) (ns string, containerIDs map[string]string) {
	t.Helper()
	ns = newNamespace(t)
	usage := readFile(t, example("sshfs", "usage.yaml"))
	applyStdin(t, ns, onlyDoc(t, usage, "kind: StorageClass"))
	applyStdin(t, ns, onlyDoc(t, usage, "kind: PersistentVolumeClaim"))
	return ns, startWriters(t, ns, "sshfs")
}

// sshfsDone checks that every line the writers acknowledged is in their
// files on the SSH server of namespace srv, then deletes the writers and the
// claim and checks PaV left nothing.
func sshfsDone(t *testing.T, srv, ns string, writers map[string]string) {
	t.Helper()
	pv := pvOf(t, ns, "sshfs")
	dir := "/srv/sshfs/" + field(pv, "spec", "csi", "volumeHandle").(string)
	for name := range writers {
		acked := acknowledged(t, ns, name) // before reading the server: the writer goes on
		checkAcknowledged(t, name, acked, k(t, "-n", srv, "exec", "ssh-server", "--", "cat", dir+"/"+name+".log"), "on the server")
		k(t, "-n", ns, "delete", "pod", name, "--wait=true")
	}
	noPavPodsLeft(t, "sshfs")
	k(t, "-n", ns, "delete", "pvc", "sshfs", "--wait=true")
	waitGone(t, 2*time.Minute, "pv", field(pv, "metadata", "name").(string), "")
}

// gocryptfsNamespace installs the host-directory and gocryptfs examples'
// provisioners and the host-directory StorageClass, and returns a new
// namespace holding the gocryptfs key (the examples' usage.yaml expects it).
func gocryptfsNamespace(t *testing.T) string {
	t.Helper()
	installProvisioner(t, example("host-directory", "provisioner.yaml"), "host-directory")
	installProvisioner(t, example("gocryptfs", "provisioner.yaml"), "gocryptfs")
	deleteAtEnd(t, "storageclass", "host-directory", "gocryptfs")
	applyStdin(t, "default", onlyDoc(t, readFile(t, example("host-directory", "usage.yaml")), "kind: StorageClass"))
	ns := newNamespace(t)
	k(t, "-n", ns, "create", "secret", "generic", "gocryptfs-key", "--from-literal=passphrase="+randomSecret(t))
	return ns
}

// ownNamespaceReader is a client whose volume is mounted read-only and
// that, as any unprivileged container may, runs in a user and mount
// namespace of its own (unshare -Urm: all capabilities there) and binds its
// volume there again. The kernel locked the read-only flag of the mounts it
// copied into that namespace, so its attempts to remount the volume writable
// and write to it, every 0.5 s (each logged "try"), log "remounted rw" or
// "wrote" only if PaV ever gave it an unlocked mount. It logs "rebound"
// once set up.
func ownNamespaceReader(name, claim string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  terminationGracePeriodSeconds: 0
  containers:
    - name: reader
      image: pav-test:latest
      imagePullPolicy: IfNotPresent
      command:
        - unshare
        - -Urm
        - /bin/bash
        - -c
        - |
          mount -o bind /data /data && echo rebound
          while :; do
            echo try
            mount -o remount,bind,rw /data 2> /dev/null && echo "remounted rw"
            (echo x > /data/%s.attempt) 2> /dev/null && echo wrote
            sleep 0.5
          done
      volumeMounts:
        - name: data
          mountPath: /data
          readOnly: true
  volumes:
    - name: data
      persistentVolumeClaim:
        claimName: %s
`, name, name, claim)
}

// startOwnNamespaceReader creates an ownNamespaceReader of claim in ns and
// waits until it has bound its volume again in its own namespace.
func startOwnNamespaceReader(t *testing.T, ns, name, claim string) {
	t.Helper()
	applyStdin(t, ns, ownNamespaceReader(name, claim))
	waitPodReady(t, ns, name)
	framework.Eventually(t, time.Minute, name+" to bind its volume in its own namespace", func() (bool, string) {
		logs := kq("-n", ns, "logs", name)
		return strings.Contains(logs, "rebound"), logs
	})
}

// checkOwnNamespaceReader checks that the ownNamespaceReader name got a
// Warning VolumeNotReplaced and the Normal event (reason done) that ends
// the recovery or rollout (no retries: no VolumeRecoveryFailed), and that it
// never made its volume writable. Its log is read after the Events: it
// tries every 0.5 s, so it had its chance with the new mount.
func checkOwnNamespaceReader(t *testing.T, ns, name, done string) {
	t.Helper()
	framework.Eventually(t, 3*time.Minute, "VolumeNotReplaced and "+done+" Events on "+name, func() (bool, string) {
		out := kq("-n", ns, "get", "events", "--field-selector", "involvedObject.name="+name, "-o", `jsonpath={range .items[*]}{.reason}: {.message}{"\n"}{end}`)
		return strings.Contains(out, "VolumeNotReplaced") && strings.Contains(out, done), out
	})
	tries := strings.Count(kq("-n", ns, "logs", name), "try")
	framework.Eventually(t, time.Minute, name+" to try again after the replacement", func() (bool, string) {
		n := strings.Count(kq("-n", ns, "logs", name), "try")
		return n >= tries+2, fmt.Sprintf("%d tries, %d at the Events", n, tries) // one whole try after them
	})
	if out := kq("-n", ns, "get", "events", "--field-selector", "involvedObject.name="+name+",reason=VolumeRecoveryFailed", "-o", "name"); out != "" {
		t.Errorf("%s: the recovery failed and was retried: %s", name, out)
	}
	if logs := kq("-n", ns, "logs", name); strings.Contains(logs, "remounted rw") || strings.Contains(logs, "wrote") {
		t.Errorf("%s made its read-only volume writable:\n%s", name, logs)
	}
}
