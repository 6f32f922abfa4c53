package mounts

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	mount "k8s.io/mount-utils"
)

func TestOpenInPav(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(t *testing.T, dir string)
		want    string // relative to dir
		wantErr string
	}{
		{
			name:  "plain directory",
			setup: func(t *testing.T, dir string) { mkdir(t, dir, "volume") },
			want:  "volume",
		},
		{
			name:    "missing",
			setup:   func(t *testing.T, dir string) {},
			wantErr: "/pav/volume does not exist",
		},
		{
			name: "absolute link into /pav",
			setup: func(t *testing.T, dir string) {
				mkdir(t, dir, "data/real")
				symlink(t, "/pav/data/real", dir, "volume")
			},
			want: "data/real",
		},
		{
			name: "relative link",
			setup: func(t *testing.T, dir string) {
				mkdir(t, dir, "data/real")
				symlink(t, "data/./real/", dir, "volume")
			},
			want: "data/real",
		},
		{
			name: "chain of links with .. staying inside",
			setup: func(t *testing.T, dir string) {
				mkdir(t, dir, "a/b")
				mkdir(t, dir, "a/c")
				symlink(t, "../c", dir, "a/b/up")
				symlink(t, "/pav/a/b/up", dir, "volume")
			},
			want: "a/c",
		},
		{
			name:    "absolute link outside /pav",
			setup:   func(t *testing.T, dir string) { symlink(t, "/dev/loop0", dir, "volume") },
			wantErr: "/pav/volume escapes /pav (symbolic link /pav/volume points to /dev/loop0)",
		},
		{
			name:    "absolute link to a sibling of /pav sharing its prefix",
			setup:   func(t *testing.T, dir string) { symlink(t, "/pavx/volume", dir, "volume") },
			wantErr: "escapes /pav",
		},
		{
			name:    "relative link climbing out",
			setup:   func(t *testing.T, dir string) { symlink(t, "../../etc", dir, "volume") },
			wantErr: `escapes /pav (".." above /pav)`,
		},
		{
			name: "link in an intermediate directory escaping",
			setup: func(t *testing.T, dir string) {
				symlink(t, "/", dir, "root")
				symlink(t, "root/etc", dir, "volume")
			},
			wantErr: "symbolic link /pav/root points to /",
		},
		{
			name: "link loop",
			setup: func(t *testing.T, dir string) {
				symlink(t, "b", dir, "a")
				symlink(t, "a", dir, "b")
				symlink(t, "a", dir, "volume")
			},
			wantErr: "too many levels of symbolic links",
		},
		{
			name:  "link to /pav itself",
			setup: func(t *testing.T, dir string) { symlink(t, "/pav", dir, "volume") },
			want:  "",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			tt.setup(t, dir)
			f, err := OpenInPav(dir, "/pav", "volume")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if !sameFile(t, f, filepath.Join(dir, tt.want)) {
				t.Errorf("descriptor does not refer to %s", tt.want)
			}
		})
	}
}

func mkdir(t testing.TB, dir, rel string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, rel), 0o755); err != nil {
		t.Fatal(err)
	}
}

func symlink(t testing.TB, target, dir, rel string) {
	t.Helper()
	if err := os.Symlink(target, filepath.Join(dir, rel)); err != nil {
		t.Fatal(err)
	}
}

// sameFile reports whether f refers to the file at path.
func sameFile(t testing.TB, f *os.File, path string) bool {
	t.Helper()
	var a, b unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &a); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(path, &b); err != nil {
		t.Fatal(err)
	}
	return a.Dev == b.Dev && a.Ino == b.Ino
}

