// Replacing a volume's mounts inside running client containers.
//
// kubelet's container runtime gives each container its own mount namespace
// with a copy of the volume's mount at the target path; unless the pod set
// mountPropagation: HostToContainer, a new mount at the target path never
// reaches that copy. So the node plugin goes to the copies: it clones the new
// volume's tree detached (open_tree), enters the container's mount namespace
// on one locked OS thread (setns), places the clone beneath the old mount
// (move_mount MOVE_MOUNT_BENEATH) and detaches the old one from above it, so
// the path never shows anything but the old or the new volume.

package mounts

import (
	"errors"
	"fmt"
	"os"
	"path"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	mount "k8s.io/mount-utils"
)

// MoveMountBeneath is move_mount's MOVE_MOUNT_BENEATH (Linux >= 6.5,
// include/uapi/linux/mount.h), which golang.org/x/sys does not define.
const MoveMountBeneath = 0x00000200

// VolumeMount names what a mount shows, the same in every mount namespace:
// the file system (its device numbers) and the directory of it that is
// mounted (Root, as in mountinfo). FSType, when set, is the file system's
// type, which a mount must have too: the kernel gives a device number to
// another file system once the last mount of its own is gone (a tmpfs or
// another FUSE mount gets a FUSE volume's number), so a number recorded
// earlier may name something else now.
type VolumeMount struct {
	Major, Minor int
	Root         string
	FSType       string // not in String: recorded apart (recoveryRecord)
}

func (v VolumeMount) String() string { return fmt.Sprintf("%d:%d:%s", v.Major, v.Minor, v.Root) }

