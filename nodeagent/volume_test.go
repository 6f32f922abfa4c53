package nodeagent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	mount "k8s.io/mount-utils"
)

func TestResolveInPav(t *testing.T) {
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
			got, err := resolveInPav(dir, "volume")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q (got path %q)", err, tt.wantErr, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := filepath.Join(dir, tt.want); got != want {
				t.Errorf("got %s, want %s", got, want)
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

func TestCheckVolume(t *testing.T) {
	dir := t.TempDir()
	mkdir(t, dir, "d")
	writeFile(t, filepath.Join(dir, "f"), "x")
	if err := checkVolume(filepath.Join(dir, "d"), false, 0); err != nil {
		t.Errorf("directory as filesystem volume: %v", err)
	}
	if err := checkVolume(filepath.Join(dir, "f"), false, 0); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("file as filesystem volume: %v", err)
	}
	if err := checkVolume(filepath.Join(dir, "d"), true, 1<<20); err == nil || !strings.Contains(err.Error(), "not a block device") {
		t.Errorf("directory as block volume: %v", err)
	}
	if err := checkVolume("/dev/null", true, 0); err == nil || !strings.Contains(err.Error(), "not a block device") {
		t.Errorf("character device as block volume: %v", err)
	}
}

func TestPublishTarget(t *testing.T) {
	tests := []struct {
		name     string
		block    bool
		readOnly bool
		nested   bool // the staging pod mounted something inside the volume
		// what we expect in the fake mounter's mount table afterwards
		wantOpts [][]string
	}{
		{name: "filesystem", wantOpts: [][]string{{"rbind"}}},
		{name: "filesystem read-only with a nested mount", readOnly: true, nested: true,
			wantOpts: [][]string{{"rbind", "ro"}, nil}},
		{name: "block", block: true, wantOpts: [][]string{{"bind"}}},
		{name: "block read-only", block: true, readOnly: true, wantOpts: [][]string{{"bind", "ro"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := t.TempDir()
			source := filepath.Join(base, "pav", "volume")
			mkdir(t, base, "pav/volume")
			target := filepath.Join(base, "pods", "uid", "volumes", "mount")
			fake := mount.NewFakeMounter(nil)
			var m mount.Interface = fake
			if tt.nested {
				// Like the kernel, the rbind brings along a mount the staging pod made inside the volume.
				m = &rbindMounter{FakeMounter: fake}
			}
			if err := publishTarget(m, source, target, tt.block, tt.readOnly); err != nil {
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
			if err := publishTarget(m, source, target, tt.block, tt.readOnly); err != nil {
				t.Fatal(err)
			}
			if len(fake.MountPoints) != n {
				t.Errorf("second publish added mounts: %v", fake.MountPoints)
			}
			if err := unpublishTarget(m, target); err != nil {
				t.Fatal(err)
			}
			if len(fake.MountPoints) != 0 {
				t.Errorf("mounts left after unpublish: %v", fake.MountPoints)
			}
			if _, err := os.Stat(target); !os.IsNotExist(err) {
				t.Errorf("target still exists: %v", err)
			}
			if err := unpublishTarget(m, target); err != nil {
				t.Errorf("second unpublish: %v", err)
			}
		})
	}
}

// rbindMounter is a fake mounter whose rbind also shows a nested mount at target/sub.
type rbindMounter struct{ *mount.FakeMounter }

func (r *rbindMounter) Mount(source, target, fstype string, options []string) error {
	if err := r.FakeMounter.Mount(source, target, fstype, options); err != nil {
		return err
	}
	if len(options) > 0 && options[0] == "rbind" {
		r.FakeMounter.MountPoints = append(r.FakeMounter.MountPoints, mount.MountPoint{Device: "tmpfs", Path: filepath.Join(target, "sub")})
	}
	return nil
}

// BindReadOnlyRecursive records the tree as one mount with options rbind,ro
// (and the nested mount the rbind brings along).
func (r *rbindMounter) BindReadOnlyRecursive(source, target string) error {
	return r.Mount(source, target, "", []string{"rbind", "ro"})
}
