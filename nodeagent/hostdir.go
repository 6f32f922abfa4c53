package nodeagent

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	mount "k8s.io/mount-utils"

	"github.com/albertofaria/pav/protocol"
)

// Size caps for what a pod's /pav files may put into annotations.
const (
	maxHandleBytes   = protocol.MaxHandleBytes + 1 // plus a trailing newline
	maxCapacityBytes = 256
	maxErrorBytes    = 8 << 10
)

// podHostDir returns the host directory backing a PaV pod's /pav: the
// hostPath of its "pav" volume. Pods are written by anyone with pod-create
// rights, so a path outside root is refused rather than read or removed.
func podHostDir(pod *corev1.Pod, root string) (string, error) {
	for _, v := range pod.Spec.Volumes {
		if v.Name != protocol.PavVolumeName {
			continue
		}
		if v.HostPath == nil {
			return "", fmt.Errorf("pod %s/%s: volume %q is not a hostPath", pod.Namespace, pod.Name, v.Name)
		}
		return checkUnder(v.HostPath.Path, root)
	}
	return "", fmt.Errorf("pod %s/%s has no %q volume", pod.Namespace, pod.Name, protocol.PavVolumeName)
}

// checkUnder returns the cleaned path if it is a direct child of root.
func checkUnder(path, root string) (string, error) {
	p := filepath.Clean(path)
	if !filepath.IsAbs(p) || filepath.Dir(p) != filepath.Clean(root) {
		return "", fmt.Errorf("host directory %q is not a child of %s", path, root)
	}
	return p, nil
}

// readResultFile reads a small regular file a pod left in its /pav. It
// refuses symlinks and other special files (the node plugin runs as root and
// must not be tricked into copying host files into annotations) and caps the
// size. ok is false if the file does not exist.
func readResultFile(dir, name string, max int) (content string, ok bool, err error) {
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, os.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return "", true, fmt.Errorf("/pav/%s is a symbolic link; PaV only reads regular files", name)
		}
		return "", false, fmt.Errorf("opening /pav/%s: %w", name, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", false, err
	}
	if !st.Mode().IsRegular() {
		return "", true, fmt.Errorf("/pav/%s is not a regular file", name)
	}
	b, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		return "", false, fmt.Errorf("reading /pav/%s: %w", name, err)
	}
	s := string(b)
	if len(b) > max {
		if name == protocol.FileVolumeAttributes {
			// One byte over: protocol.ParseVolumeAttributes, the home of
			// its bounds, refuses it with the limit in the message.
			return s, true, nil
		}
		if name != protocol.FileError && name != protocol.FileInfeasible {
			// A cut handle or capacity would be a different one: refuse.
			return "", true, fmt.Errorf("/pav/%s is longer than %d bytes", name, max)
		}
		s = string(b[:max]) + "… (truncated)"
	}
	return strings.TrimSpace(s), true, nil
}

// cleanupDir unmounts everything mounted at or under dir, deepest first
// (Bidirectional mounts made by pods outlive them), then removes dir. If a
// mount cannot be removed the directory is left alone: removing files
// through a live mount would destroy the volume's data.
func cleanupDir(m mount.Interface, dir string) error {
	if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := unmountUnder(m, dir); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("removing %s: %w", dir, err)
	}
	return nil
}

// unmountUnder unmounts every mount at or below path, deepest first, until
// none is left (mounts may be stacked on one path).
func unmountUnder(m mount.Interface, path string) error {
	path = filepath.Clean(path)
	for attempt := 0; ; attempt++ {
		mps, err := mountsUnder(m, path)
		if err != nil {
			return err
		}
		if len(mps) == 0 {
			return nil
		}
		if attempt >= 8 {
			return fmt.Errorf("mounts remain under %s after unmounting: %s", path, strings.Join(mps, ", "))
		}
		for _, mp := range mps {
			klog.V(3).InfoS("Unmounting", "path", mp)
			if err := m.Unmount(mp); err != nil {
				return fmt.Errorf("unmounting %s: %w", mp, err)
			}
		}
	}
}

// mountsUnder lists mount points at or below path, deepest first.
func mountsUnder(m mount.Interface, path string) ([]string, error) {
	list, err := m.List()
	if err != nil {
		return nil, fmt.Errorf("listing mounts: %w", err)
	}
	var out []string
	seen := map[string]bool{}
	for _, mp := range list {
		p := filepath.Clean(mp.Path)
		if (p == path || strings.HasPrefix(p, path+"/")) && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		di, dj := strings.Count(out[i], "/"), strings.Count(out[j], "/")
		if di != dj {
			return di > dj
		}
		return out[i] > out[j]
	})
	return out, nil
}