// ParseVolumeMount is the inverse of String.
func ParseVolumeMount(s string) (VolumeMount, error) {
	parts := strings.SplitN(s, ":", 3)
	if len(parts) != 3 || !strings.HasPrefix(parts[2], "/") {
		return VolumeMount{}, fmt.Errorf("%q is not major:minor:/root", s)
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	if err := errors.Join(err1, err2); err != nil {
		return VolumeMount{}, fmt.Errorf("%q is not major:minor:/root: %w", s, err)
	}
	return VolumeMount{Major: major, Minor: minor, Root: parts[2]}, nil
}

// within says whether a mount showing m shows v or a directory inside it
// (a subPath of the volume), and which one (relative to v's root).
func (v VolumeMount) within(m mount.MountInfo) (sub string, ok bool) {
	if m.Major != v.Major || m.Minor != v.Minor || (v.FSType != "" && m.FsType != v.FSType) {
		return "", false
	}
	root := MountRoot(m)
	if root == v.Root {
		return "", true
	}
	prefix := strings.TrimSuffix(v.Root, "/") + "/"
	if !strings.HasPrefix(root, prefix) {
		return "", false
	}
	return strings.TrimPrefix(root, prefix), true
}

// MountAt is the top mount at path in the mount table of /proc/<pid> ("self"
// for the node plugin's own).
func MountAt(pid, target string) (*mount.MountInfo, error) {
	infos, err := mount.ParseMountInfo("/proc/" + pid + "/mountinfo")
	if err != nil {
		return nil, err
	}
	var top *mount.MountInfo
	for i := range infos {
		if UnescapeMountInfo(infos[i].MountPoint) == target {
			top = &infos[i] // later lines are mounted above earlier ones
		}
	}
	if top == nil {
		return nil, fmt.Errorf("nothing is mounted at %s", target)
	}
	return top, nil
}

// VolumeMountAt is what the node sees at where: the file system of the
// mount that holds it (the last one mounted at where or above it) and the
// directory of it that where is.
func VolumeMountAt(infos []mount.MountInfo, where string) (VolumeMount, bool) {
	for i := len(infos) - 1; i >= 0; i-- {
		mp := UnescapeMountInfo(infos[i].MountPoint)
		if where == mp || mount.PathWithinBase(where, mp) {
			root := MountRoot(infos[i])
			if rel := strings.TrimPrefix(strings.TrimPrefix(where, mp), "/"); rel != "" {
				root = path.Join(root, rel)
			}
			return VolumeMount{Major: infos[i].Major, Minor: infos[i].Minor, Root: root, FSType: infos[i].FsType}, true
		}
	}
	return VolumeMount{}, false
}

// StaleMount is a mount in a client's namespace that shows an old volume.
type StaleMount struct {
	id         int    // its mount ID, which the node plugin checks it reached
	MountPoint string // where it is, as the client's namespace sees it
	Sub        string // the directory of the volume it shows ("" for its root)
	// its flags, which its replacement keeps: read-only (a readOnly
	// VolumeMount), nosuid and nodev (both, as a publish sets them)
	readOnly, noSetuidNoDevices bool
}

// keeping are opts with the flags of m added: a replacement is never
// writable, setuid or device-capable where the mount it replaces was not.
func (opts BindOptions) Keeping(m StaleMount) BindOptions {
	opts.ReadOnly = opts.ReadOnly || m.readOnly
	opts.NoSetuidNoDevices = opts.NoSetuidNoDevices || m.noSetuidNoDevices
	return opts
}

// StaleMounts lists the mounts of a mount table that show one of old, top
// mounts first and without those nested in another (replaced with it).
func StaleMounts(infos []mount.MountInfo, old []VolumeMount) []StaleMount {
	var found []StaleMount
	for _, m := range infos {
		for _, v := range old {
			if sub, ok := v.within(m); ok {
				found = append(found, StaleMount{id: m.ID, MountPoint: UnescapeMountInfo(m.MountPoint), Sub: sub,
					readOnly:          slices.Contains(m.MountOptions, "ro"),
					noSetuidNoDevices: slices.Contains(m.MountOptions, "nosuid") && slices.Contains(m.MountOptions, "nodev")})
				break
			}
		}
	}
	slices.SortStableFunc(found, func(a, b StaleMount) int { return len(a.MountPoint) - len(b.MountPoint) })
	var tops []StaleMount
	for _, m := range found {
		nested := slices.ContainsFunc(tops, func(t StaleMount) bool {
			return t.MountPoint == "/" || strings.HasPrefix(m.MountPoint, t.MountPoint+"/")
		})
		if !nested {
			tops = append(tops, m)
		}
	}
	return tops
}

// MountRoot is the directory of its file system a mount shows. A mount of
// a file or directory that was since removed (a block volume's device node
// in the old staging pod's cleaned-up /pav) still shows it: mountinfo adds
// "//deleted", which is no part of the name.
func MountRoot(m mount.MountInfo) string {
	return strings.TrimSuffix(UnescapeMountInfo(m.Root), "//deleted")
}

// UnescapeMountInfo undoes mountinfo's octal escapes (\040 for a space),
// which k8s.io/mount-utils' ParseMountInfo leaves in.
func UnescapeMountInfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// cloneTree clones the mount tree at source (a descriptor) detached, with
// the flags of opts set on every mount of it: a tree given its flags before
// it is attached is born with them wherever it is attached or propagated.
// sub, if not empty, is a directory of source to clone instead, resolved
// beneath it without following symlinks.
func cloneTree(source *os.File, sub string, opts BindOptions) (int, error) {
	fd, what := int(source.Fd()), source.Name()
	if sub != "" {
		subFD, err := unix.Openat2(fd, sub, &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		if err != nil {
			return -1, fmt.Errorf("resolving %s in the new volume: %w", sub, err)
		}
		defer unix.Close(subFD)
		fd, what = subFD, what+"/"+sub
	}
	tree, err := unix.OpenTree(fd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE|unix.AT_EMPTY_PATH)
	if err != nil {
		return -1, fmt.Errorf("open_tree %s: %w", what, err)
	}
	if attrs := opts.mountAttrs(); attrs != 0 {
		attr := &unix.MountAttr{Attr_set: attrs}
		if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, attr); err != nil {
			unix.Close(tree)
			return -1, fmt.Errorf("mount_setattr %+v on the clone of %s: %w", opts, what, err)
		}
	}
	return tree, nil
}

// ClientProcess is a process of a client container (or the node plugin
// itself), held by a pidfd: its /proc directory is opened while the pidfd's
// process is alive, so it is that process's, and a PID that was reused
// meanwhile never leads the node plugin into another process.
type ClientProcess struct {
	pid   int
	pidfd int
	dir   int // /proc/<pid>, O_PATH
}

// PID is the process's ID, for messages.
func (p *ClientProcess) PID() int { return p.pid }

var ErrProcessGone = errors.New("the process is gone")

// OpenProcess holds process pid. Whoever named pid (containerd) must still
// name it after this returned: the pidfd may be of a process that got pid
// after the named one ended.
func OpenProcess(pid int) (*ClientProcess, error) {
	pidfd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil, fmt.Errorf("process %d: %w", pid, ErrProcessGone)
	} else if err != nil {
		return nil, fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	dir, err := unix.Open("/proc/"+strconv.Itoa(pid), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Close(pidfd)
		return nil, fmt.Errorf("process %d: %w: %w", pid, ErrProcessGone, err)
	}
	p := &ClientProcess{pid: pid, pidfd: pidfd, dir: dir}
	if err := p.alive(); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// alive: the pidfd's process has not ended, so the /proc directory opened
// after the pidfd is its own.
func (p *ClientProcess) alive() error {
	if err := unix.PidfdSendSignal(p.pidfd, 0, nil, 0); err != nil {
		return fmt.Errorf("process %d: %w: %w", p.pid, ErrProcessGone, err)
	}
	return nil
}

// path names a file of the process's /proc directory through the held
// descriptor (magic links are followed only in paths the node plugin makes).
func (p *ClientProcess) path(name string) string {
	return fmt.Sprintf("/proc/self/fd/%d/%s", p.dir, name)
}

// openAt opens a file of the process's /proc directory.
func (p *ClientProcess) openAt(name string, flags int) (*os.File, error) {
	fd, err := unix.Openat(p.dir, name, flags|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("/proc/%d/%s: %w", p.pid, name, err)
	}
	return os.NewFile(uintptr(fd), fmt.Sprintf("/proc/%d/%s", p.pid, name)), nil
}

func (p *ClientProcess) Close() {
	unix.Close(p.dir)
	unix.Close(p.pidfd)
}

// userNSDepth is how many user namespaces below the node plugin's own the
// owner of namespace ns (a descriptor) is: 0 for the node plugin's own, 1
// for a child of it; an error if the owner is not the node plugin's nor
// below it.
func userNSDepth(ns *os.File) (int, error) {
	var self unix.Stat_t
	if err := unix.Stat("/proc/thread-self/ns/user", &self); err != nil {
		return 0, fmt.Errorf("the node plugin's user namespace: %w", err)
	}
	fd, err := unix.IoctlRetInt(int(ns.Fd()), unix.NS_GET_USERNS)
	if err != nil {
		return 0, fmt.Errorf("the owner of %s: %w", ns.Name(), err)
	}
	for depth := 0; ; depth++ {
		var st unix.Stat_t
		err := unix.Fstat(fd, &st)
		if err == nil && st.Dev == self.Dev && st.Ino == self.Ino {
			unix.Close(fd)
			return depth, nil
		}
		parent := -1
		if err == nil {
			// EPERM at the node plugin's ancestors' (none, in the host's)
			parent, err = unix.IoctlRetInt(fd, unix.NS_GET_PARENT)
		}
		unix.Close(fd)
		if err != nil {
			return 0, fmt.Errorf("the owner of %s is no user namespace of the node plugin's or below it: %w", ns.Name(), err)
		}
		fd = parent
	}
}

// ErrOwnNamespace: a client's process runs in a mount namespace owned by a
// user namespace other than the node's: one the client made itself
// (unshare -Urm needs no privilege), or the pod's own (hostUsers: false).
// The kernel locks the mounts it copied into such a namespace (read-only
// stays read-only, and none can be unmounted to show what is beneath); a
// clone the node plugin placed there would not be locked, and the client,
// all-capable in its own user namespace, could make it writable. Such a
// namespace is not touched.
var ErrOwnNamespace = errors.New("the process runs in a mount namespace of a user namespace of its own (made with unshare -Urm or the like, or the pod's with hostUsers: false)")

// ReplaceInNamespace replaces, in the mount namespace of proc, every
// mount that shows one of old (and that keep, if set, keeps) by a clone of
// source (the same directory of it, for a subPath mount), and returns the
// mount points replaced. The namespace must be owned by the node plugin's
// user namespace, else nothing is replaced (ErrOwnNamespace).
//
// A client container controls its own root file system, not its mounts: it
// may rename a directory above its volume or plant symlinks, but not move or
// unmount the mount (no CAP_SYS_ADMIN). So the mounts are found in the
// process's mount table, each path is resolved inside the namespace without
// following any symlink, and a mount is replaced only if the path led to
// exactly that mount (its mount ID): whatever the client did, the node
// plugin mounts only where an old mount of the volume is.
func ReplaceInNamespace(proc *ClientProcess, old []VolumeMount, source *os.File, opts BindOptions, keep func(mountPoint string) bool) (replaced []string, err error) {
	pid := proc.pid
	// The namespace is held from here on: the one checked is the one entered.
	ns, err := proc.openAt("ns/mnt", unix.O_RDONLY)
	if err != nil {
		return nil, fmt.Errorf("opening the mount namespace of process %d: %w", pid, err)
	}
	defer ns.Close()
	if depth, err := userNSDepth(ns); err != nil {
		return nil, fmt.Errorf("process %d: %w: %w", pid, ErrOwnNamespace, err)
	} else if depth != 0 {
		return nil, fmt.Errorf("process %d: %w (its owner is %d user namespaces below the node's)", pid, ErrOwnNamespace, depth)
	}
	infos, err := mount.ParseMountInfo(proc.path("mountinfo"))
	if err != nil {
		return nil, fmt.Errorf("reading the mount table of process %d: %w", pid, err)
	}
	stale := StaleMounts(infos, old)
	if keep != nil {
		stale = slices.DeleteFunc(stale, func(m StaleMount) bool { return !keep(m.MountPoint) })
	}
	if len(stale) == 0 {
		return nil, nil
	}
	// Clones are made in the node plugin's namespace, before entering the
	// client's: nothing of the client's is resolved to find the source.
	trees := make([]int, len(stale))
	defer func() {
		for _, t := range trees {
			if t > 0 {
				unix.Close(t)
			}
		}
	}()
	for i, m := range stale {
		if trees[i], err = cloneTree(source, m.Sub, opts.Keeping(m)); err != nil {
			return nil, err
		}
	}

	type result struct {
		replaced []string
		err      error
	}
	done := make(chan result, 1)
	go func() {
		// This thread enters the client's namespace and comes back before
		// it runs anything else. If it cannot come back it stays locked, so
		// the runtime ends it with the goroutine (or, the process's main
		// thread, parks it for good): no other goroutine ever runs in the
		// client's namespace. Coming back matters: /proc/self is the main
		// thread's view, and mount-utils reads /proc/self/mountinfo.
		runtime.LockOSThread()
		var r result
		defer func() { done <- r }()
		home, err := os.Open("/proc/thread-self/ns/mnt")
		if err != nil {
			r.err = fmt.Errorf("opening the node plugin's mount namespace: %w", err)
			runtime.UnlockOSThread()
			return
		}
		defer home.Close()
		if err := unix.Unshare(unix.CLONE_FS); err != nil { // setns(CLONE_NEWNS) needs an unshared fs_struct
			r.err = fmt.Errorf("unshare(CLONE_FS): %w", err)
			return
		}
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNS); err != nil {
			r.err = fmt.Errorf("entering the mount namespace of process %d: %w", pid, err)
			return
		}
		defer func() {
			if err := unix.Setns(int(home.Fd()), unix.CLONE_NEWNS); err == nil {
				runtime.UnlockOSThread()
			}
		}()
		var errs []error
		for i, m := range stale {
			if err := swapMount(m, trees[i]); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", m.MountPoint, err))
				continue
			}
			r.replaced = append(r.replaced, m.MountPoint)
		}
		r.err = errors.Join(errs...)
	}()
	r := <-done
	return r.replaced, r.err
}

