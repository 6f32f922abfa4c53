package mounts

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	mount "k8s.io/mount-utils"
)

// A client process in its own mount namespace (as a container with private
// mounts) holds the old volume at two places, one through a subPath; it
// renamed the directory above one and planted a symlink to /etc in its
// place. ReplaceInNamespace replaces both mounts where they are, with the
// same directory of the new volume, and mounts nothing where the symlink
// points.
func TestReplaceInNamespaceFollowsMountsNotPaths(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (mount namespaces)")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("needs unshare(1)")
	}
	base := t.TempDir()
	oldVol, newVol := filepath.Join(base, "old"), filepath.Join(base, "new")
	for _, dir := range []string{oldVol, newVol} {
		must(t, os.MkdirAll(dir, 0o755))
		must(t, unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"))
		t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
		must(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
		must(t, os.WriteFile(filepath.Join(dir, "sub", "which"), []byte(filepath.Base(dir)), 0o644))
	}
	top, err := MountAt("self", oldVol)
	must(t, err)
	old := VolumeMount{Major: top.Major, Minor: top.Minor, Root: top.Root}

	ctr := filepath.Join(base, "ctr")
	must(t, os.MkdirAll(filepath.Join(ctr, "data"), 0o755))
	must(t, os.MkdirAll(filepath.Join(ctr, "part"), 0o755))
	script := strings.Join([]string{
		"set -e",
		"mount --bind " + oldVol + " " + ctr + "/data",
		"mount -o remount,bind,ro " + ctr + "/data", // a readOnly VolumeMount
		"mount --bind " + oldVol + "/sub " + ctr + "/part",
		"umount " + oldVol + " " + newVol, // a container sees only its own copies
		"mv " + ctr + " " + ctr + "2",
		"ln -s /etc " + ctr,
		"echo ready",
		"exec sleep 1000",
	}, "\n")
	client := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", script)
	out, err := client.StdoutPipe()
	must(t, err)
	client.Stderr = os.Stderr
	must(t, client.Start())
	t.Cleanup(func() { _ = client.Process.Kill(); _ = client.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("client did not get ready: %q %v", line, err)
	}

	src, err := os.Open(newVol)
	must(t, err)
	defer src.Close()
	proc, err := OpenProcess(client.Process.Pid)
	must(t, err)
	defer proc.Close()
	replaced, err := ReplaceInNamespace(proc, []VolumeMount{old}, src, BindOptions{NoSetuidNoDevices: true}, nil)
	if err != nil {
		t.Fatalf("ReplaceInNamespace: %v", err)
	}
	want := []string{ctr + "2/data", ctr + "2/part"}
	if strings.Join(replaced, ",") != strings.Join(want, ",") {
		t.Fatalf("replaced %v, want %v", replaced, want)
	}
	for path, content := range map[string]string{ctr + "2/data/sub/which": "new", ctr + "2/part/which": "new"} {
		got, err := exec.Command("nsenter", "-t", itoa(client.Process.Pid), "-m", "cat", path).Output()
		if err != nil || string(got) != content {
			t.Errorf("client reads %q from %s (%v), want %q", got, path, err, content)
		}
	}
	infos, err := mount.ParseMountInfo("/proc/" + itoa(client.Process.Pid) + "/mountinfo")
	must(t, err)
	// The clones keep the read-only flag of the mount they replaced, and
	// get nosuid,nodev as a publish does.
	for mp, want := range map[string][]string{ctr + "2/data": {"ro", "nosuid", "nodev"}, ctr + "2/part": {"rw", "nosuid", "nodev"}} {
		top := mountAtIn(infos, mp)
		if top == nil {
			t.Errorf("nothing mounted at %s in the client", mp)
			continue
		}
		for _, opt := range want {
			if !slices.Contains(top.MountOptions, opt) {
				t.Errorf("the new mount at %s has options %v, want %s", mp, top.MountOptions, opt)
			}
		}
	}
	for _, m := range infos {
		if m.MountPoint == "/etc" || strings.HasPrefix(m.MountPoint, "/etc/") {
			t.Errorf("something was mounted where the planted symlink points: %+v", m)
		}
		if _, ok := old.within(m); ok {
			t.Errorf("the old volume is still mounted in the client at %s", m.MountPoint)
		}
	}
}

// mountAtIn is the top mount at mountPoint in infos.
func mountAtIn(infos []mount.MountInfo, mountPoint string) *mount.MountInfo {
	var top *mount.MountInfo
	for i := range infos {
		if UnescapeMountInfo(infos[i].MountPoint) == mountPoint {
			top = &infos[i]
		}
	}
	return top
}

// A client that made its own user and mount namespace (unshare -Urm, no
// privilege needed) and bound its read-only volume there again: the kernel
// locked the copies of its mounts read-only, but a clone the node plugin
// placed beneath that bind would not be, and the client could remount it
// writable. ReplaceInNamespace refuses such a namespace and leaves it as it
// is; the container's own namespace (outer) is replaced.
func TestReplaceInNamespaceRefusesTheClientsOwnNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (mount namespaces)")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("needs unshare(1)")
	}
	base := t.TempDir()
	oldVol, newVol := filepath.Join(base, "old"), filepath.Join(base, "new")
	for _, dir := range []string{oldVol, newVol} {
		must(t, os.MkdirAll(dir, 0o755))
		must(t, unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"))
		t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	}
	top, err := MountAt("self", oldVol)
	must(t, err)
	old := VolumeMount{Major: top.Major, Minor: top.Minor, Root: top.Root}
	data := filepath.Join(base, "data")
	must(t, os.MkdirAll(data, 0o755))

	// outer: the container's namespace (the node's user namespace), its
	// volume read-only; inner: the client's own, with the volume bound again.
	inner := strings.Join([]string{
		"set -e",
		"mount --bind " + data + " " + data,
		"echo ready",
		"exec sleep 1000",
	}, "\n")
	outer := strings.Join([]string{
		"set -e",
		"mount --bind " + oldVol + " " + data,
		"mount -o remount,bind,ro " + data,
		"umount " + oldVol + " " + newVol,
		"sleep 1000 &",
		"echo $!",
		"exec unshare --user --map-root-user --mount sh -c '" + inner + "'",
	}, "\n")
	client := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", outer)
	out, err := client.StdoutPipe()
	must(t, err)
	client.Stderr = os.Stderr
	must(t, client.Start())
	t.Cleanup(func() { _ = client.Process.Kill(); _ = client.Wait() })
	r := bufio.NewReader(out)
	sibling, err := r.ReadString('\n')
	must(t, err)
	siblingPID, err := strconv.Atoi(strings.TrimSpace(sibling))
	must(t, err)
	t.Cleanup(func() { _ = unix.Kill(siblingPID, unix.SIGKILL) })
	if line, err := r.ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("client did not get ready: %q %v", line, err)
	}

	src, err := os.Open(newVol)
	must(t, err)
	defer src.Close()
	for _, c := range []struct {
		name  string
		pid   int
		depth int
	}{{"the client's own namespace", client.Process.Pid, 1}, {"the container's namespace", siblingPID, 0}} {
		proc, err := OpenProcess(c.pid)
		must(t, err)
		ns, err := proc.openAt("ns/mnt", unix.O_RDONLY)
		must(t, err)
		if got, err := userNSDepth(ns); err != nil || got != c.depth {
			t.Errorf("%s: userNSDepth = %d, %v; want %d", c.name, got, err, c.depth)
		}
		ns.Close()
		before, err := os.ReadFile(proc.path("mountinfo"))
		must(t, err)
		replaced, err := ReplaceInNamespace(proc, []VolumeMount{old}, src, BindOptions{}, nil)
		after, _ := os.ReadFile(proc.path("mountinfo"))
		proc.Close()
		if c.depth == 0 {
			if err != nil || len(replaced) != 1 {
				t.Errorf("%s: replaced %v, err %v; want %s", c.name, replaced, err, data)
			}
			continue
		}
		if !errors.Is(err, ErrOwnNamespace) || len(replaced) != 0 {
			t.Errorf("%s: replaced %v, err %v; want ErrOwnNamespace and nothing replaced", c.name, replaced, err)
		}
		if string(before) != string(after) {
			t.Errorf("%s: its mount table changed:\n%s\n-> \n%s", c.name, before, after)
		}
	}
}

