package nodeagent

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// The client's device path is resolved in its root without following
// symlinks, and only a block node of the old number is replaced, with its
// mode and owner, after the new number is allowed.
func TestReplaceDeviceNodeFollowsNoSymlinks(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (mknod)")
	}
	base := t.TempDir()
	dev := filepath.Join(base, "dev")
	must(t, os.MkdirAll(dev, 0o755))
	old, fresh := unix.Mkdev(7, 200), unix.Mkdev(7, 201)
	node := filepath.Join(dev, "vol")
	must(t, unix.Mknod(node, unix.S_IFBLK|0o660, int(old)))
	must(t, os.Chown(node, 1000, 2000))
	must(t, os.Chmod(node, 0o660)) // mknod applied the umask
	must(t, unix.Mknod(filepath.Join(dev, "other"), unix.S_IFBLK|0o660, int(unix.Mkdev(7, 9))))
	must(t, os.WriteFile(filepath.Join(dev, "file"), nil, 0o644))
	must(t, os.Symlink(dev, filepath.Join(base, "link")))

	var allowed [][2]uint64
	allow := func(_ *clientProcess, o, n uint64) error { allowed = append(allowed, [2]uint64{o, n}); return nil }
	pid, err := openProcess(os.Getpid())
	must(t, err)
	defer pid.Close()

	if _, err := replaceDeviceNode(pid, filepath.Join(base, "link", "vol"), old, fresh, allow); err == nil {
		t.Error("a path through a symlink was followed")
	}
	for _, name := range []string{"other", "file", "missing"} {
		if ok, err := replaceDeviceNode(pid, filepath.Join(dev, name), old, fresh, allow); ok || err != nil {
			t.Errorf("%s: replaced %v, err %v; want left alone", name, ok, err)
		}
	}
	if len(allowed) != 0 {
		t.Fatalf("allowed %v before any replacement", allowed)
	}
	ok, err := replaceDeviceNode(pid, node, old, fresh, allow)
	if err != nil || !ok {
		t.Fatalf("replaced %v, err %v", ok, err)
	}
	var st unix.Stat_t
	must(t, unix.Lstat(node, &st))
	if st.Mode != unix.S_IFBLK|0o660 || st.Rdev != fresh || st.Uid != 1000 || st.Gid != 2000 {
		t.Errorf("new node: mode %o rdev %d:%d owner %d:%d", st.Mode, unix.Major(st.Rdev), unix.Minor(st.Rdev), st.Uid, st.Gid)
	}
	if len(allowed) != 1 || allowed[0] != [2]uint64{old, fresh} {
		t.Errorf("allowed %v", allowed)
	}
	entries, err := os.ReadDir(dev)
	must(t, err)
	if len(entries) != 3 {
		t.Errorf("left in the device directory: %v", entries)
	}
}

func TestDeviceAccess(t *testing.T) {
	dev := unix.Mkdev(7, 3)
	for list, want := range map[string]string{
		"c 1:3 rwm\nb 7:3 rw\n": "rw",
		"b 7:4 rwm\n":           "",
		"b 7:* r\n":             "r",
		"a *:* rwm\n":           "rwm",
		"c 7:3 rwm\n":           "",
		"":                      "",
	} {
		if got := deviceAccess(list, dev); got != want {
			t.Errorf("deviceAccess(%q) = %q, want %q", list, got, want)
		}
	}
}

// The node's devices hierarchy is reached through a detached mount of its
// own, whatever the node plugin's /sys/fs/cgroup shows.
func TestOpenDeviceCgroupOfSelf(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (fsmount)")
	}
	self, err := openProcess(os.Getpid())
	must(t, err)
	defer self.Close()
	rel, err := deviceCgroup(self)
	if err == errDeviceCgroupV2 {
		t.Skip("cgroup v2 machine")
	}
	must(t, err)
	dir, err := openDeviceCgroup(rel)
	must(t, err)
	defer unix.Close(dir)
	list, err := readAt(dir, "devices.list")
	must(t, err)
	if deviceAccess(list, unix.Mkdev(1, 3)) == "" { // /dev/null: every cgroup may use it
		t.Errorf("devices.list of %s lets no one open /dev/null:\n%s", rel, list)
	}
}
