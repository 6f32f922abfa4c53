package framework

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// NodesFile lists the local cluster's nodes (hack/cluster/lib.sh documents its
// columns); a node whose mount namespace column is "-" shares this machine's.
const NodesFile = "/var/lib/pav-cluster/nodes.tsv"

// HostnameLabel is the node label a pod's nodeSelector pins it with.
const HostnameLabel = "kubernetes.io/hostname"

// HostNode returns the node whose files this machine sees at the same paths:
// on the local cluster the node sharing this machine's mount namespace (node
// 1), on a one-node cluster without nodes.tsv its only node. Tests that read
// a node's files (host paths, mounts, /pav directories, kubelet metrics)
// pin their pods there with PinToNode.
func HostNode(ctx context.Context, c kubernetes.Interface) (string, error) {
	f, err := os.Open(NodesFile)
	if err == nil {
		defer f.Close()
		s := bufio.NewScanner(f)
		for s.Scan() {
			cols := strings.Split(s.Text(), "\t")
			if !strings.HasPrefix(s.Text(), "#") && len(cols) >= 4 && cols[3] == "-" {
				return cols[0], nil
			}
		}
		if err := s.Err(); err != nil {
			return "", fmt.Errorf("reading %s: %w", NodesFile, err)
		}
		return "", fmt.Errorf("%s names no node in this machine's mount namespace", NodesFile)
	}
	nodes, lerr := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if lerr != nil {
		return "", fmt.Errorf("listing nodes: %w", lerr)
	}
	if len(nodes.Items) != 1 {
		return "", fmt.Errorf("no %s (%v) and %d nodes: cannot tell which node is this machine", NodesFile, err, len(nodes.Items))
	}
	return nodes.Items[0].Name, nil
}

// PinToNode makes pod run on node, through the scheduler (a nodeSelector, not
// spec.nodeName, so volume binding and node affinity still apply).
func PinToNode(pod *corev1.Pod, node string) *corev1.Pod {
	if pod.Spec.NodeSelector == nil {
		pod.Spec.NodeSelector = map[string]string{}
	}
	pod.Spec.NodeSelector[HostnameLabel] = node
	return pod
}

// HostNode is HostNode for the test's cluster, failing the test on error.
func (f *Framework) HostNode() string {
	f.T.Helper()
	node, err := HostNode(f.Ctx, f.Client)
	if err != nil {
		f.T.Fatal(err)
	}
	return node
}

// KubeletRootLabel marks the local cluster's nodes whose kubelet root is not
// the default; its taint keeps other pods off them (hack/cluster/lib.sh).
const KubeletRootLabel = "pav-cluster.local/kubelet-root"

// ClientPodManifest is a pav-test pod on node (tolerating KubeletRootLabel's
// taint) running script with claim at /data.
func ClientPodManifest(name, claim, node string, restart corev1.RestartPolicy, script string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  restartPolicy: %s
  terminationGracePeriodSeconds: 0
  nodeSelector: {kubernetes.io/hostname: %s}
  tolerations: [{key: %s, operator: Exists, effect: NoSchedule}]
  containers:
    - name: client
      image: pav-test:latest
      imagePullPolicy: IfNotPresent
      command: [/bin/sh, -c, %q]
      volumeMounts: [{name: data, mountPath: /data}]
  volumes:
    - name: data
      persistentVolumeClaim: {claimName: %s}
`, name, restart, node, KubeletRootLabel, script, claim)
}
