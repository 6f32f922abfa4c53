package nodeagent

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	mount "k8s.io/mount-utils"
)

// A client process in its own mount namespace (as a container with private
// mounts) holds the old volume at two places, one through a subPath; it
// renamed the directory above one and planted a symlink to /etc in its
// place. replaceInNamespace replaces both mounts where they are, with the
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
	top, err := mountAt("self", oldVol)
	must(t, err)
	old := volumeMount{Major: top.Major, Minor: top.Minor, Root: top.Root}

	ctr := filepath.Join(base, "ctr")
	must(t, os.MkdirAll(filepath.Join(ctr, "data"), 0o755))
	must(t, os.MkdirAll(filepath.Join(ctr, "part"), 0o755))
	script := strings.Join([]string{
		"set -e",
		"mount --bind " + oldVol + " " + ctr + "/data",
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
	proc, err := openProcess(client.Process.Pid)
	must(t, err)
	defer proc.Close()
	replaced, err := replaceInNamespace(proc, 0, []volumeMount{old}, src, BindOptions{NoSetuidNoDevices: true}, nil)
	if err != nil {
		t.Fatalf("replaceInNamespace: %v", err)
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
	for _, m := range infos {
		if m.MountPoint == "/etc" || strings.HasPrefix(m.MountPoint, "/etc/") {
			t.Errorf("something was mounted where the planted symlink points: %+v", m)
		}
		if _, ok := old.within(m); ok {
			t.Errorf("the old volume is still mounted in the client at %s", m.MountPoint)
		}
	}
}

func TestStaleMountsKeepsTopsOnly(t *testing.T) {
	old := []volumeMount{{Major: 0, Minor: 50, Root: "/vol"}}
	infos := []mount.MountInfo{
		{ID: 1, Major: 0, Minor: 50, Root: "/vol", MountPoint: "/data"},
		{ID: 2, Major: 0, Minor: 50, Root: "/vol/a", MountPoint: "/data/a"},      // nested in /data: goes with it
		{ID: 3, Major: 0, Minor: 50, Root: "/vol/b", MountPoint: `/sub\040path`}, // a subPath, escaped space
		{ID: 4, Major: 0, Minor: 50, Root: "/volume2", MountPoint: "/other"},     // another directory of the same file system
		{ID: 5, Major: 0, Minor: 51, Root: "/vol", MountPoint: "/else"},          // another file system
	}
	got := staleMounts(infos, old)
	want := []staleMount{{id: 1, mountPoint: "/data"}, {id: 3, mountPoint: "/sub path", sub: "b"}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("staleMounts = %+v, want %+v", got, want)
	}
	if m, err := parseVolumeMount(old[0].String()); err != nil || m != old[0] {
		t.Fatalf("parseVolumeMount(%q) = %v, %v", old[0].String(), m, err)
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
	v := volumeMount{Major: 0, Minor: 42, Root: "/volume"}
	for root, want := range map[string]bool{"/volume": true, "/volume//deleted": true, "/volume2": false, "/volume/sub//deleted": true} {
		if _, ok := v.within(mount.MountInfo{Major: 0, Minor: 42, Root: root}); ok != want {
			t.Errorf("within(%q) = %v, want %v", root, ok, want)
		}
	}
}
