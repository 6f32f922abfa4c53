package nodeagent

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"github.com/albertofaria/pav/kubeclient"
)

// nodeDrivers is csi.NodeDrivers over this node's CSINode: an informer on
// that one object, and updates that remove a driver kubelet left behind.
type nodeDrivers struct {
	kube     kubeclient.Interface
	nodeName string
	csiNodes storagelisters.CSINodeLister
	changed  chan struct{}
}

// newNodeDrivers returns the view of inf, an informer on the CSINode of
// nodeName (which must select only that object).
func newNodeDrivers(kube kubeclient.Interface, nodeName string, inf cache.SharedIndexInformer) (*nodeDrivers, error) {
	nd := &nodeDrivers{kube: kube, nodeName: nodeName, changed: make(chan struct{}, 1)}
	poke := func(interface{}) {
		select {
		case nd.changed <- struct{}{}:
		default:
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: poke, UpdateFunc: func(_, o interface{}) { poke(o) }, DeleteFunc: poke,
	}); err != nil {
		return nil, err
	}
	nd.csiNodes = storagelisters.NewCSINodeLister(inf.GetIndexer())
	return nd, nil
}

func (nd *nodeDrivers) Lists(name string) bool {
	node, err := nd.csiNodes.Get(nd.nodeName)
	if err != nil {
		return false // not in the cache: lists nothing yet
	}
	for _, d := range node.Spec.Drivers {
		if d.Name == name {
			return true
		}
	}
	return false
}

func (nd *nodeDrivers) Changed() <-chan struct{} { return nd.changed }

// Remove deletes driver name from the CSINode, retrying on conflicts with
// kubelet's own updates.
func (nd *nodeDrivers) Remove(ctx context.Context, name string) error {
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		node, err := nd.kube.StorageV1().CSINodes().Get(ctx, nd.nodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		kept := node.Spec.Drivers[:0]
		for _, d := range node.Spec.Drivers {
			if d.Name != name {
				kept = append(kept, d)
			}
		}
		if len(kept) == len(node.Spec.Drivers) {
			return nil
		}
		node.Spec.Drivers = kept
		_, err = nd.kube.StorageV1().CSINodes().Update(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("removing driver %s from CSINode %s: %w", name, nd.nodeName, err)
	}
	return nil
}
