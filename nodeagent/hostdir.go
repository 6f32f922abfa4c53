package nodeagent

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"

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