// swapMount, in the namespace this thread is in, puts tree where m is.
func swapMount(m StaleMount, tree int) error {
	if m.MountPoint == "/" {
		return errors.New("the volume is the root of the mount namespace")
	}
	parent, base := path.Split(m.MountPoint)
	root, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(root)
	noLinks := unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS
	dir, err := unix.Openat2(root, strings.TrimPrefix(parent, "/")+".", &unix.OpenHow{
		Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | uint64(noLinks),
	})
	if err != nil {
		return fmt.Errorf("resolving %s without symlinks: %w", parent, err)
	}
	defer unix.Close(dir)
	top, err := unix.Openat2(dir, base, &unix.OpenHow{
		Flags: unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH | uint64(noLinks),
	})
	if err != nil {
		return fmt.Errorf("resolving %s: %w", m.MountPoint, err)
	}
	defer unix.Close(top)
	// The dead volume's own attributes may not answer (ENOTCONN): ask for
	// the mount ID only, from what the kernel has cached.
	var stx unix.Statx_t
	if err := unix.Statx(top, "", unix.AT_EMPTY_PATH|unix.AT_STATX_DONT_SYNC, unix.STATX_MNT_ID, &stx); err != nil {
		return fmt.Errorf("finding the mount at %s: %w", m.MountPoint, err)
	}
	if stx.Mask&unix.STATX_MNT_ID == 0 || int(stx.Mnt_id) != m.id {
		return fmt.Errorf("the path no longer leads to the volume's mount (mount %d, found %d): not touched", m.id, stx.Mnt_id)
	}
	if err := unix.MoveMount(tree, "", top, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH|MoveMountBeneath); err != nil {
		return fmt.Errorf("mounting the new volume beneath the old one: %w", err)
	}
	// The old mount is on top of the new one now; detach it, by name from
	// its directory (umount2 takes no descriptor). The client cannot rename
	// or replace a mount point, so the name still leads to it.
	if err := unix.Fchdir(dir); err != nil {
		return err
	}
	if err := unix.Unmount(base, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW); err != nil {
		return fmt.Errorf("detaching the old volume (the new one is beneath it): %w", err)
	}
	return nil
}

