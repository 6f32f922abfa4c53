package mounts

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	mount "k8s.io/mount-utils"
)

// maxSymlinks bounds symlink resolution, as the kernel does (ELOOP).
const maxSymlinks = 40

// OpenInPav resolves the path name (relative to /pav, e.g. "volume") the way
// the staging pod sees it, with dir being the host directory mounted at
// /pav (pav: pav, where the pod sees it): an absolute symlink target "/pav/x" means dir/x, a relative one is
// relative to the link's directory, and anything that leaves /pav (an
// absolute target elsewhere, or ".." above /pav) is refused. It returns an
// O_PATH descriptor of what name refers to.
//
// The staging pod may change its /pav while PaV looks (swap /pav/volume for
// a symlink to a host path between a check and the mount), so the path is
// resolved exactly once, one component at a time, each opened relative to
// the descriptor of its parent with openat2(RESOLVE_BENEATH |
// RESOLVE_NO_SYMLINKS): no symlink or magic link is ever followed by the
// kernel, PaV follows them itself within /pav, and ".." goes back to a
// descriptor PaV holds. The caller checks and mounts the returned
// descriptor, never the path again.
func OpenInPav(dir, pav, name string) (*os.File, error) {
	display := pav + "/" + name
	root, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening the staging pod's /pav: %w", err)
	}
	// stack holds the descriptors of the directories walked so far, from
	// /pav down; names their components (for messages).
	stack, names := []int{root}, []string{}
	defer func() {
		for _, fd := range stack {
			unix.Close(fd)
		}
	}()
	escape := func(how string) error {
		return fmt.Errorf("%s escapes %s (%s)", display, pav, how)
	}
	remaining := strings.Split(name, "/")
	hops := 0
	for len(remaining) > 0 {
		part := remaining[0]
		remaining = remaining[1:]
		switch part {
		case "", ".":
			continue
		case "..":
			if len(stack) == 1 {
				return nil, escape(`".." above ` + pav)
			}
			unix.Close(stack[len(stack)-1])
			stack, names = stack[:len(stack)-1], names[:len(names)-1]
			continue
		}
		here := strings.Join(append(append([]string{}, names...), part), "/")
		fd, err := unix.Openat2(stack[len(stack)-1], part, &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		if errors.Is(err, unix.ENOENT) {
			if here == name {
				return nil, fmt.Errorf("%s does not exist", display)
			}
			return nil, fmt.Errorf("%s does not exist (%s/%s is missing)", display, pav, here)
		}
		if errors.Is(err, unix.ENOTDIR) {
			return nil, fmt.Errorf("resolving %s: %s/%s is not a directory", display, pav, strings.Join(names, "/"))
		}
		if err != nil {
			return nil, fmt.Errorf("resolving %s: %w", display, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("resolving %s: %w", display, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFLNK {
			stack, names = append(stack, fd), append(names, part)
			continue
		}
		target, err := readlinkFD(fd)
		unix.Close(fd)
		if err != nil {
			return nil, fmt.Errorf("resolving %s: %w", display, err)
		}
		if hops++; hops > maxSymlinks {
			return nil, fmt.Errorf("resolving %s: too many levels of symbolic links", display)
		}
		rest := strings.Split(target, "/")
		if filepath.IsAbs(target) {
			clean := filepath.Clean(target)
			if clean != pav && !strings.HasPrefix(clean, pav+"/") {
				return nil, escape(fmt.Sprintf("symbolic link %s/%s points to %s", pav, here, target))
			}
			for _, fd := range stack[1:] {
				unix.Close(fd)
			}
			stack, names = stack[:1], nil
			rest = strings.Split(strings.TrimPrefix(clean, pav), "/")
		}
		remaining = append(rest, remaining...)
	}
	// Hand the last descriptor (or a copy of /pav's) to the caller.
	last := stack[len(stack)-1]
	if len(stack) == 1 {
		if last, err = unix.Dup(root); err != nil {
			return nil, fmt.Errorf("resolving %s: %w", display, err)
		}
		unix.CloseOnExec(last)
	} else {
		stack = stack[:len(stack)-1]
	}
	return os.NewFile(uintptr(last), display), nil
}

// readlinkFD reads the target of the symlink an O_PATH descriptor refers to.
func readlinkFD(fd int) (string, error) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(fd, "", buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// DeviceAllowed says whether the staging pod may hand out the block device
// with the given device number as a volume.
type DeviceAllowed func(rdev uint64) bool

// CheckVolume checks what a staging pod exposed (the descriptor OpenInPav
// returned for /pav/volume): a directory for Filesystem volumes; for Block
// volumes a block device the pod may use (allowed) of at least capacity
// bytes.
func CheckVolume(f *os.File, block bool, capacity int64, allowed DeviceAllowed) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("/pav/volume: %w", err)
	}
	kind := st.Mode & unix.S_IFMT
	if !block {
		if kind != unix.S_IFDIR {
			return fmt.Errorf("/pav/volume is not a directory (the volume's mode is Filesystem)")
		}
		return nil
	}
	if kind != unix.S_IFBLK {
		return fmt.Errorf("/pav/volume is not a block device (the volume's mode is Block)")
	}
	if allowed == nil || !allowed(st.Rdev) {
		return fmt.Errorf("/pav/volume is block device %d:%d, which the staging pod was not given: PaV accepts a block device only from a privileged staging pod or one given that device by a hostPath volume",
			unix.Major(st.Rdev), unix.Minor(st.Rdev))
	}
	// Reopening our own descriptor through /proc/self/fd opens the very
	// inode it refers to, whatever /pav holds by now.
	dev, err := os.Open(fmt.Sprintf("/proc/self/fd/%d", f.Fd()))
	if err != nil {
		return fmt.Errorf("opening /pav/volume: %w", err)
	}
	defer dev.Close()
	size, err := dev.Seek(0, io.SeekEnd)
	if err != nil {
		return fmt.Errorf("finding the size of /pav/volume: %w", err)
	}
	return checkBlockSize(size, capacity)
}

// checkBlockSize: a block device may be larger than the volume's capacity
// (backends round sizes up to their extent or sector size), never smaller.
func checkBlockSize(size, capacity int64) error {
	if size < capacity {
		return fmt.Errorf("/pav/volume is a block device of %d bytes, smaller than the volume's capacity of %d bytes", size, capacity)
	}
	return nil
}

// PodDevices is the DeviceAllowed rule for a staging pod: a privileged
// container may use every device of the node, so any is allowed; otherwise
// only devices the pod was given through hostPath volumes.
func PodDevices(pod *corev1.Pod) DeviceAllowed {
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			if c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
				return func(uint64) bool { return true }
			}
		}
	}
	given := map[uint64]bool{}
	for _, v := range pod.Spec.Volumes {
		var st unix.Stat_t
		if v.HostPath != nil && unix.Stat(v.HostPath.Path, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFBLK {
			given[st.Rdev] = true
		}
	}
	return func(rdev uint64) bool { return given[rdev] }
}

