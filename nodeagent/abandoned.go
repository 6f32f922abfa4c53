// Abandoned stagings: unstage volumes kubelet forgot.

package nodeagent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/albertofaria/pav/kubelet"
	"github.com/albertofaria/pav/protocol"
)

// Kubelet calls NodeUnpublishVolume again until it succeeds, but only while it
// remembers the volume. A kubelet that restarts in the middle of unpublishing
// for a client pod that is gone finds the pod's volume directory empty,
// removes it and never calls again: the staging pod, and the deletion of the
// volume, which waits for it, would stay forever. So the node plugin
// unpublishes, as kubelet would have, every staging whose client pod has been
// gone from the API for two sweeps in a row. (A client pod leaves the API
// only once its containers stopped, unless force-deleted: the second sweep
// gives those containers time to stop too.)
const abandonedSweepEvery = 30 * time.Second

// RunAbandonedSweep sweeps every abandonedSweepEvery until ctx ends, then
// waits for the unpublishes it started.
func (s *Stager) RunAbandonedSweep(ctx context.Context) {
	var goneBefore map[string]bool
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		goneBefore = s.sweepAbandoned(ctx, goneBefore)
	}, abandonedSweepEvery)
	s.abandoned.wg.Wait()
}

// abandonedUnpublishes runs each abandoned staging's unpublish on its own
// goroutine, at most one per staging: an unpublish that hangs (say on a
// staging pod's FUSE daemon that never answers) must hold up neither the
// other stagings nor the next sweeps.
type abandonedUnpublishes struct {
	mu      sync.Mutex
	running map[string]bool // staging IDs
	wg      sync.WaitGroup
}

// start runs unpublish for the staging unless one already runs; it reports
// whether it started one.
func (a *abandonedUnpublishes) start(id string, unpublish func()) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.running[id] {
		return false
	}
	if a.running == nil {
		a.running = map[string]bool{}
	}
	a.running[id] = true
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		defer func() {
			a.mu.Lock()
			delete(a.running, id)
			a.mu.Unlock()
		}()
		unpublish()
	}()
	return true
}

// sweepAbandoned starts unpublishing the stagings whose client pod is gone
// now and was gone at the previous sweep (goneBefore), and returns those gone
// now.
func (s *Stager) sweepAbandoned(ctx context.Context, goneBefore map[string]bool) map[string]bool {
	logger := klog.FromContext(ctx)
	gone := map[string]bool{}
	clients := map[string]map[types.UID]bool{} // namespace → UIDs of its pods on this node
	for _, obj := range s.pods.List() {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			continue
		}
		var target, ns string
		var client types.UID
		switch protocol.Phase(pod.Labels[protocol.LabelPhase]) {
		case protocol.PhaseStaging:
			target = pod.Annotations[protocol.AnnotationTargetPath]
			var hasClaim bool
			client, ok = stagingClient(pod)
			ns, _, hasClaim = strings.Cut(pod.Annotations[protocol.AnnotationClaim], "/")
			ok = ok && hasClaim
		case protocol.PhaseInlineCreation, protocol.PhaseInlineDeletion: // a deletion pod left over, its volume deleted
			var v protocol.InlineVolume
			v, ok = protocol.InlineOf(pod)
			ns, client = v.PodNamespace, types.UID(v.PodUID)
		default:
			ok = false
		}
		if !ok {
			continue // not a staging or an inline volume this node plugin made
		}
		if clients[ns] == nil {
			uids, err := s.podsOnNode(ctx, ns)
			if err != nil {
				logger.Error(err, "Looking for abandoned stagings", "namespace", ns)
				continue
			}
			clients[ns] = uids
		}
		if clients[ns][client] {
			continue
		}
		id := pod.Labels[protocol.LabelStagingID]
		gone[id] = true
		if !goneBefore[id] {
			continue
		}
		if target == "" {
			s.abandoned.start(id, func() {
				if err := s.inline.DeleteAbandoned(ctx, pod); err != nil {
					logger.Error(err, "Deleting an inline volume whose pod is gone", "pod", klog.KObj(pod))
				}
			})
			continue
		}
		s.abandoned.start(id, func() {
			if err := s.unpublishAbandoned(ctx, pod, target); err != nil {
				logger.Error(err, "Unstaging a volume whose client pod is gone", "pod", klog.KObj(pod), "target", target)
			}
		})
	}
	return gone
}

// unpublishAbandoned does what kubelet's NodeUnpublishVolume would have done
// for the staging pod's target.
func (s *Stager) unpublishAbandoned(ctx context.Context, pod *corev1.Pod, target string) error {
	var pv corev1.PersistentVolume
	if err := json.Unmarshal([]byte(pod.Annotations[protocol.AnnotationVolumeSnapshot]), &pv); err != nil || pv.Spec.CSI == nil {
		return fmt.Errorf("staging pod %s/%s has no usable PersistentVolume snapshot", pod.Namespace, pod.Name)
	}
	volumeID := pv.Spec.CSI.VolumeHandle
	if protocol.StagingID(volumeID, target) != pod.Labels[protocol.LabelStagingID] {
		return fmt.Errorf("staging pod %s/%s: its labels and annotations do not agree", pod.Namespace, pod.Name)
	}
	klog.FromContext(ctx).Info("Unstaging a volume whose client pod is gone: kubelet did not finish unpublishing it",
		"driver", pv.Spec.CSI.Driver, "volume", volumeID, "pod", klog.KObj(pod), "target", target)
	return s.Unpublish(ctx, pv.Spec.CSI.Driver, volumeID, target)
}

// podsOnNode returns the UIDs of a namespace's pods on this node.
func (s *Stager) podsOnNode(ctx context.Context, ns string) (map[types.UID]bool, error) {
	list, err := s.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + s.node})
	if err != nil {
		return nil, err
	}
	uids := make(map[types.UID]bool, len(list.Items))
	for _, p := range list.Items {
		uids[p.UID] = true
	}
	return uids, nil
}

// stagingClient is the pod a staging pod serves: the one NodePublishVolume
// named, recorded on it, or for a pod made before that was recorded the one
// whose directory holds its target path. A shared staging serves no one pod.
func stagingClient(pod *corev1.Pod) (types.UID, bool) {
	if uid := protocol.PublicationOf(pod).ClientPodUID; uid != "" {
		return uid, true
	}
	return kubelet.PodUIDInPath(pod.Annotations[protocol.AnnotationTargetPath])
}
