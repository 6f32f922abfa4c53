// The node plugin's start-up check of the kernel and of the kubelet
// directory's mount propagation.

package mounts

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
	mount "k8s.io/mount-utils"
)

// KernelFeatures are the system calls the node plugin relies on, as the
// running kernel answered a probe of each (a feature is missing only if
// the kernel said so: ENOSYS, or EINVAL for an unknown flag). Probing
// instead of comparing versions counts features that distributions
// backported to older kernels.
type KernelFeatures struct {
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

// PreflightInput is what the preflight decides on.
type PreflightInput struct {
	Kernel     KernelFeatures
	KubeletDir string
	// Mounts: the node plugin's mount table (/proc/self/mountinfo).
	Mounts []mount.MountInfo
}

// PreflightResult: with Problems the node plugin cannot publish volumes
// and reports not ready; Warnings name features it goes without.
type PreflightResult struct {
	Problems, Warnings []string
}

// NotReady is the readiness error of the problems (nil: none).
func (r PreflightResult) NotReady() error {
	if len(r.Problems) == 0 {
		return nil
	}
	return errors.New("this node cannot serve PaV volumes: " + strings.Join(r.Problems, "; "))
}

// DecidePreflight judges the node. A missing required system call, or a
// kubelet directory whose mount in the node plugin's namespace is not
// shared (the volume without mountPropagation: Bidirectional, or a host
// directory on a private mount), is a problem: the node plugin's mounts
// would fail, or stay in its own namespace where kubelet and the client
// pods never see them. A kernel without MOVE_MOUNT_BENEATH only loses the
// replacement of a volume in running containers (recovery, rolling
// updates); the node stays ready, since every publish still works and an
// unready DaemonSet would stall every rollout on such nodes.
func DecidePreflight(in PreflightInput) PreflightResult {
	var r PreflightResult
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
		mp := filepath.Clean(UnescapeMountInfo(table[i].MountPoint))
		// The last of equally long matches is the mount on top.
		if isUnder(dir, mp) && (on == nil || len(mp) >= len(filepath.Clean(UnescapeMountInfo(on.MountPoint)))) {
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
		dir, UnescapeMountInfo(on.MountPoint), propagation, dir)
}

// isUnder: path is dir or below it.
func isUnder(path, dir string) bool {
	return path == dir || dir == "/" || strings.HasPrefix(path, dir+"/")
}

// ProbeKernel asks the running kernel for each feature the node plugin
// uses, with arguments that can do nothing (invalid descriptors): a
// kernel without the call answers ENOSYS, one without the flag EINVAL
// before it looks at the descriptors. Anything else (EBADF, ENOENT, or
// EPERM, which says nothing either way) counts as present.
func ProbeKernel() KernelFeatures {
	var k KernelFeatures
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
	err = unix.MoveMount(-1, "", -1, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH|MoveMountBeneath)
	k.MoveMountBeneath = k.MoveMount && present(err) && !errors.Is(err, unix.EINVAL)
	return k
}
