//go:build e2e

package examples

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/test/e2e/framework"
)

// TestSSHFS runs the example's SSH server, mounts a new remote directory per
// claim with sshfs, and checks the data lands on the server and the directory
// goes when the claim does.
func TestSSHFS(t *testing.T) {
	sw := framework.NewStopwatch(t)
	installProvisioner(t, example("sshfs", "provisioner.yaml"), "sshfs")
	deleteAtEnd(t, "storageclass", "sshfs")
	srv := sshServer(t)
	sw.Lap("SSH server Ready")

	ns := newNamespace(t)
	k(t, "-n", ns, "apply", "-f", example("sshfs", "usage.yaml"))
	out := waitPodDone(t, ns, "sshfs-client", clientTimeout)
	sw.Lap("client pod wrote through sshfs")
	mustContain(t, out, "hello over ssh")

	pv := pvOf(t, ns, "sshfs")
	dir := "/srv/sshfs/" + field(pv, "spec", "csi", "volumeHandle").(string)
	mustContain(t, k(t, "-n", srv, "exec", "ssh-server", "--", "cat", dir+"/hello"), "hello over ssh")

	k(t, "-n", ns, "delete", "pod", "sshfs-client", "--wait=true")
	noPavPodsLeft(t, "sshfs")
	sw.Lap("unstaged (sshfs pod stopped)")

	k(t, "-n", ns, "delete", "pvc", "sshfs", "--wait=true")
	waitGone(t, 2*time.Minute, "pv", field(pv, "metadata", "name").(string), "")
	if out := kq("-n", srv, "exec", "ssh-server", "--", "ls", "-A", "/srv/sshfs"); strings.TrimSpace(out) != "" {
		t.Fatalf("remote directories left after the claim was deleted: %s", out)
	}
	sw.Lap("claim deleted, remote directory removed")
}

// TestSSHFSRecovery kills the FUSE daemons of an sshfs volume in use by two
// writing clients, one whose mount is private to its container and one with
// mountPropagation HostToContainer. PaV stages the volume again and the same
// containers (same container ID, no restart) write again; every line
// acknowledged before the kill and after the recovery is on the server.
// A third client, read-only, that bound its volume again in a user and
// mount namespace of its own, is left alone (VolumeNotReplaced, not
// retried) and never gets a writable volume.
func TestSSHFSRecovery(t *testing.T) {
	sw := framework.NewStopwatch(t)
	installProvisioner(t, example("sshfs", "provisioner.yaml"), "sshfs")
	deleteAtEnd(t, "storageclass", "sshfs")
	srv := sshServer(t)
	ns, writers := sshfsWriters(t)
	startOwnNamespaceReader(t, ns, "reader-own-namespace", "sshfs")
	sw.Lap("two clients writing through sshfs, one reading in its own namespace")

	killDaemonsAndWaitRecovered(t, ns, writers, 1, "sshfs", "sshfs")
	checkOwnNamespaceReader(t, ns, "reader-own-namespace", "VolumeRecovered")
	sw.Lap("both clients write again, the reader cannot")

	k(t, "-n", ns, "delete", "pod", "reader-own-namespace", "--wait=true")
	sshfsDone(t, srv, ns, writers)
	sw.Lap("unstaged, claim deleted")
}

// TestGocryptfs stacks the encryption middleware on a host-directory claim:
// the client sees plaintext, the inner volume holds only ciphertext.
func TestGocryptfs(t *testing.T) {
	sw := framework.NewStopwatch(t)
	ns := gocryptfsNamespace(t)
	k(t, "-n", ns, "apply", "-f", example("gocryptfs", "usage.yaml"))
	out := waitPodDone(t, ns, "gocryptfs-client", clientTimeout)
	sw.Lap("client pod wrote through gocryptfs")
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
	sw.Lap("unstaged (gocryptfs pod stopped)")
	// The encrypted claim goes before the inner one: its deletion pod mounts the inner claim.
	k(t, "-n", ns, "delete", "pvc", "gocryptfs", "--wait=true")
	waitGone(t, 2*time.Minute, "pv", field(outer, "metadata", "name").(string), "")
	if existsOnNode(t, node, cipherDir) {
		t.Fatalf("encrypted directory %s still exists on %s after the claim was deleted", cipherDir, node)
	}
	sw.Lap("claim deleted, ciphertext removed")
}

// TestS3Bucket runs versitygw, gets a new bucket for one claim and the existing
// bucket for another, and checks objects and bucket lifetimes through the S3 API.
func TestS3Bucket(t *testing.T) {
	sw := framework.NewStopwatch(t)
	installProvisioner(t, example("s3-bucket", "provisioner.yaml"), "s3-bucket")
	deleteAtEnd(t, "storageclass", "s3-bucket", "s3-existing-bucket")
	srv := namespaceNamed(t, "pav-example-s3")
	k(t, "-n", srv, "create", "secret", "generic", "s3-credentials",
		"--from-literal=accessKeyId=pav-example", "--from-literal=secretAccessKey="+randomSecret(t))
	k(t, "apply", "-f", example("s3-bucket", "server.yaml"))
	waitPodReady(t, srv, "s3-server")
	sw.Lap("S3 server Ready")

	// s3 runs rclone inside the server pod with the given secret key ("" = the real one).
	s3 := func(secretKey string, args ...string) (string, error) {
		if secretKey == "" {
			secretKey = "$ROOT_SECRET_KEY"
		}
		script := `AWS_ACCESS_KEY_ID=$ROOT_ACCESS_KEY AWS_SECRET_ACCESS_KEY=` + secretKey +
			` rclone --config /dev/null --s3-provider Other --s3-env-auth --s3-endpoint http://127.0.0.1:7070 --s3-region us-east-1 --retries 1 --low-level-retries 1 "$@"`
		// container "seed" has rclone (the server's own container has only busybox)
		return framework.Kubectl(t.Context(), append([]string{"-n", srv, "exec", "s3-server", "-c", "seed", "--", "bash", "-c", script, "s3"}, args...)...)
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
	sw.Lap("client pod used both buckets")
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
	sw.Lap("a stager mounted the bucket from the attribute its creation pod returned")
	k(t, "-n", ns, "delete", "pod", "s3-reader", "--wait=true")
	noPavPodsLeft(t, "s3-bucket")
	sw.Lap("unstaged (s3fs pods stopped)")
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
	sw.Lap("claims deleted: new bucket removed, existing bucket kept")
}
