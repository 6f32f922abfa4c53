//go:build e2e

package examples

// Tests of several nodes (make cluster-up NODES=3, the default). The local
// cluster's node 1 shares this machine's mount namespace; every other node has
// its own (its own /var/lib/kubelet and /var/lib/pav-examples), so a test
// looks at a node's files through hack/cluster/node-exec. The last node runs
// its kubelet with a non-default root (k0s's /var/lib/k0s/kubelet), carries
// the taint tolerated below, and is served by a node plugin installed with
// that kubelet directory (hack/cluster/kubelet-root-pool.sh).

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/albertofaria/pav/test/e2e/framework"
)

// mountsOf lists the mount points on node (its kubelet's view) that contain s.
func mountsOf(t *testing.T, node, s string) []string {
	t.Helper()
	out, err := onNode(t, node, "cat", "/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.Contains(f[4], s) {
			found = append(found, f[4])
		}
	}
	return found
}

// TestMultiNodeWaitForFirstConsumer: a node-local volume is created on the node
// the scheduler picked for its first client, and only there; a client pinned
// elsewhere stays Pending with the scheduler's volume node affinity message.
func TestMultiNodeWaitForFirstConsumer(t *testing.T) {
	nodes := threeNodes(t)
	installProvisioner(t, example("host-directory", "provisioner.yaml"), "host-directory")
	deleteAtEnd(t, "storageclass", "host-directory")
	ns := newNamespace(t)
	usage := readFile(t, example("host-directory", "usage.yaml"))
	applyStdin(t, ns, onlyDoc(t, usage, "kind: StorageClass")+"\n---\n"+onlyDoc(t, usage, "kind: PersistentVolumeClaim"))
	applyStdin(t, ns, framework.ClientPodManifest("writer", "host-directory", nodes.second, "Never", `echo "written on $(hostname)" > /data/hello && cat /data/hello`))
	mustContain(t, waitPodDone(t, ns, "writer", clientTimeout), "written on writer")

	pv := pvOf(t, ns, "host-directory")
	pvName := field(pv, "metadata", "name").(string)
	if aff := kq("get", "pv", pvName, "-o", "jsonpath={.spec.nodeAffinity.required.nodeSelectorTerms[*].matchExpressions[*].values}"); aff != `["`+nodes.second+`"]` {
		t.Fatalf("PV %s node affinity names %s, not %s", pvName, aff, nodes.second)
	}
	dir := filepath.Join("/var/lib/pav-examples/host-directory", field(pv, "spec", "csi", "volumeHandle").(string))
	out, err := onNode(t, nodes.second, "cat", dir+"/hello")
	if err != nil {
		t.Fatalf("the volume's directory on %s: %v", nodes.second, err)
	}
	mustContain(t, out, "written on writer")
	for _, other := range []string{nodes.first, nodes.altRoot} {
		if out, err := onNode(t, other, "ls", "-d", dir); err == nil {
			t.Fatalf("the volume's directory exists on %s too: %s", other, out)
		}
	}

	// A client pinned to another node cannot be scheduled: the scheduler says why.
	applyStdin(t, ns, framework.ClientPodManifest("elsewhere", "host-directory", nodes.altRoot, "Never", "cat /data/hello"))
	framework.Eventually(t, time.Minute, "the scheduler to refuse pod elsewhere for the volume's node affinity", func() (bool, string) {
		msg := kq("-n", ns, "get", "pod", "elsewhere", "-o", `jsonpath={.status.conditions[?(@.type=="PodScheduled")].message}`)
		// the wording of Kubernetes 1.37, then of earlier releases
		return strings.Contains(msg, "didn't match PersistentVolume's node affinity") || strings.Contains(msg, "volume node affinity conflict"), msg
	})
	if node := kq("-n", ns, "get", "pod", "elsewhere", "-o", "jsonpath={.spec.nodeName}"); node != "" {
		t.Fatalf("pod elsewhere was bound to %s", node)
	}

	k(t, "-n", ns, "delete", "pod", "--all", "--wait=true")
	k(t, "-n", ns, "delete", "pvc", "host-directory", "--wait=true")
	waitGone(t, 2*time.Minute, "pv", pvName, "")
	if out, err := onNode(t, nodes.second, "ls", "-d", dir); err == nil {
		t.Fatalf("the volume's directory is still on %s after its claim was deleted: %s", nodes.second, out)
	}
	noPavPodsLeft(t, "host-directory")
}