// PublishTarget binds source (a descriptor from OpenInPav) at target,
// creating target (a directory, or a file for block volumes) first.
// Filesystem volumes are bound recursively, so mounts the staging pod made
// inside /pav/volume (a FUSE file system in a subdirectory, say) are part of
// the volume, read-only for read-only volumes, and nosuid,nodev unless
// allowSetuidAndDevices (the provisioner's spec.volumeStaging field): a
// setuid binary or a device node in the volume would otherwise work in the
// client pod, whoever put it there. A block volume is one device node,
// which nodev would make unusable and nosuid does not concern. An existing
// mount at target is taken as a previous call's work.
func PublishTarget(m mount.Interface, source *os.File, target string, opts BindOptions) error {
	binder, ok := m.(FDBinder)
	if !ok {
		return fmt.Errorf("cannot publish: %T cannot bind a descriptor", m)
	}
	if err := clearBrokenMount(m, target, os.Stat); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
		return fmt.Errorf("creating parent of target path: %w", err)
	}
	if opts.Block {
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
	if err := binder.BindFD(source, target, opts); err != nil {
		return fmt.Errorf("bind-mounting the volume: %w", err)
	}
	klog.V(2).InfoS("Published volume", "source", source.Name(), "target", target, "readOnly", opts.ReadOnly, "block", opts.Block, "nosuidNodev", opts.NoSetuidNoDevices)
	return nil
}

// clearBrokenMount unmounts what is mounted at target if it no longer
// answers (mount.IsCorruptedMnt: ENOTCONN, ESTALE, EIO, ...). An earlier
// publish whose staging pod then died leaves such a mount: a bind of a FUSE
// mount whose daemon is gone. Publishing again over it would fail forever
// ("mkdir: file exists"), and the client pod would never start.
func clearBrokenMount(m mount.Interface, target string, stat func(string) (os.FileInfo, error)) error {
	if _, err := stat(target); err == nil || !mount.IsCorruptedMnt(err) {
		return nil
	}
	klog.InfoS("Unmounting a broken mount left at the target path", "target", target)
	if err := m.Unmount(target); err != nil {
		return fmt.Errorf("unmounting the broken mount at the target path %s: %w", target, err)
	}
	return nil
}

// UnpublishTarget unmounts everything at or under target and removes it.
func UnpublishTarget(m mount.Interface, target string) error {
	if err := UnmountUnder(m, target); err != nil {
		return err
	}
	if err := os.Remove(target); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing target path: %w", err)
	}
	return nil
}

// FDBinder is a mounter that binds what a descriptor refers to, with every
// mount under it, with the flags asked for.
type FDBinder interface {
	BindFD(source *os.File, target string, opts BindOptions) error
}

// BindOptions are the flags of a bind that publishes a volume, set on every
// mount of the bound tree.
type BindOptions struct {
	// Block: the volume is a device node, bound at a file.
	Block    bool
	ReadOnly bool
	// NoSetuidNoDevices: nosuid and nodev, so setuid bits and file
	// capabilities do not raise privileges and device nodes cannot be opened.
	NoSetuidNoDevices bool
}

// mountAttrs are the mount_setattr flags of opts (0: none).
func (o BindOptions) mountAttrs() uint64 {
	var attrs uint64
	if o.ReadOnly {
		attrs |= unix.MOUNT_ATTR_RDONLY
	}
	if o.NoSetuidNoDevices {
		attrs |= unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV
	}
	return attrs
}

// HostMounter is the node plugin's mounter: mount-utils' plus binds of
// descriptors.
type HostMounter struct{ mount.Interface }

// BindFD clones the mount tree at source (a descriptor, so nothing can swap
// what is bound after it was checked) detached with open_tree, sets the
// flags of opts on every mount of it with mount_setattr, and only then
// attaches it at target with move_mount. Remounting after a bind is not
// enough: per-mount flags do not propagate, so with the node plugin in a
// container only its own copy would get them while kubelet's, and so the
// client pod's, stayed writable (or suid); a tree given its flags before it
// is attached is born with them in every copy. Linux >= 5.12.
func (HostMounter) BindFD(source *os.File, target string, opts BindOptions) error {
	tree, err := cloneTree(source, "", opts)
	if err != nil {
		return err
	}
	defer unix.Close(tree)
	if err := unix.MoveMount(tree, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount to %s: %w", target, err)
	}
	return nil
}
