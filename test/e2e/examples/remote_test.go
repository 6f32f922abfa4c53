//go:build e2e

package examples

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/albertofaria/pav/protocol"
)

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

// TestSSHFS runs the example's SSH server, mounts a new remote directory per
// claim with sshfs, and checks the data lands on the server and the directory
// goes when the claim does.
func TestSSHFS(t *testing.T) {
	sw := newStopwatch(t)
	installProvisioner(t, example("sshfs", "provisioner.yaml"), "sshfs")
	deleteAtEnd(t, "storageclass", "sshfs")
	srv := sshServer(t)
	sw.lap("SSH server Ready")

	ns := newNamespace(t)
	k(t, "-n", ns, "apply", "-f", example("sshfs", "usage.yaml"))
	out := waitPodDone(t, ns, "sshfs-client", clientTimeout)
	sw.lap("client pod wrote through sshfs")
	mustContain(t, out, "hello over ssh")

	pv := pvOf(t, ns, "sshfs")
	dir := "/srv/sshfs/" + field(pv, "spec", "csi", "volumeHandle").(string)
	mustContain(t, k(t, "-n", srv, "exec", "ssh-server", "--", "cat", dir+"/hello"), "hello over ssh")

	k(t, "-n", ns, "delete", "pod", "sshfs-client", "--wait=true")
	noPavPodsLeft(t, "sshfs")
	sw.lap("unstaged (sshfs pod stopped)")

	k(t, "-n", ns, "delete", "pvc", "sshfs", "--wait=true")
	waitGone(t, 2*time.Minute, "pv", field(pv, "metadata", "name").(string), "")
	if out := kq("-n", srv, "exec", "ssh-server", "--", "ls", "-A", "/srv/sshfs"); strings.TrimSpace(out) != "" {
		t.Fatalf("remote directories left after the claim was deleted: %s", out)
	}
	sw.lap("claim deleted, remote directory removed")
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

// TestSSHFSRecovery kills the FUSE daemons of an sshfs volume in use by two
// writing clients, one whose mount is private to its container and one with
// mountPropagation HostToContainer. PaV stages the volume again and the same
// containers (same container ID, no restart) write again; every line
// acknowledged before the kill and after the recovery is on the server.
func TestSSHFSRecovery(t *testing.T) {
	sw := newStopwatch(t)
	installProvisioner(t, example("sshfs", "provisioner.yaml"), "sshfs")
	deleteAtEnd(t, "storageclass", "sshfs")
	srv := sshServer(t)
	ns, writers := sshfsWriters(t)
	sw.lap("two clients writing through sshfs")

	killDaemonsAndWaitRecovered(t, ns, writers, "sshfs", "sshfs")
	sw.lap("both clients write again")

	sshfsDone(t, srv, ns, writers)
	sw.lap("unstaged, claim deleted")
}

// TestSSHFSRollingUpdate: with updateStrategy RollingUpdate, a change of
// the sshfs provisioner's staging section replaces the staging pods of two
// writing clients (one without mountPropagation) make-before-break: the same
// containers write on, without a single failed write.
func TestSSHFSRollingUpdate(t *testing.T) {
	sw := newStopwatch(t)
	prov := strings.Replace(readFile(t, example("sshfs", "provisioner.yaml")), "  volumeStaging:\n", "  volumeStaging:\n    updateStrategy: RollingUpdate\n", 1)
	file := filepath.Join(t.TempDir(), "provisioner.yaml")
	if err := os.WriteFile(file, []byte(prov), 0o644); err != nil {
		t.Fatal(err)
	}
	installProvisioner(t, file, "sshfs")
	deleteAtEnd(t, "storageclass", "sshfs")
	srv := sshServer(t)
	ns, writers := sshfsWriters(t)
	eventually(t, time.Minute, "two stagings, none outdated", func() (bool, string) {
		s := kq("get", "pavprovisioner", "sshfs", "-o", "jsonpath={.status.stagings}/{.status.outdatedStagings}")
		return s == "2/", s
	})
	sw.lap("two clients writing through sshfs")

	k(t, "patch", "pavprovisioner", "sshfs", "--type=json", "-p",
		`[{"op":"add","path":"/spec/volumeStaging/podTemplate/metadata/labels","value":{"rollout":"two"}}]`)
	for name := range writers {
		eventually(t, 3*time.Minute, "a StagingReplaced Event on "+name, func() (bool, string) {
			out := kq("-n", ns, "get", "events", "--field-selector", "involvedObject.name="+name, "-o", `jsonpath={range .items[*]}{.reason}: {.message}{"\n"}{end}`)
			return strings.Contains(out, "StagingReplaced"), out
		})
	}
	eventually(t, time.Minute, "no outdated staging left", func() (bool, string) {
		s := kq("get", "pavprovisioner", "sshfs", "-o", "jsonpath={.status.stagings}/{.status.outdatedStagings}")
		return s == "2/", s
	})
	if labels := kq("get", "pods", "-A", "-l", "pav.albertofaria.github.io/phase=staging,pav.albertofaria.github.io/provisioner=sshfs,rollout=two", "-o", "name"); len(strings.Fields(labels)) != 2 {
		t.Errorf("staging pods from the new section: %q, want 2", labels)
	}
	sw.lap("both stagings replaced")
	for name := range writers {
		done := acknowledged(t, ns, name)
		eventually(t, time.Minute, name+" to write on", func() (bool, string) {
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
	sshfsDone(t, srv, ns, writers)
	sw.lap("unstaged, claim deleted")
}

// TestGocryptfs stacks the encryption middleware on a host-directory claim:
// the client sees plaintext, the inner volume holds only ciphertext.
func TestGocryptfs(t *testing.T) {
	sw := newStopwatch(t)
	installProvisioner(t, example("host-directory", "provisioner.yaml"), "host-directory")
	installProvisioner(t, example("gocryptfs", "provisioner.yaml"), "gocryptfs")
	deleteAtEnd(t, "storageclass", "host-directory", "gocryptfs")
	applyStdin(t, "default", onlyDoc(t, readFile(t, example("host-directory", "usage.yaml")), "kind: StorageClass"))
	ns := newNamespace(t)
	k(t, "-n", ns, "create", "secret", "generic", "gocryptfs-key", "--from-literal=passphrase="+randomSecret(t))
	k(t, "-n", ns, "apply", "-f", example("gocryptfs", "usage.yaml"))
	out := waitPodDone(t, ns, "gocryptfs-client", clientTimeout)
	sw.lap("client pod wrote through gocryptfs")
	mustContain(t, out, "top secret")

	outer := pvOf(t, ns, "gocryptfs")
	inner := pvOf(t, ns, "gocryptfs-inner")
	// The inner host-directory volume is on the client's node (the outer PV's affinity).
	node := podNode(t, ns, "gocryptfs-client")
	if !strings.Contains(kq("get", "pv", field(outer, "metadata", "name").(string), "-o", "jsonpath={.spec.nodeAffinity}"), `"`+node+`"`) {
		t.Fatalf("the encrypted PV's node affinity %v does not name its client's node %s", field(outer, "spec", "nodeAffinity"), node)
	}
	cipherDir := filepath.Join("/var/lib/pav-examples/host-directory",
		field(inner, "spec", "csi", "volumeHandle").(string), field(outer, "spec", "csi", "volumeHandle").(string))
	if !existsOnNode(t, node, filepath.Join(cipherDir, "gocryptfs.conf")) {
		t.Fatalf("no gocryptfs directory %s in the inner volume on %s", cipherDir, node)
	}
	plain, err := onNode(t, node, "sh", "-c", `find "$1" -name '*secret*'; grep -rl 'top secret' "$1"; true`, "sh", cipherDir)
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(plain) != "" {
		t.Errorf("plaintext file names or contents in the inner volume on %s:\n%s", node, plain)
	}

	k(t, "-n", ns, "delete", "pod", "gocryptfs-client", "--wait=true")
	noPavPodsLeft(t, "gocryptfs")
	sw.lap("unstaged (gocryptfs pod stopped)")
	// The encrypted claim goes before the inner one: its deletion pod mounts the inner claim.
	k(t, "-n", ns, "delete", "pvc", "gocryptfs", "--wait=true")
	waitGone(t, 2*time.Minute, "pv", field(outer, "metadata", "name").(string), "")
	if existsOnNode(t, node, cipherDir) {
		t.Fatalf("encrypted directory %s still exists on %s after the claim was deleted", cipherDir, node)
	}
	sw.lap("claim deleted, ciphertext removed")
}

// TestS3Bucket runs versitygw, gets a new bucket for one claim and the existing
// bucket for another, and checks objects and bucket lifetimes through the S3 API.
func TestS3Bucket(t *testing.T) {
	sw := newStopwatch(t)
	installProvisioner(t, example("s3-bucket", "provisioner.yaml"), "s3-bucket")
	deleteAtEnd(t, "storageclass", "s3-bucket", "s3-existing-bucket")
	srv := namespaceNamed(t, "pav-example-s3")
	k(t, "-n", srv, "create", "secret", "generic", "s3-credentials",
		"--from-literal=accessKeyId=pav-example", "--from-literal=secretAccessKey="+randomSecret(t))
	k(t, "apply", "-f", example("s3-bucket", "server.yaml"))
	waitPodReady(t, srv, "s3-server")
	sw.lap("S3 server Ready")

	// s3 runs rclone inside the server pod with the given secret key ("" = the real one).
	s3 := func(secretKey string, args ...string) (string, error) {
		if secretKey == "" {
			secretKey = "$ROOT_SECRET_KEY"
		}
		script := `AWS_ACCESS_KEY_ID=$ROOT_ACCESS_KEY AWS_SECRET_ACCESS_KEY=` + secretKey +
			` rclone --config /dev/null --s3-provider Other --s3-env-auth --s3-endpoint http://127.0.0.1:7070 --s3-region us-east-1 --retries 1 --low-level-retries 1 "$@"`
		// container "seed" has rclone (the server's own container has only busybox)
		return kubectl(t.Context(), "", append([]string{"-n", srv, "exec", "s3-server", "-c", "seed", "--", "bash", "-c", script, "s3"}, args...)...)
	}
	if out, err := s3("", "lsd", ":s3:"); err != nil {
		t.Fatalf("listing buckets with the right key: %v\n%s", err, out)
	}
	if _, err := s3("wrong-key", "lsd", ":s3:"); err == nil {
		t.Fatal("the S3 server accepted a wrong secret key; the example's credentials would be meaningless")
	}

	ns := newNamespace(t)
	k(t, "-n", ns, "apply", "-f", example("s3-bucket", "usage.yaml"))
	out := waitPodDone(t, ns, "s3-client", clientTimeout)
	sw.lap("client pod used both buckets")
	mustContain(t, out, "new bucket: hello from a pod")
	mustContain(t, out, "existing bucket: Hello from a bucket that existed before the claim.")

	newPV := pvOf(t, ns, "s3-new")
	bucket := field(newPV, "spec", "csi", "volumeHandle").(string)
	existingPV := pvOf(t, ns, "s3-existing")
	if h := field(existingPV, "spec", "csi", "volumeHandle"); h != "existing-bucket" {
		t.Fatalf("brownfield volume handle = %v, want existing-bucket", h)
	}
	got, err := s3("", "cat", ":s3:"+bucket+"/hello.txt")
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, got, "hello from a pod")

	// Each creation pod returned the endpoint it reached the server at (the
	// Service's address, from its environment) as an attribute, which the
	// PV carries beside the class's parameters; the stager mounts from it.
	want := "http://" + strings.TrimSpace(k(t, "-n", srv, "get", "service", "s3-server", "-o", "jsonpath={.spec.clusterIP}")) + ":7070"
	for _, pv := range []map[string]interface{}{newPV, existingPV} {
		if got := field(pv, "spec", "csi", "volumeAttributes", "bucketEndpoint"); got != want {
			t.Fatalf("PV %s: volume attribute bucketEndpoint = %v, want %s (the creation pod's /pav/volume-attributes)", field(pv, "metadata", "name"), got, want)
		}
		if got := field(pv, "spec", "csi", "volumeAttributes", "secret"); got != "s3-credentials" {
			t.Fatalf("PV %s: the class's parameter secret = %v beside the attributes", field(pv, "metadata", "name"), got)
		}
	}
	k(t, "-n", ns, "delete", "pod", "s3-client", "--wait=true")
	applyStdin(t, ns, `apiVersion: v1
kind: Pod
metadata:
  name: s3-reader
spec:
  terminationGracePeriodSeconds: 0
  containers:
    - name: reader
      image: pav-test:latest
      imagePullPolicy: IfNotPresent
      command: [/bin/sh, -c, "cat /new/hello.txt && touch /tmp/read && sleep 3600"]
      readinessProbe:
        exec: {command: [test, -e, /tmp/read]}
        periodSeconds: 1
      volumeMounts:
        - {name: new, mountPath: /new}
  volumes:
    - name: new
      persistentVolumeClaim: {claimName: s3-new}
`)
	waitPodReady(t, ns, "s3-reader")
	staging := k(t, "get", "pods", "-A", "-l", protocol.LabelPhase+"="+string(protocol.PhaseStaging)+","+protocol.LabelVolume+"="+field(newPV, "metadata", "name").(string),
		"-o", "jsonpath={.items[*].spec.containers[0].command}")
	mustContain(t, staging, "endpoint="+want)
	sw.lap("a stager mounted the bucket from the attribute its creation pod returned")
	k(t, "-n", ns, "delete", "pod", "s3-reader", "--wait=true")
	noPavPodsLeft(t, "s3-bucket")
	sw.lap("unstaged (s3fs pods stopped)")
	k(t, "-n", ns, "delete", "pvc", "--all", "--wait=true")
	waitGone(t, 2*time.Minute, "pv", field(newPV, "metadata", "name").(string), "")
	waitGone(t, 2*time.Minute, "pv", field(existingPV, "metadata", "name").(string), "")
	buckets, err := s3("", "lsf", ":s3:")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buckets, bucket) {
		t.Fatalf("greenfield bucket %s still exists after its claim was deleted: %s", bucket, buckets)
	}
	mustContain(t, buckets, "existing-bucket")
	got, err = s3("", "cat", ":s3:existing-bucket/welcome.txt")
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, got, "existed before the claim")
	sw.lap("claims deleted: new bucket removed, existing bucket kept")
}
