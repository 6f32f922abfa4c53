// Replacing a block volume's device inside running client containers.
//
// A block volume reaches a container as a device node that the runtime made
// in the container's file tree (at the pod's devicePath), with the device's
// number, and a rule of the container's device cgroup that lets it open that
// number. A restaged block volume may get another device (a loop device of
// another number): the node plugin makes a node of the new number beside the
// old one in the container's tree, renames it over the old one (a client
// opening the path gets the old device or the new one, never none), lets
// the container's device cgroup open the new number and no longer the old
// one: once given back, the old number may become another volume's (the next
// loop device of another claim), and the container may make a node of any
// number (CAP_MKNOD), so only its cgroup keeps it out.

package mounts

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
)

// ErrDeviceCgroupV2 says a container's devices are governed by cgroup v2,
// whose device rules are an eBPF program of the runtime's: PaV does not
// rewrite it, so the container can neither open a new device number nor
// be kept from its old one (recovery keeps the old staging instead:
// blockRecoveryImpossible).
var ErrDeviceCgroupV2 = errors.New("the container's device cgroup is cgroup v2 (an eBPF program of its runtime), which PaV cannot change: restart the client pod to use the recovered device")

// BlockDevicePaths are the paths at which pod's containers see the block
// volume of claim (a claim of pod's namespace, or of a generic ephemeral
// volume of the pod).
func BlockDevicePaths(pod *corev1.Pod, claim string) []string {
	volumes := map[string]bool{}
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claim,
			v.Ephemeral != nil && pod.Name+"-"+v.Name == claim:
			volumes[v.Name] = true
		}
	}
	var out []string
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			for _, d := range c.VolumeDevices {
				if volumes[d.Name] {
					out = append(out, d.DevicePath)
				}
			}
		}
	}
	return out
}

// ReplaceDeviceNode replaces, in the file tree of process proc, the device
// node at devicePath whose number is old by one of number new, with the same
// mode and owner, once allow (AllowDevice) let the process open new.
// devicePath is the tenant's: it is resolved inside the process's
// root without following symlinks, and anything there but a block device
// node of number old is left alone (false).
func ReplaceDeviceNode(proc *ClientProcess, devicePath string, old, new uint64, allow func(proc *ClientProcess, old, new uint64) error) (bool, error) {
	pid := proc.pid
	root, err := proc.openAt("root", unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return false, fmt.Errorf("opening the root of process %d: %w", pid, err)
	}
	defer root.Close()
	parent, base := path.Split(path.Clean("/" + devicePath))
	if base == "" {
		return false, fmt.Errorf("device path %q names no file", devicePath)
	}
	dirfd, err := unix.Openat2(int(root.Fd()), "."+parent, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return false, fmt.Errorf("resolving %s in process %d: %w", parent, pid, err)
	}
	defer unix.Close(dirfd)
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		return false, fmt.Errorf("%s in process %d: %w", devicePath, pid, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFBLK || st.Rdev != old {
		return false, nil
	}
	if old != new {
		if err := allow(proc, old, new); err != nil {
			return false, err
		}
		if err := renameNodeOver(dirfd, base, st, new); err != nil {
			return false, fmt.Errorf("%s in process %d: %w", devicePath, pid, err)
		}
	}
	return true, nil
}

// renameNodeOver makes a block device node of number dev, with st's mode
// and owner, in dirfd and renames it over name.
func renameNodeOver(dirfd int, name string, st unix.Stat_t, dev uint64) error {
	tmp := fmt.Sprintf(".pav-%d-%d", os.Getpid(), time.Now().UnixNano())
	// mknod applies the umask: on a thread of its own fs_struct, set to 0.
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			errc <- fmt.Errorf("unshare(CLONE_FS): %w", err)
			return // the thread stays locked: the runtime ends it
		}
		unix.Umask(0)
		errc <- unix.Mknodat(dirfd, tmp, st.Mode, int(dev))
		// the thread stays locked with its own umask: the runtime ends it
	}()
	if err := <-errc; err != nil {
		return fmt.Errorf("making the new device node: %w", err)
	}
	if err := unix.Fchownat(dirfd, tmp, int(st.Uid), int(st.Gid), unix.AT_SYMLINK_NOFOLLOW); err != nil {
		_ = unix.Unlinkat(dirfd, tmp, 0)
		return fmt.Errorf("giving the new device node its owner: %w", err)
	}
	if err := unix.Renameat(dirfd, tmp, dirfd, name); err != nil {
		_ = unix.Unlinkat(dirfd, tmp, 0)
		return fmt.Errorf("renaming the new device node over the old one: %w", err)
	}
	return nil
}

// AllowDevice adds to the device cgroup (v1) of process proc a rule for
// block device new with the access its rules give old.
func AllowDevice(proc *ClientProcess, old, new uint64) error {
	dir, list, err := deviceRules(proc)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	access := deviceAccess(list, old)
	if access == "" {
		return fmt.Errorf("the device cgroup of process %d does not let it open block device %d:%d", proc.pid, unix.Major(old), unix.Minor(old))
	}
	return writeRule(dir, "devices.allow", deviceRule(new, access))
}

