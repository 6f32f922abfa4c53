package nodeagent

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
	mount "k8s.io/mount-utils"

	"github.com/albertofaria/pav/templating"
)

// maxSymlinks bounds symlink resolution, as the kernel does (ELOOP).
const maxSymlinks = 40

// resolveInPav resolves the path name (relative to /pav, e.g. "volume") the
// way the staging pod sees it, with dir being the host directory mounted at
// /pav: an absolute symlink target "/pav/x" means dir/x, a relative one is
// relative to the link's directory, and anything that leaves /pav (an
// absolute target elsewhere, or ".." above /pav) is refused. This is what
// makes a staging pod unable to hand out a host path as its volume.
func resolveInPav(dir, name string) (string, error) {
	display := templating.PavMountPath + "/" + name
	var resolved []string // components below dir, all existing and not symlinks
	remaining := strings.Split(name, "/")
	hops := 0
	escape := func(how string) error {
		return fmt.Errorf("%s escapes %s (%s)", display, templating.PavMountPath, how)
	}
	for len(remaining) > 0 {
		part := remaining[0]
		remaining = remaining[1:]
		switch part {
		case "", ".":
			continue
		case "..":
			if len(resolved) == 0 {
				return "", escape(`".." above ` + templating.PavMountPath)
			}
			resolved = resolved[:len(resolved)-1]
			continue
		}
		next := append(append([]string{}, resolved...), part)
		p := filepath.Join(append([]string{dir}, next...)...)
		fi, err := os.Lstat(p)
		if errors.Is(err, os.ErrNotExist) {
			if len(next) == 1 && next[0] == name {
				return "", fmt.Errorf("%s does not exist", display)
			}
			return "", fmt.Errorf("%s does not exist (%s/%s is missing)", display, templating.PavMountPath, strings.Join(next, "/"))
		}
		if err != nil {
			return "", fmt.Errorf("resolving %s: %w", display, err)
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			resolved = next
			continue
		}
		hops++
		if hops > maxSymlinks {
			return "", fmt.Errorf("resolving %s: too many levels of symbolic links", display)
		}
		target, err := os.Readlink(p)
		if err != nil {
			return "", fmt.Errorf("resolving %s: %w", display, err)
		}
		rest := strings.Split(target, "/")
		if filepath.IsAbs(target) {
			clean := filepath.Clean(target)
			if clean != templating.PavMountPath && !strings.HasPrefix(clean, templating.PavMountPath+"/") {
				return "", escape(fmt.Sprintf("symbolic link %s/%s points to %s", templating.PavMountPath, strings.Join(next, "/"), target))
			}
			resolved = nil
			rest = strings.Split(strings.TrimPrefix(clean, templating.PavMountPath), "/")
		}
		remaining = append(rest, remaining...)
	}
	return filepath.Join(append([]string{dir}, resolved...)...), nil
}

// checkVolume checks what a staging pod exposed at path (the resolved
// /pav/volume): a directory for Filesystem volumes; for Block volumes a
// block device whose size is exactly capacity bytes.
func checkVolume(path string, block bool, capacity int64) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("/pav/volume: %w", err)
	}
	if !block {
		if !fi.IsDir() {
			return fmt.Errorf("/pav/volume is not a directory (the volume's mode is Filesystem)")
		}
		return nil
	}
	if fi.Mode()&os.ModeDevice == 0 || fi.Mode()&os.ModeCharDevice != 0 {
		return fmt.Errorf("/pav/volume is not a block device (the volume's mode is Block)")
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("opening /pav/volume: %w", err)
	}
	defer f.Close()
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return fmt.Errorf("finding the size of /pav/volume: %w", err)
	}
	if size != capacity {
		return fmt.Errorf("/pav/volume is a block device of %d bytes, but the volume's capacity is %d bytes", size, capacity)
	}
	return nil
}

// publishTarget bind-mounts source at target, creating target (a directory,
// or a file for block volumes) first. Filesystem volumes are bound
// recursively, so mounts the staging pod made inside /pav/volume (a FUSE
// file system in a subdirectory, say) are part of the volume, read-only
// for read-only volumes. An existing mount at target is taken as a previous
// call's work.
func publishTarget(m mount.Interface, source, target string, block, readOnly bool) error {
	if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
		return fmt.Errorf("creating parent of target path: %w", err)
	}
	if block {
		f, err := os.OpenFile(target, os.O_CREATE|os.O_RDONLY, 0o640)
		if err != nil {
			return fmt.Errorf("creating target file: %w", err)
		}
		f.Close()
	} else if err := os.MkdirAll(target, 0o750); err != nil {
		return fmt.Errorf("creating target directory: %w", err)
	}
	mounted, err := m.IsMountPoint(target)
	if err != nil {
		return fmt.Errorf("checking target path: %w", err)
	}
	if mounted {
		return nil
	}
	if block {
		opts := []string{"bind"}
		if readOnly {
			opts = append(opts, "ro")
		}
		// mount-utils binds, then remounts with the options.
		if err := m.Mount(source, target, "", opts); err != nil {
			return fmt.Errorf("bind-mounting the block device: %w", err)
		}
		return nil
	}
	if readOnly {
		b, ok := m.(ReadOnlyBinder)
		if !ok {
			return fmt.Errorf("cannot publish read-only: %T cannot make recursive read-only bind mounts", m)
		}
		if err := b.BindReadOnlyRecursive(source, target); err != nil {
			return fmt.Errorf("bind-mounting the volume read-only: %w", err)
		}
	} else if err := m.Mount(source, target, "", []string{"rbind"}); err != nil {
		return fmt.Errorf("bind-mounting the volume: %w", err)
	}
	klog.V(2).InfoS("Published volume", "source", source, "target", target, "readOnly", readOnly, "block", block)
	return nil
}

// unpublishTarget unmounts everything at or under target and removes it.
func unpublishTarget(m mount.Interface, target string) error {
	if err := unmountUnder(m, target); err != nil {
		return err
	}
	if err := os.Remove(target); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing target path: %w", err)
	}
	return nil
}

// ReadOnlyBinder is a mounter that can bind a mount tree read-only, every
// mount in it included.
type ReadOnlyBinder interface {
	BindReadOnlyRecursive(source, target string) error
}

// HostMounter is the node plugin's mounter: mount-utils' plus recursive
// read-only binds.
type HostMounter struct{ mount.Interface }

// BindReadOnlyRecursive binds the tree at source to target, read-only in
// every mount namespace that receives it. Remounting the bound tree
// read-only afterwards is not enough: per-mount flags do not propagate, so
// with the node plugin in a container, only its own copy would become
// read-only while kubelet's, and so the client pod's, stayed writable.
// Instead the tree is cloned detached (open_tree), made read-only
// recursively (mount_setattr) and only then attached at target
// (move_mount), so every propagated copy is born read-only. Linux >= 5.12.
func (HostMounter) BindReadOnlyRecursive(source, target string) error {
	fd, err := unix.OpenTree(unix.AT_FDCWD, source, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if err != nil {
		return fmt.Errorf("open_tree %s: %w", source, err)
	}
	defer unix.Close(fd)
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, attr); err != nil {
		return fmt.Errorf("mount_setattr read-only on the clone of %s: %w", source, err)
	}
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount to %s: %w", target, err)
	}
	return nil
}
