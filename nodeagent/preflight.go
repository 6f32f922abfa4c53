package nodeagent

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
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
	r := decidePreflight(preflightInput{Kernel: probeKernel(), KubeletDir: kubeletDir, Mounts: table})
	node := &corev1.ObjectReference{Kind: "Node", Name: nodeName, UID: types.UID(nodeName)} // as kubelet refers to its Node
	for _, p := range r.Problems {
		klog.ErrorS(nil, "Preflight: this node cannot serve PaV volumes; not ready", "problem", p)
		recorder.Event(node, corev1.EventTypeWarning, ReasonNodeNotSupported, "PaV's node plugin is not ready: "+p)
	}
	for _, w := range r.Warnings {
		klog.InfoS("Preflight: a PaV feature is unavailable on this node", "warning", w)
		recorder.Event(node, corev1.EventTypeWarning, ReasonNodeFeaturesMissing, w)
	}
	return r.notReady()
}

// Reasons of the Warning Events on this node's Node when the preflight
// finds it falls short.
const (
	ReasonNodeNotSupported    = "PavNodeNotSupported"
	ReasonNodeFeaturesMissing = "PavNodeFeaturesMissing"
)

// kernelFeatures are the system calls the node plugin relies on, as the
// running kernel answered a probe of each (a feature is missing only if
// the kernel said so: ENOSYS, or EINVAL for an unknown flag). Probing
// instead of comparing versions counts features that distributions
// backported to older kernels.
type kernelFeatures struct {
	Release string // uname -r, for messages
	// Every publish: descriptors resolved in the staging pod's /pav
	// (openat2, Linux 5.6), volumes cloned detached (open_tree, 5.2),
	// given their flags before they are attached (mount_setattr, 5.12),
	// then attached (move_mount, 5.2).
	Openat2, OpenTree, MountSetattr, MoveMount bool
	// Recovery and rolling replacement of stagings in running containers:
	// the new volume placed beneath the old (move_mount
	// MOVE_MOUNT_BENEATH, 6.5).
	MoveMountBeneath bool
}

// preflightInput is what the preflight decides on.
type preflightInput struct {
	Kernel     kernelFeatures
	KubeletDir string
	// Mounts: the node plugin's mount table (/proc/self/mountinfo).
	Mounts []mount.MountInfo
}

// preflightResult: with Problems the node plugin cannot publish volumes
// and reports not ready; Warnings name features it goes without.
type preflightResult struct {
	Problems, Warnings []string
}

// notReady is the readiness error of the problems (nil: none).
func (r preflightResult) notReady() error {
	if len(r.Problems) == 0 {
		return nil
	}
	return errors.New("this node cannot serve PaV volumes: " + strings.Join(r.Problems, "; "))
}

// decidePreflight judges the node. A missing required system call, or a
// kubelet directory whose mount in the node plugin's namespace is not
// shared (the volume without mountPropagation: Bidirectional, or a host
// directory on a private mount), is a problem: the node plugin's mounts
// would fail, or stay in its own namespace where kubelet and the client
// pods never see them. A kernel without MOVE_MOUNT_BENEATH only loses the
// replacement of a volume in running containers (recovery, rolling
// updates); the node stays ready, since every publish still works and an
// unready DaemonSet would stall every rollout on such nodes.
func decidePreflight(in preflightInput) preflightResult {
	var r preflightResult
	k := in.Kernel
	var missing []string
	for _, f := range []struct {
		ok   bool
		what string
	}{
		{k.Openat2, "openat2 (Linux 5.6)"},
		{k.OpenTree, "open_tree (Linux 5.2)"},
		{k.MoveMount, "move_mount (Linux 5.2)"},
		{k.MountSetattr, "mount_setattr (Linux 5.12)"},
	} {
		if !f.ok {
			missing = append(missing, f.what)
		}
	}
	if len(missing) > 0 {
		r.Problems = append(r.Problems, fmt.Sprintf("kernel %s lacks %s, which publishing a volume needs: PaV needs Linux 5.12 or newer",
			k.Release, strings.Join(missing, ", ")))
	}
	if k.MoveMount && !k.MoveMountBeneath {
		r.Warnings = append(r.Warnings, fmt.Sprintf("kernel %s lacks move_mount's MOVE_MOUNT_BENEATH (Linux 6.5): a volume whose staging pod stopped is restaged, but the client pods' containers keep the dead mount until they restart, and updateStrategy RollingUpdate cannot replace stagings in use",
			k.Release))
	}
	if p := propagationProblem(in.KubeletDir, in.Mounts); p != "" {
		r.Problems = append(r.Problems, p)
	}
	return r
}

// propagationProblem says why mounts the node plugin makes under
// kubeletDir would not reach the host ("" if they would): the mount
// kubeletDir is on must be shared (mountinfo's "shared:N"), which
// mountPropagation: Bidirectional on a shared host mount gives.
func propagationProblem(kubeletDir string, table []mount.MountInfo) string {
	dir := filepath.Clean(kubeletDir)
	var on *mount.MountInfo
	for i := range table {
		mp := filepath.Clean(mounts.UnescapeMountInfo(table[i].MountPoint))
		// The last of equally long matches is the mount on top.
		if isUnder(dir, mp) && (on == nil || len(mp) >= len(filepath.Clean(mounts.UnescapeMountInfo(on.MountPoint)))) {
			on = &table[i]
		}
	}
	if on == nil {
		return fmt.Sprintf("no mount holds %s in the node plugin's mount table", dir)
	}
	for _, f := range on.OptionalFields {
		if strings.HasPrefix(f, "shared:") {
			return ""
		}
	}
	propagation := "private"
	for _, f := range on.OptionalFields {
		if strings.HasPrefix(f, "master:") {
			propagation = "a slave (mountPropagation: HostToContainer)"
		}
	}
	return fmt.Sprintf("%s is on mount %s, which is %s, not shared: volumes the node plugin mounts there would not reach kubelet or the client pods; mount %s into the node plugin with mountPropagation: Bidirectional (the chart and deployment.yaml do), and make it a shared mount on the host (mount --make-rshared)",
		dir, mounts.UnescapeMountInfo(on.MountPoint), propagation, dir)
}

// isUnder: path is dir or below it.
func isUnder(path, dir string) bool {
	return path == dir || dir == "/" || strings.HasPrefix(path, dir+"/")
}

// probeKernel asks the running kernel for each feature the node plugin
// uses, with arguments that can do nothing (invalid descriptors): a
// kernel without the call answers ENOSYS, one without the flag EINVAL
// before it looks at the descriptors. Anything else (EBADF, ENOENT, or
// EPERM, which says nothing either way) counts as present.
func probeKernel() kernelFeatures {
	var k kernelFeatures
	var uts unix.Utsname
	if err := unix.Uname(&uts); err == nil {
		k.Release = unix.ByteSliceToString(uts.Release[:])
	}
	present := func(err error) bool { return !errors.Is(err, unix.ENOSYS) }
	_, err := unix.Openat2(-1, "", &unix.OpenHow{})
	k.Openat2 = present(err)
	_, err = unix.OpenTree(-1, "", unix.AT_EMPTY_PATH)
	k.OpenTree = present(err)
	k.MountSetattr = present(unix.MountSetattr(-1, "", unix.AT_EMPTY_PATH, &unix.MountAttr{}))
	err = unix.MoveMount(-1, "", -1, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
	k.MoveMount = present(err)
	err = unix.MoveMount(-1, "", -1, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH|mounts.MoveMountBeneath)
	k.MoveMountBeneath = k.MoveMount && present(err) && !errors.Is(err, unix.EINVAL)
	return k
}
