package mounts

import (
	"fmt"
	"os"
	"path/filepath"

	mount "k8s.io/mount-utils"
)

// FakeBinder is a fake mounter for tests (mount-utils' FakeMounter plus
// FDBinder): a bind of a descriptor records one mount of the path it
// refers to, with options rbind (plus ro, nosuid and nodev as asked) and,
// when Nested, the mount the staging pod made inside the volume, which a
// recursive bind brings along.
type FakeBinder struct {
	*mount.FakeMounter
	Nested bool
}

func (r *FakeBinder) BindFD(source *os.File, target string, o BindOptions) error {
	opts := []string{"rbind"}
	if o.ReadOnly {
		opts = append(opts, "ro")
	}
	if o.NoSetuidNoDevices {
		opts = append(opts, "nosuid", "nodev")
	}
	// Record the path the descriptor really refers to.
	path, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", source.Fd()))
	if err != nil {
		return err
	}
	if err := r.FakeMounter.Mount(path, target, "", opts); err != nil {
		return err
	}
	if r.Nested {
		r.FakeMounter.MountPoints = append(r.FakeMounter.MountPoints, mount.MountPoint{Device: "tmpfs", Path: filepath.Join(target, "sub")})
	}
	return nil
}