func open(t testing.TB, path string) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, unix.O_PATH, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestCheckVolume(t *testing.T) {
	dir := t.TempDir()
	mkdir(t, dir, "d")
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	any := func(uint64) bool { return true }
	if err := CheckVolume(open(t, filepath.Join(dir, "d")), false, 0, nil); err != nil {
		t.Errorf("directory as filesystem volume: %v", err)
	}
	if err := CheckVolume(open(t, filepath.Join(dir, "f")), false, 0, nil); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("file as filesystem volume: %v", err)
	}
	if err := CheckVolume(open(t, filepath.Join(dir, "d")), true, 1<<20, any); err == nil || !strings.Contains(err.Error(), "not a block device") {
		t.Errorf("directory as block volume: %v", err)
	}
	if err := CheckVolume(open(t, "/dev/null"), true, 0, any); err == nil || !strings.Contains(err.Error(), "not a block device") {
		t.Errorf("character device as block volume: %v", err)
	}
	if blk := firstBlockDevice(); blk != "" {
		if err := CheckVolume(open(t, blk), true, 0, func(uint64) bool { return false }); err == nil || !strings.Contains(err.Error(), "was not given") {
			t.Errorf("block device %s the pod was not given: %v", blk, err)
		}
	}
}

func TestCheckBlockSize(t *testing.T) {
	for _, tt := range []struct {
		size, capacity int64
		wantErr        string
	}{
		{size: 1 << 20, capacity: 1 << 20},
		{size: 1<<20 + 512, capacity: 1 << 20},
		{size: 1 << 30, capacity: 1 << 20},
		{size: 1<<20 - 512, capacity: 1 << 20, wantErr: "/pav/volume is a block device of 1048064 bytes, smaller than the volume's capacity of 1048576 bytes"},
		{size: 0, capacity: 1, wantErr: "smaller than the volume's capacity"},
	} {
		err := checkBlockSize(tt.size, tt.capacity)
		if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("size %d, capacity %d: %v, want %q", tt.size, tt.capacity, err, tt.wantErr)
		}
	}
}

func firstBlockDevice() string {
	entries, _ := os.ReadDir("/dev")
	for _, e := range entries {
		if e.Type()&os.ModeDevice != 0 && e.Type()&os.ModeCharDevice == 0 {
			return "/dev/" + e.Name()
		}
	}
	return ""
}

func TestPodDevices(t *testing.T) {
	yes := true
	privileged := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{SecurityContext: &corev1.SecurityContext{Privileged: &yes}}}}}
	if !PodDevices(privileged)(unix.Mkdev(7, 0)) {
		t.Error("a privileged staging pod may hand out any device")
	}
	plain := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{}},
		Volumes: []corev1.Volume{{Name: "null", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/dev/null"}}}}}}
	if PodDevices(plain)(unix.Mkdev(7, 0)) {
		t.Error("an unprivileged staging pod handed out a device it was not given")
	}
	if blk := firstBlockDevice(); blk != "" {
		var st unix.Stat_t
		if err := unix.Stat(blk, &st); err != nil {
			t.Fatal(err)
		}
		plain.Spec.Volumes = append(plain.Spec.Volumes, corev1.Volume{Name: "dev", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: blk}}})
		if !PodDevices(plain)(st.Rdev) {
			t.Errorf("a pod given %s by hostPath may hand it out", blk)
		}
	}
}

// The attack of issue 9: while PaV stages, the staging pod keeps swapping
// /pav/volume between a directory and a symlink to a host directory. Before
// the fix the check and the mount resolved the path separately; now what PaV checked is what it would mount, so no attempt
// may end with a descriptor of the host directory.
func TestOpenInPavRace(t *testing.T) {
	dir := t.TempDir()
	host := t.TempDir() // stands for a host directory outside /pav
	mkdir(t, dir, "volume")
	symlink(t, host, dir, "swap")
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			// An atomic swap, as a staging pod can do with renameat2.
			_ = unix.Renameat2(unix.AT_FDCWD, filepath.Join(dir, "swap"), unix.AT_FDCWD, filepath.Join(dir, "volume"), unix.RENAME_EXCHANGE)
		}
	}()
	// A path-based check-then-open lost this race about once in 5000
	// attempts here: 50000 attempts leave it a chance of e^-10 to go unnoticed.
	const attempts = 50000
	opened := 0
	for i := 0; i < attempts; i++ {
		f, err := OpenInPav(dir, "/pav", "volume")
		if err != nil {
			continue // the symlink was seen and refused, or nothing was there
		}
		opened++
		if sameFile(t, f, host) {
			t.Fatalf("attempt %d: the descriptor refers to the host directory", i)
		}
		if err := CheckVolume(f, false, 0, nil); err != nil {
			t.Fatalf("attempt %d: an opened volume failed its check: %v", i, err)
		}
		f.Close()
	}
	close(stop)
	<-done
	if opened == 0 {
		t.Fatalf("no attempt opened a directory: the race never let a check pass")
	}
	t.Logf("%d of %d attempts opened the pod's directory, none the host's", opened, attempts)
}

