package nodeagent

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	mount "k8s.io/mount-utils"

	"github.com/albertofaria/pav/nodeagent/mounts"
)

// runPreflight checks this node once at start: what falls short is logged
// and reported as a Warning Event on the Node; the error (nil: none) is
// why the node plugin is not ready.
func runPreflight(kubeletDir, nodeName string, recorder record.EventRecorder) error {
	table, err := mount.ParseMountInfo("/proc/self/mountinfo")
	if err != nil {
		return fmt.Errorf("preflight: reading the mount table: %w", err)
	}
	r := mounts.DecidePreflight(mounts.PreflightInput{Kernel: mounts.ProbeKernel(), KubeletDir: kubeletDir, Mounts: table})
	node := &corev1.ObjectReference{Kind: "Node", Name: nodeName, UID: types.UID(nodeName)} // as kubelet refers to its Node
	for _, p := range r.Problems {
		klog.ErrorS(nil, "Preflight: this node cannot serve PaV volumes; not ready", "problem", p)
		recorder.Event(node, corev1.EventTypeWarning, ReasonNodeNotSupported, "PaV's node plugin is not ready: "+p)
	}
	for _, w := range r.Warnings {
		klog.InfoS("Preflight: a PaV feature is unavailable on this node", "warning", w)
		recorder.Event(node, corev1.EventTypeWarning, ReasonNodeFeaturesMissing, w)
	}
	return r.NotReady()
}

// Reasons of the Warning Events on this node's Node when the preflight
// finds it falls short.
const (
	ReasonNodeNotSupported    = "PavNodeNotSupported"
	ReasonNodeFeaturesMissing = "PavNodeFeaturesMissing"
)
