//go:build e2e

package staging

import (
	"context"
	"testing"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pavcsi "github.com/albertofaria/pav/csi"
	"github.com/albertofaria/pav/test/e2e/framework"
)

type noStager struct{}

func (noStager) Ready() error                                                  { return nil }
func (noStager) Publish(context.Context, string, *pavcsi.PublishRequest) error { return nil }
func (noStager) Unpublish(context.Context, string, string, string) error       { return nil }
func (noStager) SharedStaging(string) bool                                     { return false }
func (noStager) Stage(context.Context, string, *pavcsi.PublishRequest) error   { return nil }
func (noStager) Unstage(context.Context, string, string, string) error         { return nil }
func (noStager) Stats(context.Context, string, string, string) (*pavcsi.VolumeStats, error) {
	return &pavcsi.VolumeStats{}, nil
}

// TestKubeletRegistration registers a driver with the real kubelet the way
// `pav node` does (this test runs on the node, in the host's mount
// namespace) and checks that kubelet lists it in the CSINode object, then
// that removing it deregisters it.
func TestKubeletRegistration(t *testing.T) {
	f := framework.New(t)
	nodes, err := f.Client.CoreV1().Nodes().List(f.Ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) == 0 {
		t.Fatalf("listing nodes: %v", err)
	}
	node := nodes.Items[0].Name
	const name = "pav-e2e-registration"
	m := pavcsi.NewManager("/var/lib/kubelet", "e2e", node, noStager{})
	start := time.Now()
	if err := m.Add(name); err != nil {
		t.Fatal(err)
	}
	defer m.Remove(name)
	select {
	case <-m.Registered(name):
		t.Logf("kubelet registered the driver after %v", time.Since(start))
	case <-time.After(30 * time.Second):
		t.Fatal("kubelet did not register the driver within 30s")
	}
	hasDriver := func(n *storagev1.CSINode) (bool, error) {
		for _, d := range n.Spec.Drivers {
			if d.Name == name {
				return d.NodeID == node, nil
			}
		}
		return false, nil
	}
	if _, err := framework.WaitFor(f.Ctx, f.Client.StorageV1().CSINodes(), node, 30*time.Second, hasDriver); err != nil {
		t.Fatalf("CSINode never listed the driver: %v", err)
	}
	m.Remove(name)
	if _, err := framework.WaitFor(f.Ctx, f.Client.StorageV1().CSINodes(), node, 30*time.Second, func(n *storagev1.CSINode) (bool, error) {
		ok, err := hasDriver(n)
		return !ok, err
	}); err != nil {
		t.Fatalf("CSINode still lists the driver after removal: %v", err)
	}
}