func TestPublishTarget(t *testing.T) {
	tests := []struct {
		name     string
		block    bool
		readOnly bool
		nested   bool // the staging pod mounted something inside the volume
		// the provisioner's spec.volumeStaging.allowSetuidAndDevices
		allowSetuid bool
		// what we expect in the fake mounter's mount table afterwards
		wantOpts [][]string
	}{
		{name: "filesystem", wantOpts: [][]string{{"rbind", "nosuid", "nodev"}}},
		{name: "filesystem read-only with a nested mount", readOnly: true, nested: true,
			wantOpts: [][]string{{"rbind", "ro", "nosuid", "nodev"}, nil}},
		{name: "filesystem, setuid and devices allowed", allowSetuid: true, wantOpts: [][]string{{"rbind"}}},
		{name: "block", block: true, wantOpts: [][]string{{"rbind"}}},
		{name: "block read-only", block: true, readOnly: true, wantOpts: [][]string{{"rbind", "ro"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := t.TempDir()
			mkdir(t, base, "pav/volume")
			source := open(t, filepath.Join(base, "pav", "volume"))
			target := filepath.Join(base, "pods", "uid", "volumes", "mount")
			fake := mount.NewFakeMounter(nil)
			m := &FakeBinder{FakeMounter: fake, Nested: tt.nested}
			if err := PublishTarget(m, source, target, BindOptions{Block: tt.block, ReadOnly: tt.readOnly, NoSetuidNoDevices: !tt.block && !tt.allowSetuid}); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(target)
			if err != nil {
				t.Fatal(err)
			}
			if fi.IsDir() == tt.block {
				t.Errorf("target is dir = %v, want %v", fi.IsDir(), !tt.block)
			}
			var got [][]string
			for _, mp := range fake.MountPoints {
				got = append(got, mp.Opts)
			}
			if len(got) != len(tt.wantOpts) {
				t.Fatalf("mounts = %v, want options %v", fake.MountPoints, tt.wantOpts)
			}
			for i := range got {
				if strings.Join(got[i], " ") != strings.Join(tt.wantOpts[i], " ") {
					t.Errorf("mount %d options = %v, want %v", i, got[i], tt.wantOpts[i])
				}
			}
			// A second call finds the mount and does nothing.
			n := len(fake.MountPoints)
			if err := PublishTarget(m, source, target, BindOptions{Block: tt.block, ReadOnly: tt.readOnly, NoSetuidNoDevices: !tt.block && !tt.allowSetuid}); err != nil {
				t.Fatal(err)
			}
			if len(fake.MountPoints) != n {
				t.Errorf("second publish added mounts: %v", fake.MountPoints)
			}
			if err := UnpublishTarget(m, target); err != nil {
				t.Fatal(err)
			}
			if len(fake.MountPoints) != 0 {
				t.Errorf("mounts left after unpublish: %v", fake.MountPoints)
			}
			if _, err := os.Stat(target); !os.IsNotExist(err) {
				t.Errorf("target still exists: %v", err)
			}
			if err := UnpublishTarget(m, target); err != nil {
				t.Errorf("second unpublish: %v", err)
			}
		})
	}
}

// A target left mounted by an earlier publish whose staging pod died (a bind
// of a FUSE mount without its daemon: stat fails with ENOTCONN) is unmounted
// before publishing again; a healthy or absent target is left alone. (The
// chaos soak found a client pod stuck in ContainerCreating on
// "creating target directory: mkdir ...: file exists".)
func TestClearBrokenMount(t *testing.T) {
	target := filepath.Join(t.TempDir(), "mount")
	for _, tt := range []struct {
		name        string
		statErr     error
		wantMounted bool
	}{
		{name: "healthy mount", statErr: nil, wantMounted: true},
		{name: "nothing there", statErr: os.ErrNotExist, wantMounted: true},
		{name: "disconnected FUSE mount", statErr: syscall.ENOTCONN, wantMounted: false},
		{name: "stale mount", statErr: syscall.ESTALE, wantMounted: false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fake := mount.NewFakeMounter([]mount.MountPoint{{Device: "gocryptfs", Path: target, Type: "fuse"}})
			stat := func(p string) (os.FileInfo, error) {
				if tt.statErr != nil {
					return nil, &os.PathError{Op: "stat", Path: p, Err: tt.statErr}
				}
				return nil, nil
			}
			if err := clearBrokenMount(fake, target, stat); err != nil {
				t.Fatal(err)
			}
			if mounted := len(fake.MountPoints) == 1; mounted != tt.wantMounted {
				t.Errorf("mounted after clearBrokenMount = %v, want %v", mounted, tt.wantMounted)
			}
		})
	}
}

