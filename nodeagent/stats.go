package nodeagent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/klog/v2"

	pavcsi "github.com/albertofaria/pav/csi"
	"github.com/albertofaria/pav/kubelet"
	"github.com/albertofaria/pav/nodeagent/nodepods"
	"github.com/albertofaria/pav/nodeagent/volstats"
	"github.com/albertofaria/pav/protocol"
)

// ReasonStagingPodStopped: a volume is abnormal (VolumeStats.Reason, and
// the client pod's Event) as its long-running staging pod stopped; the
// reasons its file system gives are volstats'.
const ReasonStagingPodStopped = "StagingPodStopped"

// Stats implements csi.Stager: the usage of the volume published at
// volumePath (statfs of the mount; the device size of a block volume) and
// whether it can still be used. A volume turning abnormal gets a Warning
// Event on its client pod, once per cause. The file system is read by
// s.probes: a volume that does not answer is reported unreachable at once
// instead of pinning a thread per call.
func (s *Stager) Stats(ctx context.Context, driver, volumeID, volumePath string) (*pavcsi.VolumeStats, error) {
	stats, answered, err := s.probes.Run(ctx, volumePath, s.readStats)
	switch {
	case err != nil:
		return nil, err
	case !answered:
		stats = &pavcsi.VolumeStats{Abnormal: true, Reason: volstats.ReasonVolumeUnreachable,
			Message: fmt.Sprintf("the volume at %s does not answer: reading its usage has taken more than %v", volumePath, s.probes.Timeout)}
	case !stats.Abnormal:
		if reason, msg := s.stagingPodHealth(ctx, volumeID, volumePath); reason != "" {
			stats.Abnormal, stats.Reason, stats.Message = true, reason, msg
		}
	}
	id := protocol.StagingID(volumeID, volumePath)
	s.health.observe(ctx, s, id, driver, volumePath, stats)
	if stats.Abnormal && stats.Reason == volstats.ReasonVolumeUnreachable && s.recoveries != nil {
		// A run-to-completion staging's volume is gone: recovery restages it.
		if pod, err := s.nodePods.Find(ctx, protocol.PhaseStaging, id); err == nil && pod != nil {
			s.recoveries.Add(id)
		}
	}
	return stats, nil
}

// stagingPodHealth: a long-running staging pod (one that signalled
// /pav/ready) must still run for its volume to work; a run-to-completion
// staging pod is done by design.
func (s *Stager) stagingPodHealth(ctx context.Context, volumeID, volumePath string) (reason, message string) {
	pod, err := s.nodePods.Find(ctx, protocol.PhaseStaging, protocol.StagingID(volumeID, volumePath))
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
		pod.Namespace, pod.Name, nodepods.Describe(s.exits.withReportedExits(pod)))
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
	if pod, err := s.nodePods.Find(ctx, protocol.PhaseStaging, id); err == nil && pod != nil {
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
