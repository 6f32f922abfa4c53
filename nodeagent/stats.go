package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/klog/v2"

	pavcsi "github.com/albertofaria/pav/csi"
	"github.com/albertofaria/pav/kubelet"
	"github.com/albertofaria/pav/protocol"
)

// Reasons of abnormal volumes (VolumeStats.Reason, and the client pod's Event).
const (
	ReasonStagingPodStopped = "StagingPodStopped"
	ReasonVolumeUnmounted   = "VolumeUnmounted"
	ReasonVolumeUnreachable = "VolumeUnreachable"
)

// statsTimeout is how long a stats call waits for a volume's file system.
const statsTimeout = 10 * time.Second

// Stats implements csi.Stager: the usage of the volume published at
// volumePath (statfs of the mount; the device size of a block volume) and
// whether it can still be used. A volume turning abnormal gets a Warning
// Event on its client pod, once per cause. The file system is read by
// s.probes: a volume that does not answer is reported unreachable at once
// instead of pinning a thread per call.
func (s *Stager) Stats(ctx context.Context, driver, volumeID, volumePath string) (*pavcsi.VolumeStats, error) {
	stats, answered, err := s.probes.run(ctx, volumePath, s.readStats)
	switch {
	case err != nil:
		return nil, err
	case !answered:
		stats = &pavcsi.VolumeStats{Abnormal: true, Reason: ReasonVolumeUnreachable,
			Message: fmt.Sprintf("the volume at %s does not answer: reading its usage has taken more than %v", volumePath, s.probes.timeout)}
	case !stats.Abnormal:
		if reason, msg := s.stagingPodHealth(ctx, volumeID, volumePath); reason != "" {
			stats.Abnormal, stats.Reason, stats.Message = true, reason, msg
		}
	}
	id := protocol.StagingID(volumeID, volumePath)
	s.health.observe(ctx, s, id, driver, volumePath, stats)
	if stats.Abnormal && stats.Reason == ReasonVolumeUnreachable && s.recoveries != nil {
		// A run-to-completion staging's volume is gone: recovery restages it.
		if pod, err := s.findPod(ctx, protocol.PhaseStaging, id); err == nil && pod != nil {
			s.recoveries.Add(id)
		}
	}
	return stats, nil
}