// The real bind: the flags are on the target's mount, and on a mount inside
// the volume too, as the client pod sees them. Needs CAP_SYS_ADMIN.
func TestHostMounterBindFDFlags(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("binding needs root")
	}
	for _, tt := range []struct {
		name string
		opts BindOptions
		want []string // in the target's and the nested mount's options
		not  []string
	}{
		{"nosuid,nodev", BindOptions{NoSetuidNoDevices: true}, []string{"nosuid", "nodev", "rw"}, nil},
		{"read-only too", BindOptions{ReadOnly: true, NoSetuidNoDevices: true}, []string{"nosuid", "nodev", "ro"}, nil},
		{"setuid and devices allowed", BindOptions{}, []string{"rw"}, []string{"nosuid", "nodev"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			base := t.TempDir()
			src, target := filepath.Join(base, "src"), filepath.Join(base, "target")
			mkdir(t, base, "src/sub")
			mkdir(t, base, "target")
			// A tmpfs inside the volume (what a staging pod's FUSE mount
			// would be); mounted without nosuid/nodev itself.
			if err := unix.Mount("tmpfs", filepath.Join(src, "sub"), "tmpfs", 0, ""); err != nil {
				t.Skipf("cannot mount here: %v", err)
			}
			t.Cleanup(func() { _ = unix.Unmount(filepath.Join(src, "sub"), unix.MNT_DETACH) })
			source := open(t, src)
			if err := (HostMounter{}).BindFD(source, target, tt.opts); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = unix.Unmount(target, unix.MNT_DETACH) })
			for _, mp := range []string{target, filepath.Join(target, "sub")} {
				opts := mountOptions(t, mp)
				for _, w := range tt.want {
					if !slices.Contains(opts, w) {
						t.Errorf("%s: options %v lack %s", mp, opts, w)
					}
				}
				for _, n := range tt.not {
					if slices.Contains(opts, n) {
						t.Errorf("%s: options %v have %s", mp, opts, n)
					}
				}
			}
		})
	}
}

// mountOptions are the per-mount options of the mount at path in
// /proc/self/mountinfo (the last one mounted there).
func mountOptions(t *testing.T, path string) []string {
	t.Helper()
	infos, err := mount.ParseMountInfo("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var opts []string
	for _, mi := range infos {
		if mi.MountPoint == path {
			opts = mi.MountOptions
		}
	}
	if opts == nil {
		t.Fatalf("nothing mounted at %s", path)
	}
	return opts
}