// sshfsNodesProvisioner is the sshfs example under another name, with an
// unstaging pod, so that where unstaging runs can be seen.
func sshfsNodesProvisioner(t *testing.T) string {
	t.Helper()
	prov := strings.Replace(readFile(t, example("sshfs", "provisioner.yaml")), "\n  name: sshfs\n", "\n  name: sshfs-nodes\n", 1)
	return prov + `  volumeUnstaging:
    podTemplate:
      metadata:
        namespace: "{{ params.namespace }}"
      spec:
        restartPolicy: Never
        containers:
          - name: unstage
            image: pav-test:latest
            imagePullPolicy: IfNotPresent
            command: [/bin/true]
`
}

// pavPodNodes watches PaV's pods of a phase in a namespace and records the
// node of each, until stop is called.
func pavPodNodes(t *testing.T, c kubernetes.Interface, ns, provisioner, phase string) (stop func() map[string]string) {
	t.Helper()
	sel := metav1.ListOptions{LabelSelector: "pav.albertofaria.github.io/provisioner=" + provisioner + ",pav.albertofaria.github.io/phase=" + phase}
	// From a list's resource version, through a RetryWatcher: a plain watch
	// from "now" can fail at once ("Too large resource version") while the API
	// server's watch cache catches up, or be closed mid-test, missing pods.
	list, err := c.CoreV1().Pods(ns).List(context.Background(), sel)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]string{}
	record := func(p *corev1.Pod) {
		if p.Spec.NodeName != "" {
			mu.Lock()
			seen[p.Name] = p.Spec.NodeName
			mu.Unlock()
		}
	}
	for i := range list.Items {
		record(&list.Items[i])
	}
	ctx, cancel := context.WithCancel(context.Background())
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = sel.LabelSelector
			return c.CoreV1().Pods(ns).Watch(ctx, o)
		},
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	var watchErr error
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			switch p := ev.Object.(type) {
			case *corev1.Pod:
				record(p)
			case *metav1.Status:
				if ev.Type == watch.Error {
					watchErr = fmt.Errorf("watching %s pods: %s", phase, p.Message)
					return
				}
			}
		}
	}()
	return func() map[string]string {
		cancel()
		w.Stop()
		<-done
		if watchErr != nil {
			t.Fatal(watchErr)
		}
		return seen
	}
}

func clientset(t *testing.T) kubernetes.Interface {
	t.Helper()
	cfg, err := framework.LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// nodeAgentOn returns the node plugin's pod on node (name, UID, restarts).
func nodeAgentOn(t *testing.T, c kubernetes.Interface, node string) *corev1.Pod {
	t.Helper()
	pods, err := c.CoreV1().Pods("pav").List(context.Background(), metav1.ListOptions{
		LabelSelector: "app.kubernetes.io/component=node-agent", FieldSelector: "spec.nodeName=" + node})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("the node plugin's pod on %s: %v (%d pods)", node, err, len(pods.Items))
	}
	return &pods.Items[0]
}

func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, s := range p.Status.ContainerStatuses {
		n += s.RestartCount
	}
	return n
}

// killContainerProcesses kill -9s the processes of a pod's containers (this
// machine's PID namespace holds every node's; a pod's are those in its cgroup).
func killContainerProcesses(t *testing.T, pod *corev1.Pod) int {
	t.Helper()
	killed := 0
	for _, pid := range containerPIDs(pod) {
		if p, err := os.FindProcess(pid); err == nil && p.Kill() == nil {
			killed++
		}
	}
	return killed
}

