package mounts

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
	allow := func(_ *ClientProcess, o, n uint64) error { allowed = append(allowed, [2]uint64{o, n}); return nil }
	pid, err := OpenProcess(os.Getpid())
	must(t, err)
	defer pid.Close()

	if _, err := ReplaceDeviceNode(pid, filepath.Join(base, "link", "vol"), old, fresh, allow); err == nil {
		t.Error("a path through a symlink was followed")
	}
	for _, name := range []string{"other", "file", "missing"} {
		if ok, err := ReplaceDeviceNode(pid, filepath.Join(dev, name), old, fresh, allow); ok || err != nil {
			t.Errorf("%s: replaced %v, err %v; want left alone", name, ok, err)
		}
	}
	if len(allowed) != 0 {
		t.Fatalf("allowed %v before any replacement", allowed)
	}
	ok, err := ReplaceDeviceNode(pid, node, old, fresh, allow)
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
		// runtimes' "mknod any block device" beside the device's own rule
		"b *:* m\nb 7:3 rw\n": "mrw",
		"b *:* m\n":           "m",
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
	self, err := OpenProcess(os.Getpid())
	must(t, err)
	defer self.Close()
	rel, err := DeviceCgroup(self)
	if err == ErrDeviceCgroupV2 {
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

func TestDeviceRule(t *testing.T) {
	for _, c := range []struct {
		dev    uint64
		access string
		want   string
	}{
		{unix.Mkdev(7, 3), "rwm", "b 7:3 rwm"},
		{unix.Mkdev(259, 1048575), "rw", "b 259:1048575 rw"},
	} {
		if got := deviceRule(c.dev, c.access); got != c.want {
			t.Errorf("deviceRule(%d:%d, %q) = %q, want %q", unix.Major(c.dev), unix.Minor(c.dev), c.access, got, c.want)
		}
	}
	if !allowsAll("a *:* rwm\n") || allowsAll("a *:* rwm\nb 7:3 rwm\n") || allowsAll("b 7:3 rwm\n") {
		t.Error("allowsAll")
	}
}

// A client container keeps no access to its volume's old device number: in
// a cgroup that denies all but its exceptions (an ordinary container's) and
// in one that allows all (a privileged one's), RevokeDevice makes opening
// the old number fail with EPERM, and repeating it changes nothing.
func TestRevokeDevice(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (cgroups, mknod)")
	}
	self, err := OpenProcess(os.Getpid())
	must(t, err)
	_, err = DeviceCgroup(self)
	self.Close()
	if err == ErrDeviceCgroupV2 {
		t.Skip("cgroup v2 machine")
	}
	must(t, err)
	hier := t.TempDir()
	if err := unix.Mount("cgroup", hier, "cgroup", 0, "devices"); err != nil {
		t.Skipf("cannot mount the devices hierarchy: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(hier, unix.MNT_DETACH) })
	// a block major no driver has: an allowed open fails with ENXIO, a
	// denied one with EPERM
	old := unix.Mkdev(240, 7)
	node := filepath.Join(t.TempDir(), "old")
	must(t, unix.Mknod(node, unix.S_IFBLK|0o600, int(old)))

	for name, rules := range map[string][]string{
		"ordinary":   {"devices.deny", "a", "devices.allow", "c 1:3 rwm", "devices.allow", "b 240:7 rw"},
		"privileged": {"devices.allow", "a"},
	} {
		t.Run(name, func(t *testing.T) {
			cg := filepath.Join(hier, fmt.Sprintf("pav-test-%d-%s", os.Getpid(), name))
			must(t, os.Mkdir(cg, 0o755))
			t.Cleanup(func() { _ = os.Remove(cg) })
			for i := 0; i < len(rules); i += 2 {
				must(t, os.WriteFile(filepath.Join(cg, rules[i]), []byte(rules[i+1]), 0))
			}
			// the container: a process in the cgroup; each open is tried
			// by a new process in it
			ctr := exec.Command("sh", "-c", `echo $$ > "$1/cgroup.procs" && echo in && exec sleep 1000`, "sh", cg)
			out, err := ctr.StdoutPipe()
			must(t, err)
			must(t, ctr.Start())
			t.Cleanup(func() { _ = ctr.Process.Kill(); _ = ctr.Wait() })
			if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "in\n" {
				t.Fatalf("the container process did not join its cgroup: %q %v", line, err)
			}
			open := func() string {
				b, _ := exec.Command("sh", "-c", `echo $$ > "$1/cgroup.procs" && exec 3< "$2"`, "sh", cg, node).CombinedOutput()
				return string(b)
			}
			if got := open(); strings.Contains(got, "not permitted") {
				t.Fatalf("the old device cannot be opened before the revocation: %s", got)
			}
			proc, err := OpenProcess(ctr.Process.Pid)
			must(t, err)
			defer proc.Close()
			for range 2 {
				must(t, RevokeDevice(proc, old))
				if got := open(); !strings.Contains(got, "not permitted") {
					t.Errorf("opening the old device after the revocation: %q, want EPERM", got)
				}
			}
			list, err := os.ReadFile(filepath.Join(cg, "devices.list"))
			must(t, err)
			if name == "ordinary" && strings.TrimSpace(string(list)) != "c 1:3 rwm" {
				t.Errorf("devices.list after the revocation:\n%s", list)
			}
		})
	}
}
