package mounts

import (
	"strings"
	"testing"

	mount "k8s.io/mount-utils"
)

// TestDecidePreflight: missing system calls a publish needs, or a kubelet
// directory on a mount that is not shared, make the node not ready with a
// message that says what and how to fix it; a kernel without
// MOVE_MOUNT_BENEATH only warns.
func TestDecidePreflight(t *testing.T) {
	modern := KernelFeatures{Release: "6.8.0", Openat2: true, OpenTree: true, MountSetattr: true, MoveMount: true, MoveMountBeneath: true}
	noBeneath := modern
	noBeneath.Release, noBeneath.MoveMountBeneath = "6.1.0", false
	old := KernelFeatures{Release: "5.4.0", OpenTree: true, MoveMount: true}
	mnt := func(point string, fields ...string) mount.MountInfo {
		return mount.MountInfo{MountPoint: point, OptionalFields: fields}
	}
	root := mnt("/", "shared:1")
	for _, c := range []struct {
		name               string
		kernel             KernelFeatures
		mounts             []mount.MountInfo
		problems, warnings []string // substrings, one per problem or warning
	}{
		{"modern kernel, shared kubelet dir", modern, []mount.MountInfo{mnt("/", "master:1"), mnt("/var/lib/kubelet", "shared:7", "master:3")}, nil, nil},
		{"under a shared mount", modern, []mount.MountInfo{mnt("/"), mnt("/var", "shared:2")}, nil, nil},
		{"no MOVE_MOUNT_BENEATH", noBeneath, []mount.MountInfo{root}, nil,
			[]string{"kernel 6.1.0 lacks move_mount's MOVE_MOUNT_BENEATH (Linux 6.5)"}},
		{"kernel too old", old, []mount.MountInfo{root},
			[]string{"kernel 5.4.0 lacks openat2 (Linux 5.6), mount_setattr (Linux 5.12), which publishing a volume needs: PaV needs Linux 5.12 or newer"},
			[]string{"MOVE_MOUNT_BENEATH"}},
		{"HostToContainer", modern, []mount.MountInfo{root, mnt("/var/lib/kubelet", "master:3")},
			[]string{"/var/lib/kubelet is on mount /var/lib/kubelet, which is a slave (mountPropagation: HostToContainer), not shared: volumes the node plugin mounts there would not reach kubelet or the client pods; mount /var/lib/kubelet into the node plugin with mountPropagation: Bidirectional"}, nil},
		{"private", modern, []mount.MountInfo{root, mnt("/var/lib/kubelet")},
			[]string{"/var/lib/kubelet is on mount /var/lib/kubelet, which is private, not shared"}, nil},
		{"a private mount on top of a shared one", modern, []mount.MountInfo{root, mnt("/var/lib/kubelet", "shared:4"), mnt("/var/lib/kubelet")},
			[]string{"which is private"}, nil},
		{"a mount point that merely begins alike", modern, []mount.MountInfo{mnt("/"), mnt("/var/lib/kube", "shared:4")},
			[]string{"/var/lib/kubelet is on mount /, which is private"}, nil},
		{"both", old, []mount.MountInfo{mnt("/")}, []string{"lacks openat2", "is on mount /, which is private"}, []string{"MOVE_MOUNT_BENEATH"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := DecidePreflight(PreflightInput{Kernel: c.kernel, KubeletDir: "/var/lib/kubelet/", Mounts: c.mounts})
			check := func(what string, got, want []string) {
				if len(got) != len(want) {
					t.Fatalf("%s %q, want %d matching %q", what, got, len(want), want)
				}
				for i := range want {
					if !strings.Contains(got[i], want[i]) {
						t.Errorf("%s %d: %q, want it to contain %q", what, i, got[i], want[i])
					}
				}
			}
			check("problems", r.Problems, c.problems)
			check("warnings", r.Warnings, c.warnings)
			if (r.NotReady() != nil) != (len(c.problems) > 0) {
				t.Errorf("not ready: %v, with problems %q", r.NotReady(), r.Problems)
			}
		})
	}
}

// TestProbeKernel: this machine's kernel has what the tests run on (the
// probe must not mistake a present call for a missing one).
func TestProbeKernel(t *testing.T) {
	k := ProbeKernel()
	if k.Release == "" || !k.Openat2 || !k.OpenTree || !k.MoveMount || !k.MountSetattr {
		t.Errorf("probe: %+v", k)
	}
}