// readVolumeStats reads the usage of the volume at volumePath from its file
// system: calls that block for as long as a hung FUSE daemon does.
func (s *Stager) readVolumeStats(volumePath string) (*pavcsi.VolumeStats, error) {
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
		if notMount, err := s.mounter.IsLikelyNotMountPoint(volumePath); err == nil && notMount {
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

// volumeProbes runs the reads of volumes' file systems, which block for as
// long as a hung FUSE daemon does (one OS thread each): each in a goroutine
// of its own, waited for at most timeout, and at most one at a time per
// volume path, so a hung mount pins one thread however often kubelet asks.
type volumeProbes struct {
	timeout time.Duration
	mu      sync.Mutex
	running map[string]bool // volume paths whose read has not returned
}

func newVolumeProbes(timeout time.Duration) *volumeProbes {
	return &volumeProbes{timeout: timeout, running: map[string]bool{}}
}

// run calls read(path) and waits for its answer at most p.timeout (or until
// ctx ends); answered is false if it did not come, or if an earlier read of
// path has not returned yet (then read is not called).
func (p *volumeProbes) run(ctx context.Context, path string, read func(string) (*pavcsi.VolumeStats, error)) (stats *pavcsi.VolumeStats, answered bool, err error) {
	p.mu.Lock()
	if p.running[path] {
		p.mu.Unlock()
		return nil, false, nil
	}
	p.running[path] = true
	p.mu.Unlock()
	return bounded(ctx, p.timeout, func() (*pavcsi.VolumeStats, error) {
		defer func() {
			p.mu.Lock()
			delete(p.running, path)
			p.mu.Unlock()
		}()
		return read(path)
	})
}

// bounded calls f in a goroutine of its own and waits for its answer at
// most timeout, or until ctx ends; answered is false if it did not come. f
// may block for as long as a hung FUSE daemon does: that pins its own
// goroutine (and thread), never the caller.
func bounded[T any](ctx context.Context, timeout time.Duration, f func() (T, error)) (v T, answered bool, err error) {
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

// stagingPodHealth: a long-running staging pod (one that signalled
// /pav/ready) must still run for its volume to work; a run-to-completion
// staging pod is done by design.
func (s *Stager) stagingPodHealth(ctx context.Context, volumeID, volumePath string) (reason, message string) {
	pod, err := s.findPod(ctx, protocol.PhaseStaging, protocol.StagingID(volumeID, volumePath))
	if err != nil || pod == nil {
		return "", "" // not PaV's to judge (e.g. a staging from before an upgrade), or the API is down
	}
	dir, err := protocol.PodHostDir(pod, s.root)
	if err != nil {
		return "", ""
	}
	if _, err := os.Lstat(filepath.Join(dir, protocol.FileReady)); err != nil {
		return "", ""
	}
	if !servingStopped(pod, s.exits) {
		return "", ""
	}
	return ReasonStagingPodStopped, fmt.Sprintf("staging pod %s/%s, which serves this volume, stopped: %s",
		pod.Namespace, pod.Name, describePod(s.exits.withReportedExits(pod)))
}

func blockDeviceSize(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return f.Seek(0, io.SeekEnd)
}

// volumeHealth remembers which stagings are abnormal, so that each cause is
// reported once as an Event on the client pod, and counted in metrics.
type volumeHealth struct {
	mu       sync.Mutex
	abnormal map[string]abnormality // by staging ID
}

// abnormality: why a staging of a driver is abnormal.
type abnormality struct{ driver, reason string }

func newVolumeHealth() *volumeHealth { return &volumeHealth{abnormal: map[string]abnormality{}} }

func (h *volumeHealth) observe(ctx context.Context, s *Stager, id, driver, volumePath string, stats *pavcsi.VolumeStats) {
	h.mu.Lock()
	was := h.abnormal[id].reason
	if stats.Abnormal {
		h.abnormal[id] = abnormality{driver, stats.Reason}
	} else {
		delete(h.abnormal, id)
	}
	h.mu.Unlock()
	if !stats.Abnormal || was == stats.Reason || s.recorder == nil {
		return
	}
	pod, err := s.clientPod(ctx, id, volumePath)
	if err != nil || pod == nil {
		klog.FromContext(ctx).Info("Volume is abnormal; its client pod is unknown", "path", volumePath, "reason", stats.Reason, "message", stats.Message, "err", err)
		return
	}
	s.recorder.Event(pod, corev1.EventTypeWarning, stats.Reason, stats.Message)
}

// counts is how many stagings are abnormal, by driver and reason.
func (h *volumeHealth) counts() map[abnormality]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := map[abnormality]int{}
	for _, a := range h.abnormal {
		n[a]++
	}
	return n
}

// forget drops what is known of a staging that ended.
func (h *volumeHealth) forget(id string) {
	h.mu.Lock()
	delete(h.abnormal, id)
	h.mu.Unlock()
}

// clientPod finds the pod on this node that staging id at volumePath
// serves: the one its staging pod records, or without a staging pod the one
// whose directory holds volumePath.
func (s *Stager) clientPod(ctx context.Context, id, volumePath string) (*corev1.Pod, error) {
	uid, ok := kubelet.PodUIDInPath(volumePath)
	if pod, err := s.findPod(ctx, protocol.PhaseStaging, id); err == nil && pod != nil {
		uid, ok = stagingClient(pod)
	}
	if !ok {
		return nil, fmt.Errorf("no client pod known for %s", volumePath)
	}
	pods, err := s.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", s.node).String()})
	if err != nil {
		return nil, fmt.Errorf("listing this node's pods: %w", err)
	}
	for i := range pods.Items {
		if pods.Items[i].UID == uid {
			return &pods.Items[i], nil
		}
	}
	return nil, nil
}