// RebindOnNode rebinds, in the node plugin's own mount namespace (kubelet's
// directory is shared with the host), the mounts that show one of old (and
// that keep keeps): unmounted, then bound anew from the same directory of
// src, read-only if they were. Unlike ReplaceInNamespace, each mount is
// gone for a moment.
func RebindOnNode(mounter mount.Interface, old []VolumeMount, src *os.File, opts BindOptions, keep func(mountPoint string) bool) ([]string, error) {
	infos, err := mount.ParseMountInfo("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	binder, ok := mounter.(FDBinder)
	if !ok {
		return nil, fmt.Errorf("cannot bind: %T cannot bind a descriptor", mounter)
	}
	var replaced []string
	for _, m := range StaleMounts(infos, old) {
		if !keep(m.MountPoint) {
			continue
		}
		if err := UnmountUnder(mounter, m.MountPoint); err != nil {
			return replaced, err
		}
		from := src
		if m.Sub != "" {
			fd, err := unix.Openat2(int(src.Fd()), m.Sub, &unix.OpenHow{
				Flags:   unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
				Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
			})
			if err != nil {
				return replaced, fmt.Errorf("resolving %s in the new volume: %w", m.Sub, err)
			}
			from = os.NewFile(uintptr(fd), src.Name()+"/"+m.Sub)
			defer from.Close()
		}
		if err := binder.BindFD(from, m.MountPoint, opts.Keeping(m)); err != nil {
			return replaced, fmt.Errorf("binding the new volume at %s: %w", m.MountPoint, err)
		}
		replaced = append(replaced, m.MountPoint)
	}
	return replaced, nil
}
