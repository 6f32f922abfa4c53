package volstats

import (
	"path/filepath"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	mount "k8s.io/mount-utils"
)

// Read tells a volume published no more (NotFound) from one whose mount is
// gone (abnormal, VolumeUnmounted) and from one it can read.
func TestRead(t *testing.T) {
	dir := t.TempDir()
	if _, err := Read(mount.NewFakeMounter(nil), filepath.Join(dir, "none")); status.Code(err) != codes.NotFound {
		t.Errorf("no volume: %v, want NotFound", err)
	}
	st, err := Read(mount.NewFakeMounter(nil), dir)
	if err != nil || !st.Abnormal || st.Reason != ReasonVolumeUnmounted {
		t.Errorf("unmounted: %+v, %v", st, err)
	}
	st, err = Read(mount.NewFakeMounter([]mount.MountPoint{{Path: dir}}), dir)
	if err != nil || st.Abnormal || st.TotalBytes <= 0 || st.TotalInodes < 0 {
		t.Errorf("mounted: %+v, %v", st, err)
	}
}