// A reused PID does not lead into another process: a process held by a
// pidfd that ended is gone, whatever now has its PID.
func TestOpenProcessOfAnEndedProcess(t *testing.T) {
	cmd := exec.Command("sleep", "1000")
	must(t, cmd.Start())
	proc, err := OpenProcess(cmd.Process.Pid)
	must(t, err)
	defer proc.Close()
	must(t, proc.alive())
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if err := proc.alive(); !errors.Is(err, ErrProcessGone) {
		t.Errorf("alive() of an ended process: %v, want ErrProcessGone", err)
	}
	if _, err := proc.openAt("ns/mnt", unix.O_RDONLY); err == nil {
		t.Error("opened the namespace of an ended process through its /proc directory")
	}
}

func TestStaleMountsKeepsTopsOnly(t *testing.T) {
	old := []VolumeMount{{Major: 0, Minor: 50, Root: "/vol"}}
	infos := []mount.MountInfo{
		{ID: 1, Major: 0, Minor: 50, Root: "/vol", MountPoint: "/data", MountOptions: []string{"ro", "nosuid", "nodev", "relatime"}},
		{ID: 2, Major: 0, Minor: 50, Root: "/vol/a", MountPoint: "/data/a"},      // nested in /data: goes with it
		{ID: 3, Major: 0, Minor: 50, Root: "/vol/b", MountPoint: `/sub\040path`}, // a subPath, escaped space
		{ID: 4, Major: 0, Minor: 50, Root: "/volume2", MountPoint: "/other"},     // another directory of the same file system
		{ID: 5, Major: 0, Minor: 51, Root: "/vol", MountPoint: "/else"},          // another file system
	}
	got := StaleMounts(infos, old)
	want := []StaleMount{{id: 1, MountPoint: "/data", readOnly: true, noSetuidNoDevices: true}, {id: 3, MountPoint: "/sub path", Sub: "b"}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("StaleMounts = %+v, want %+v", got, want)
	}
	if m, err := ParseVolumeMount(old[0].String()); err != nil || m != old[0] {
		t.Fatalf("ParseVolumeMount(%q) = %v, %v", old[0].String(), m, err)
	}
}