// RevokeDevice denies the device cgroup (v1) of process proc block device
// old, if its rules let it open it.
func RevokeDevice(proc *ClientProcess, old uint64) error {
	dir, list, err := deviceRules(proc)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	if !opens(deviceAccess(list, old)) {
		return nil
	}
	if err := writeRule(dir, "devices.deny", deviceRule(old, "rwm")); err != nil {
		return err
	}
	// A cgroup that allows all but its exceptions lists only "a *:* rwm";
	// one that denies all but its exceptions must no longer list old (a
	// deny takes out only the exception of exactly that device).
	if list, err = readAt(dir, "devices.list"); err != nil {
		return fmt.Errorf("reading the device rules of process %d: %w", proc.pid, err)
	}
	if !allowsAll(list) && opens(deviceAccess(list, old)) {
		return fmt.Errorf("the device cgroup of process %d still lets it open block device %d:%d (a rule for more devices than it)", proc.pid, unix.Major(old), unix.Minor(old))
	}
	return nil
}

// deviceRule is a line of a v1 devices.allow or devices.deny: block device
// dev, with access ("rwm" or part of it).
func deviceRule(dev uint64, access string) string {
	return fmt.Sprintf("b %d:%d %s", unix.Major(dev), unix.Minor(dev), access)
}

// allowsAll: a v1 devices.list of a cgroup that allows every device but
// its denied exceptions (which it does not list).
func allowsAll(list string) bool { return strings.TrimSpace(list) == "a *:* rwm" }

// deviceRules opens the device cgroup (v1) of process proc and reads its
// rules (devices.list).
func deviceRules(proc *ClientProcess) (dir int, list string, err error) {
	rel, err := DeviceCgroup(proc)
	if err != nil {
		return -1, "", err
	}
	dir, err = openDeviceCgroup(rel)
	if err != nil {
		return -1, "", fmt.Errorf("the device cgroup of process %d: %w", proc.pid, err)
	}
	if list, err = readAt(dir, "devices.list"); err != nil {
		unix.Close(dir)
		return -1, "", fmt.Errorf("reading the device rules of process %d: %w", proc.pid, err)
	}
	return dir, list, nil
}

// writeRule writes rule to file (devices.allow or devices.deny) of cgroup
// directory dir.
func writeRule(dir int, file, rule string) error {
	fd, err := unix.Openat(dir, file, unix.O_WRONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err == nil {
		_, err = unix.Write(fd, []byte(rule))
		unix.Close(fd)
	}
	if err != nil {
		return fmt.Errorf("writing %q to %s: %w", rule, file, err)
	}
	return nil
}

// openDeviceCgroup opens directory rel of the node's v1 devices hierarchy.
// A container sees only its own cgroup at /sys/fs/cgroup: the node plugin
// mounts the hierarchy afresh, detached (fsopen, fsmount), for this lookup.
func openDeviceCgroup(rel string) (int, error) {
	fsfd, err := unix.Fsopen("cgroup", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("fsopen cgroup: %w", err)
	}
	defer unix.Close(fsfd)
	if err := unix.FsconfigSetFlag(fsfd, "devices"); err != nil {
		return -1, fmt.Errorf("fsconfig devices: %w", err)
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return -1, fmt.Errorf("creating the devices hierarchy's mount: %w", err)
	}
	mnt, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOEXEC|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return -1, fmt.Errorf("fsmount: %w", err)
	}
	defer unix.Close(mnt)
	dir, err := unix.Openat2(mnt, "."+rel, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return -1, fmt.Errorf("%s: %w", rel, err)
	}
	return dir, nil
}

// readAt reads a small file of directory dir.
func readAt(dir int, name string) (string, error) {
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return "", err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 1<<20))
	return string(b), err
}

// DeviceCgroup is the path of process proc's device cgroup (v1) in the
// devices hierarchy.
func DeviceCgroup(proc *ClientProcess) (string, error) {
	f, err := proc.openAt("cgroup", unix.O_RDONLY)
	if err != nil {
		return "", err
	}
	b, err := io.ReadAll(io.LimitReader(f, 1<<20))
	f.Close()
	if err != nil {
		return "", err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "devices" {
				return path.Clean("/" + parts[2]), nil
			}
		}
	}
	return "", ErrDeviceCgroupV2
}

// deviceAccess is the access ("rwm" or part of it) that the rules of a v1
// devices.list give to block device dev: its own rule's, or a wildcard's.
func deviceAccess(list string, dev uint64) string {
	major, minor := strconv.FormatUint(uint64(unix.Major(dev)), 10), strconv.FormatUint(uint64(unix.Minor(dev)), 10)
	access := ""
	for line := range strings.SplitSeq(list, "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || (f[0] != "b" && f[0] != "a") {
			continue
		}
		maj, min, _ := strings.Cut(f[1], ":")
		if (maj == "*" || maj == major) && (min == "*" || min == minor) {
			// the union of every matching rule: runtimes list "b *:* m"
			// (mknod of any block device) beside a device's own "rw"
			for _, c := range "rwm" {
				if strings.ContainsRune(f[2], c) && !strings.ContainsRune(access, c) {
					access += string(c)
				}
			}
		}
	}
	return access
}

// opens reports whether device access lets a process open the device:
// read or write ("m" alone only lets it make the node).
func opens(access string) bool { return strings.ContainsAny(access, "rw") }
