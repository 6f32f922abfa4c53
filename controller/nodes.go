package controller

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/albertofaria/pav/protocol"
)

const reasonNodeGone = "NodeGone"

// stripNode keeps only what the controller needs of a Node (its name, its
// labels for topology segments, and for placing capacity pods and choosing
// a node for Immediate binding whether it is schedulable, its taints that
// keep pods away and its Ready condition's status), so that the cache of
// every Node of a large cluster stays small.
func stripNode(obj interface{}) (interface{}, error) {
	if n, ok := obj.(*corev1.Node); ok {
		out := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion, Labels: n.Labels},
			Spec:       corev1.NodeSpec{Unschedulable: n.Spec.Unschedulable},
		}
		for _, t := range n.Spec.Taints {
			if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
				out.Spec.Taints = append(out.Spec.Taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
			}
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				out.Status.Conditions = []corev1.NodeCondition{{Type: c.Type, Status: c.Status}}
			}
		}
		return out, nil
	}
	return obj, nil
}

// nodeUsable: the node is Ready and schedulable, so a pod placed there
// runs.
func nodeUsable(n *corev1.Node) bool {
	if n.Spec.Unschedulable {
		return false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// nodeTainted: the node has a taint that keeps pods without a toleration
// away (NoSchedule, NoExecute).
func nodeTainted(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	})
}

func (c *Controller) onNode(obj interface{}) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	if _, err := c.nodes.Get(n.Name); err == nil {
		return // added or updated: nothing to clean up
	}
	// Deleted: the volumes staged there must learn it.
	for _, pod := range c.podsBy(indexNode, n.Name) {
		if v := pod.Labels[protocol.LabelVolume]; v != "" {
			c.volumeQueue.Add(v)
		}
	}
}

// releaseStagingsOnGoneNodes finishes, for a volume, what the node plugin of
// a node that no longer exists cannot: its staging and unstaging pods lose
// their finalizer and are deleted (their unstaging cannot run anywhere), so
// that the volume's and the provisioner's deletion can go on. An Event on
// the PV says what was skipped.
func (c *Controller) releaseStagingsOnGoneNodes(ctx context.Context, volume string, pv *corev1.PersistentVolume) error {
	for _, pod := range c.podsBy(indexVolume, protocol.LabelValue(volume)) {
		switch phaseOf(pod) {
		case protocol.PhaseStaging, protocol.PhaseUnstaging:
		default:
			continue
		}
		gone, err := c.nodeGone(ctx, pod.Spec.NodeName)
		if err != nil || !gone {
			return err
		}
		if protocol.HasFinalizer(pod, protocol.FinalizerStaging) {
			msg := fmt.Sprintf("node %s no longer exists: %s pod %s/%s released without unstaging (what it set up on that node is not undone)",
				pod.Spec.NodeName, phaseOf(pod), pod.Namespace, pod.Name)
			if pv != nil {
				c.recorder.Event(pv, corev1.EventTypeWarning, reasonNodeGone, msg)
			}
			klog.InfoS("Releasing a PaV pod of a node that is gone", "pod", klog.KObj(pod), "node", pod.Spec.NodeName, "volume", volume)
			if _, err := protocol.RemoveFinalizer(ctx, c.kube.CoreV1().Pods(pod.Namespace).Patch, pod, protocol.FinalizerStaging); err != nil {
				return err
			}
		}
		if pod.DeletionTimestamp == nil {
			zero := int64(0)
			err := c.kube.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &pod.UID}})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return fmt.Errorf("deleting pod %s/%s of a node that is gone: %w", pod.Namespace, pod.Name, err)
			}
		}
	}
	return nil
}

// nodeGone tells whether node name does not exist, confirmed with the API
// server (a cache may not have seen a new node yet).
func (c *Controller) nodeGone(ctx context.Context, name string) (bool, error) {
	if name == "" {
		return false, nil
	}
	if _, err := c.nodes.Get(name); err == nil {
		return false, nil
	}
	_, err := c.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("checking node %s: %w", name, err)
	}
	return false, nil
}
