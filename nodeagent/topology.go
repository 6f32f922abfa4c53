package nodeagent

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/albertofaria/pav/protocol"
)

// ReasonMissingTopologyLabel: a Warning Event on a Node that lacks a label
// of a provisioner's spec.topologyKeys.
const ReasonMissingTopologyLabel = "MissingTopologyLabel"

// HasTopology: the driver's PavProvisioner has topology keys.
func (s *Stager) HasTopology(driver string) bool {
	p, err := s.provisioner(driver)
	return err == nil && len(p.Spec.TopologyKeys) > 0
}

// NodeTopology is this node's segment for the driver's (PavProvisioner's)
// topology keys, which NodeGetInfo reports as its accessible topology; nil
// for a provisioner without topology keys, or for one that is gone (a driver
// drained while kubelet still tracks volumes of it is served again after a
// restart, and kubelet must register it to unmount them). A node lacking one of the labels
// reports none (kubelet would refuse a partial segment) and gets a Warning
// Event: it belongs to no segment, so the scheduler places no volume of the
// provisioner with node affinity or capacity for a segment there.
func (s *Stager) NodeTopology(ctx context.Context, driver string) (map[string]string, error) {
	p, err := s.provisioners.Get(driver)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, status.Errorf(codes.Internal, "looking up PavProvisioner %s: %v", driver, err)
	}
	if len(p.Spec.TopologyKeys) == 0 {
		return nil, nil
	}
	// Kubelet asks once, when the driver registers, and a failed
	// registration is not retried: wait out a short API outage.
	var node *corev1.Node
	err = wait.PollUntilContextTimeout(ctx, time.Second, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		node, err = s.kube.CoreV1().Nodes().Get(ctx, s.node, metav1.GetOptions{})
		return err == nil, nil
	})
	if node == nil {
		return nil, status.Errorf(codes.Unavailable, "getting node %s for its topology labels: %v", s.node, err)
	}
	seg, missing := protocol.NodeSegment(p.Spec.TopologyKeys, node.Labels)
	if missing != "" {
		msg := protocol.MissingTopologyLabel(s.node, p.Name, missing)
		klog.InfoS("Reporting no topology for a CSI driver", "driver", driver, "node", s.node, "reason", msg)
		if s.recorder != nil {
			s.recorder.Event(node, corev1.EventTypeWarning, ReasonMissingTopologyLabel,
				msg+"; label the node, then restart its PaV node plugin so that kubelet registers the driver again")
		}
		return nil, nil
	}
	return seg, nil
}
