// Package volstats reads the usage of volumes published on the node from
// their file systems (statfs of the mount; the device size of a block
// volume), within a bound: a hung FUSE daemon pins one goroutine per
// volume, never its caller. Like the mount mechanics it imports no
// client-go.
package volstats

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	mount "k8s.io/mount-utils"

	pavcsi "github.com/albertofaria/pav/csi"
)

// Reasons of abnormal volumes that their file systems tell
// (VolumeStats.Reason, and the client pod's Event).
const (
	ReasonVolumeUnmounted   = "VolumeUnmounted"
	ReasonVolumeUnreachable = "VolumeUnreachable"
)

// DefaultTimeout is how long a stats call waits for a volume's file system.
const DefaultTimeout = 10 * time.Second

// Read reads the usage of the volume at volumePath from its file system
// (m tells whether it is still mounted): calls that block for as long as a
// hung FUSE daemon does (Probes bounds them).
func Read(m mount.Interface, volumePath string) (*pavcsi.VolumeStats, error) {
	var st unix.Stat_t
	err := unix.Stat(volumePath, &st)
	if errors.Is(err, unix.ENOENT) {
		return nil, status.Errorf(codes.NotFound, "no volume is published at %s", volumePath)
	}
	stats := &pavcsi.VolumeStats{Block: err == nil && st.Mode&unix.S_IFMT == unix.S_IFBLK}
	switch {
	case err != nil:
		// e.g. ENOTCONN: a FUSE file system whose daemon is gone
		stats.Abnormal, stats.Reason = true, ReasonVolumeUnreachable
		stats.Message = fmt.Sprintf("the volume at %s cannot be reached: %v", volumePath, err)
	case stats.Block:
		if stats.TotalBytes, err = blockDeviceSize(volumePath); err != nil {
			stats.Abnormal, stats.Reason = true, ReasonVolumeUnreachable
			stats.Message = fmt.Sprintf("the block volume at %s cannot be read: %v", volumePath, err)
		}
	default:
		if notMount, err := m.IsLikelyNotMountPoint(volumePath); err == nil && notMount {
			stats.Abnormal, stats.Reason = true, ReasonVolumeUnmounted
			stats.Message = fmt.Sprintf("the volume is no longer mounted at %s", volumePath)
			break
		}
		var fs unix.Statfs_t
		if err := unix.Statfs(volumePath, &fs); err != nil {
			stats.Abnormal, stats.Reason = true, ReasonVolumeUnreachable
			stats.Message = fmt.Sprintf("the volume at %s cannot be reached: %v", volumePath, err)
			break
		}
		bsize := int64(fs.Bsize)
		stats.TotalBytes, stats.AvailableBytes = int64(fs.Blocks)*bsize, int64(fs.Bavail)*bsize
		stats.UsedBytes = (int64(fs.Blocks) - int64(fs.Bfree)) * bsize
		stats.TotalInodes, stats.FreeInodes = int64(fs.Files), int64(fs.Ffree)
		stats.UsedInodes = stats.TotalInodes - stats.FreeInodes
	}
	return stats, nil
}

// Probes run the reads of volumes' file systems, which block for as
// long as a hung FUSE daemon does (one OS thread each): each in a goroutine
// of its own, waited for at most Timeout, and at most one at a time per
// volume path, so a hung mount pins one thread however often kubelet asks.
type Probes struct {
	Timeout time.Duration // how long Run waits for an answer
	mu      sync.Mutex
	running map[string]bool // volume paths whose read has not returned
}

// NewProbes waits at most timeout for each read.
func NewProbes(timeout time.Duration) *Probes {
	return &Probes{Timeout: timeout, running: map[string]bool{}}
}

// Run calls read(path) and waits for its answer at most p.Timeout (or until
// ctx ends); answered is false if it did not come, or if an earlier read of
// path has not returned yet (then read is not called).
func (p *Probes) Run(ctx context.Context, path string, read func(string) (*pavcsi.VolumeStats, error)) (stats *pavcsi.VolumeStats, answered bool, err error) {
	p.mu.Lock()
	if p.running[path] {
		p.mu.Unlock()
		return nil, false, nil
	}
	p.running[path] = true
	p.mu.Unlock()
	return Bounded(ctx, p.Timeout, func() (*pavcsi.VolumeStats, error) {
		defer func() {
			p.mu.Lock()
			delete(p.running, path)
			p.mu.Unlock()
		}()
		return read(path)
	})
}

// Bounded calls f in a goroutine of its own and waits for its answer at
// most timeout, or until ctx ends; answered is false if it did not come. f
// may block for as long as a hung FUSE daemon does: that pins its own
// goroutine (and thread), never the caller.
func Bounded[T any](ctx context.Context, timeout time.Duration, f func() (T, error)) (v T, answered bool, err error) {
	type answer struct {
		v   T
		err error
	}
	done := make(chan answer, 1)
	go func() {
		v, err := f()
		done <- answer{v, err}
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case a := <-done:
		return a.v, true, a.err
	case <-timer.C:
	case <-ctx.Done():
	}
	return v, false, nil
}

func blockDeviceSize(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return f.Seek(0, io.SeekEnd)
}