func TestBindOptionsKeeping(t *testing.T) {
	for _, c := range []struct {
		opts BindOptions
		m    StaleMount
		want BindOptions
	}{
		{BindOptions{}, StaleMount{}, BindOptions{}},
		{BindOptions{}, StaleMount{readOnly: true}, BindOptions{ReadOnly: true}},
		{BindOptions{ReadOnly: true}, StaleMount{}, BindOptions{ReadOnly: true}},
		{BindOptions{}, StaleMount{noSetuidNoDevices: true}, BindOptions{NoSetuidNoDevices: true}},
		{BindOptions{NoSetuidNoDevices: true}, StaleMount{readOnly: true}, BindOptions{ReadOnly: true, NoSetuidNoDevices: true}},
	} {
		if got := c.opts.Keeping(c.m); got != c.want {
			t.Errorf("%+v keeping %+v = %+v, want %+v", c.opts, c.m, got, c.want)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestWithinIgnoresDeletedMark(t *testing.T) {
	v := VolumeMount{Major: 0, Minor: 42, Root: "/volume"}
	for root, want := range map[string]bool{"/volume": true, "/volume//deleted": true, "/volume2": false, "/volume/sub//deleted": true} {
		if _, ok := v.within(mount.MountInfo{Major: 0, Minor: 42, Root: root}); ok != want {
			t.Errorf("within(%q) = %v, want %v", root, ok, want)
		}
	}
}

func TestWithinChecksTheFileSystemTypeWhenKnown(t *testing.T) {
	fuse := mount.MountInfo{Major: 0, Minor: 42, Root: "/", FsType: "fuse.gocryptfs"}
	tmpfs := mount.MountInfo{Major: 0, Minor: 42, Root: "/", FsType: "tmpfs"} // the number, given again
	recorded := VolumeMount{Major: 0, Minor: 42, Root: "/", FSType: "fuse.gocryptfs"}
	if _, ok := recorded.within(fuse); !ok {
		t.Error("a mount of the recorded file system is not within it")
	}
	if _, ok := recorded.within(tmpfs); ok {
		t.Error("a tmpfs that got the recorded FUSE volume's device number is taken for it")
	}
	if _, ok := (VolumeMount{Major: 0, Minor: 42, Root: "/"}).within(tmpfs); !ok {
		t.Error("without a recorded type, the device numbers and root decide")
	}
}
