package mounts

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/klog/v2"
	mount "k8s.io/mount-utils"
)

// CleanupDir unmounts everything mounted at or under dir, deepest first
// (Bidirectional mounts made by pods outlive them), then removes dir. If a
// mount cannot be removed the directory is left alone: removing files
// through a live mount would destroy the volume's data.
func CleanupDir(m mount.Interface, dir string) error {
	if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := UnmountUnder(m, dir); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("removing %s: %w", dir, err)
	}
	return nil
}

// UnmountUnder unmounts every mount at or below path, deepest first, until
// none is left (mounts may be stacked on one path).
func UnmountUnder(m mount.Interface, path string) error {
	path = filepath.Clean(path)
	for attempt := 0; ; attempt++ {
		mps, err := mountsUnder(m, path)
		if err != nil {
			return err
		}
		if len(mps) == 0 {
			return nil
		}
		if attempt >= 8 {
			return fmt.Errorf("mounts remain under %s after unmounting: %s", path, strings.Join(mps, ", "))
		}
		for _, mp := range mps {
			klog.V(3).InfoS("Unmounting", "path", mp)
			if err := m.Unmount(mp); err != nil {
				return fmt.Errorf("unmounting %s: %w", mp, err)
			}
		}
	}
}

// mountsUnder lists mount points at or below path, deepest first.
func mountsUnder(m mount.Interface, path string) ([]string, error) {
	list, err := m.List()
	if err != nil {
		return nil, fmt.Errorf("listing mounts: %w", err)
	}
	var out []string
	seen := map[string]bool{}
	for _, mp := range list {
		p := filepath.Clean(mp.Path)
		if (p == path || strings.HasPrefix(p, path+"/")) && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		di, dj := strings.Count(out[i], "/"), strings.Count(out[j], "/")
		if di != dj {
			return di > dj
		}
		return out[i] > out[j]
	})
	return out, nil
}