// containerPIDs: the processes of a pod's containers (found by their cgroup,
// in this machine's PID namespace, where every node's pods run).
func containerPIDs(pod *corev1.Pod) []int {
	procs, _ := filepath.Glob("/proc/[0-9]*/cgroup")
	uid := strings.ReplaceAll(string(pod.UID), "-", "_") // the systemd driver's spelling; cgroupfs keeps dashes
	var pids []int
	for _, f := range procs {
		b, err := os.ReadFile(f)
		if err != nil || !(strings.Contains(string(b), "pod"+string(pod.UID)) || strings.Contains(string(b), "pod"+uid)) {
			continue
		}
		var pid int
		if _, err := fmt.Sscanf(f, "/proc/%d/cgroup", &pid); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// processStates describes what each process of a pod's containers is doing:
// its command line, state and kernel stack (where a hung syscall waits).
func processStates(pod *corev1.Pod) string {
	var b strings.Builder
	for _, pid := range containerPIDs(pod) {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		state := ""
		for _, line := range strings.Split(string(status), "\n") {
			if strings.HasPrefix(line, "State:") {
				state = strings.TrimSpace(strings.TrimPrefix(line, "State:"))
			}
		}
		stack, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stack", pid))
		fmt.Fprintf(&b, "pid %d %q (%s):\n%s", pid, strings.ReplaceAll(string(cmdline), "\x00", " "), state, stack)
	}
	return b.String()
}

// TestMultiNodeSharedVolumeAcrossNodes: two clients of one ReadWriteMany
// claim on two nodes at once, each reading the other's writes, with staging
// and unstaging pods on each client's node; killing the node plugin of one
// node leaves the other node's volume alone, and the killed node's volume is
// intact once its plugin is back.
func TestMultiNodeSharedVolumeAcrossNodes(t *testing.T) {
	nodes := threeNodes(t)
	c := clientset(t)
	sw := framework.NewStopwatch(t)
	provFile := filepath.Join(t.TempDir(), "provisioner.yaml")
	if err := os.WriteFile(provFile, []byte(sshfsNodesProvisioner(t)), 0o600); err != nil {
		t.Fatal(err)
	}
	installProvisioner(t, provFile, "sshfs-nodes")
	srv := sshServer(t)
	ns := newNamespace(t)
	deleteAtEnd(t, "storageclass", "sshfs-nodes")
	applyStdin(t, ns, `apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: sshfs-nodes
provisioner: sshfs-nodes
parameters: {namespace: `+srv+`, secret: sshfs-key, root: /srv/sshfs}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: sshfs-nodes
spec:
  storageClassName: sshfs-nodes
  accessModes: [ReadWriteMany]
  resources: {requests: {storage: 1Gi}}
`)

	// Each client writes its file, waits for the other's words, then serves
	// until told to stop. (Waiting only for the file raced its writer: a
	// reader that saw it created but still empty printed nothing, and the
	// test waited for those words in its log in vain.)
	exchange := func(mine, theirs string) string {
		return fmt.Sprintf(`echo "from $(hostname)" > /data/%s && until grep -q from /data/%s 2>/dev/null; do sleep 0.2; done && cat /data/%s && sleep 3600`, mine, theirs, theirs)
	}
	sw.Lap("provisioner, SSH server, claim")
	applyStdin(t, ns, framework.ClientPodManifest("client-a", "sshfs-nodes", nodes.second, "Never", exchange("a", "b")))
	applyStdin(t, ns, framework.ClientPodManifest("client-b", "sshfs-nodes", nodes.altRoot, "Never", exchange("b", "a")))
	for client, other := range map[string]string{"client-a": "client-b", "client-b": "client-a"} {
		start, described := time.Now(), false
		framework.Eventually(t, clientTimeout, client+" to read what "+other+" wrote", func() (bool, string) {
			out := kq("-n", ns, "logs", client)
			if strings.Contains(out, "from "+other) {
				return true, out
			}
			// Should this wait take long again, log once what the client's
			// mount shows and where its and the staging pods' processes wait.
			if !described && time.Since(start) > 30*time.Second {
				described = true
				t.Logf("%s has not read %s's file for 30 s:\n%s", client, other, describeSSHFSWait(c, ns, srv, client))
			}
			return false, out
		})
		sw.Lap(client + " read what " + other + " wrote")
	}
	stagingOn := map[string]*corev1.Pod{}
	staging, err := c.CoreV1().Pods(srv).List(context.Background(), metav1.ListOptions{LabelSelector: "pav.albertofaria.github.io/provisioner=sshfs-nodes,pav.albertofaria.github.io/phase=staging"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range staging.Items {
		stagingOn[staging.Items[i].Spec.NodeName] = &staging.Items[i]
	}
	if len(staging.Items) != 2 || stagingOn[nodes.second] == nil || stagingOn[nodes.altRoot] == nil {
		t.Fatalf("staging pods: want one on %s and one on %s, got %d: %v", nodes.second, nodes.altRoot, len(staging.Items), stagingOn)
	}

	// kill -9 the node plugin of the second node while both volumes are in use.
	agent2, agent3 := nodeAgentOn(t, c, nodes.second), nodeAgentOn(t, c, nodes.altRoot)
	if killContainerProcesses(t, agent2) == 0 {
		t.Fatalf("no process of %s found to kill", agent2.Name)
	}
	k(t, "-n", ns, "exec", "client-b", "--", "sh", "-c", "echo during > /data/b-during && cat /data/a")
	sw.Lap("client-b wrote and read, node 2's plugin killed")
	framework.Eventually(t, 2*time.Minute, "the node plugin on "+nodes.second+" to restart and be Ready", func() (bool, string) {
		p := nodeAgentOn(t, c, nodes.second)
		ready, _ := framework.PodRunningReady(p)
		return p.UID == agent2.UID && restarts(p) > restarts(agent2) && ready, fmt.Sprintf("restarts %d ready %v", restarts(p), ready)
	})
	if p := nodeAgentOn(t, c, nodes.altRoot); p.UID != agent3.UID || restarts(p) != restarts(agent3) {
		t.Fatalf("the node plugin on %s was disturbed: uid %s→%s, restarts %d→%d", nodes.altRoot, agent3.UID, p.UID, restarts(agent3), restarts(p))
	}
	sw.Lap("node 2's plugin back")
	mustContain(t, k(t, "-n", ns, "exec", "client-a", "--", "sh", "-c", "echo after > /data/a-after && cat /data/b-during"), "during")
	mustContain(t, k(t, "-n", ns, "exec", "client-b", "--", "cat", "/data/a-after"), "after")
	for node, old := range stagingOn {
		p, err := c.CoreV1().Pods(srv).Get(context.Background(), old.Name, metav1.GetOptions{})
		if err != nil || p.UID != old.UID || p.DeletionTimestamp != nil {
			t.Fatalf("the staging pod on %s did not survive the node plugin's restart: %v", node, err)
		}
	}

	// Unstaging runs on each client's node.
	stop := pavPodNodes(t, c, srv, "sshfs-nodes", "unstaging")
	pvName := field(pvOf(t, ns, "sshfs-nodes"), "metadata", "name").(string)
	k(t, "-n", ns, "delete", "pod", "client-a", "client-b", "--wait=true")
	sw.Lap("clients deleted")
	noPavPodsLeft(t, "sshfs-nodes")
	sw.Lap("unstaged")
	unstagedOn := map[string]bool{}
	for _, node := range stop() {
		unstagedOn[node] = true
	}
	if len(unstagedOn) != 2 || !unstagedOn[nodes.second] || !unstagedOn[nodes.altRoot] {
		t.Fatalf("unstaging pods ran on %v, want %s and %s", unstagedOn, nodes.second, nodes.altRoot)
	}
	for _, node := range []string{nodes.second, nodes.altRoot} {
		if m := mountsOf(t, node, pvName); len(m) > 0 {
			t.Fatalf("mounts of %s left on %s: %v", pvName, node, m)
		}
	}
	k(t, "-n", ns, "delete", "pvc", "sshfs-nodes", "--wait=true")
	waitGone(t, 2*time.Minute, "pv", pvName, "")
	sw.Lap("claim and volume deleted")
}

// describeSSHFSWait: what a client of the sshfs-nodes volume lists in /data
// (or that listing hangs), and the processes of that client and of the
// volume's staging pods with their kernel stacks.
func describeSSHFSWait(c kubernetes.Interface, ns, srv, client string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ls, err := framework.Kubectl(ctx, "-n", ns, "exec", client, "--", "ls", "-la", "/data")
	out := fmt.Sprintf("%s's /data: %s%v", client, ls, err)
	if p, err := c.CoreV1().Pods(ns).Get(ctx, client, metav1.GetOptions{}); err == nil {
		out += fmt.Sprintf("\n%s's processes:\n%s", client, processStates(p))
	}
	staging, err := c.CoreV1().Pods(srv).List(ctx, metav1.ListOptions{LabelSelector: "pav.albertofaria.github.io/provisioner=sshfs-nodes,pav.albertofaria.github.io/phase=staging"})
	for i := 0; err == nil && i < len(staging.Items); i++ {
		out += fmt.Sprintf("\nstaging pod %s on %s:\n%s", staging.Items[i].Name, staging.Items[i].Spec.NodeName, processStates(&staging.Items[i]))
	}
	return out
}

// TestMultiNodeNodeRemoved: a node goes away (kubelet stopped, Node deleted)
// while a volume is staged there; the claim can still be deleted, PaV
// releases what it cannot unstage with a NodeGone Event, and once the node is
// back nothing of the volume stays mounted there.
func TestMultiNodeNodeRemoved(t *testing.T) {
	nodes := threeNodes(t)
	c := clientset(t)
	node := nodes.altRoot
	installProvisioner(t, example("hello-world", "provisioner.yaml"), "hello-world")
	deleteAtEnd(t, "storageclass", "hello-world")
	ns := newNamespace(t)
	usage := readFile(t, example("hello-world", "usage.yaml"))
	applyStdin(t, ns, onlyDoc(t, usage, "kind: StorageClass")+"\n---\n"+onlyDoc(t, usage, "kind: PersistentVolumeClaim"))
	applyStdin(t, ns, strings.Replace(framework.ClientPodManifest("reader", "hello-world", node, "Never", "cat /data/greeting && sleep 3600"), "mountPath: /data}", "mountPath: /data, readOnly: true}", 1))
	framework.Eventually(t, clientTimeout, "pod reader to read the greeting", func() (bool, string) {
		out := kq("-n", ns, "logs", "reader")
		return strings.Contains(out, "Hello world!"), out
	})
	pvName := field(pvOf(t, ns, "hello-world"), "metadata", "name").(string)

	nodeCtl := func(verb string) {
		t.Helper()
		if out, err := exec.Command(filepath.Join(repoRoot, "hack/cluster/node.sh"), verb, node).CombinedOutput(); err != nil {
			t.Fatalf("node.sh %s %s: %v: %s", verb, node, err, out)
		}
	}
	nodeCtl("stop")
	t.Cleanup(func() {
		// The node comes back; kubelet, no longer knowing the client pod, unpublishes its volume.
		nodeCtl("start")
		framework.Eventually(t, 3*time.Minute, "node "+node+" to be Ready again", func() (bool, string) {
			s := kq("get", "node", node, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
			return s == "True", "Ready=" + s
		})
		framework.Eventually(t, 3*time.Minute, "the node plugin on "+node+" to be Ready", func() (bool, string) {
			s := kq("-n", "pav", "get", "pods", "-l", "app.kubernetes.io/component=node-agent", "--field-selector", "spec.nodeName="+node, "-o", `jsonpath={.items[*].status.conditions[?(@.type=="Ready")].status}`)
			return s == "True", "Ready=" + s
		})
		framework.Eventually(t, 3*time.Minute, "no mount of "+pvName+" left on "+node, func() (bool, string) {
			m := mountsOf(t, node, pvName)
			return len(m) == 0, strings.Join(m, " ")
		})
	})
	k(t, "delete", "node", node, "--wait=true")
	// What an administrator does with the pods of a node that is gone.
	k(t, "-n", ns, "delete", "pod", "reader", "--grace-period=0", "--force", "--wait=true")
	k(t, "-n", ns, "delete", "pvc", "hello-world", "--wait=true", "--timeout=3m")
	waitGone(t, 2*time.Minute, "pv", pvName, "")
	noPavPodsLeft(t, "hello-world")
	framework.Eventually(t, time.Minute, "a NodeGone Event on "+pvName, func() (bool, string) {
		evs, err := c.CoreV1().Events("").List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + pvName + ",reason=NodeGone"})
		if err != nil || len(evs.Items) == 0 {
			return false, fmt.Sprint(err)
		}
		return strings.Contains(evs.Items[0].Message, node), evs.Items[0].Message
	})
}
