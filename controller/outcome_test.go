package controller

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/templating"
)

// fieldCapacityEngine evaluates volumeCreation.capacity to capacity.
type fieldCapacityEngine struct {
	stubEngine
	capacity resource.Quantity
}

func (e fieldCapacityEngine) Creation(ctx context.Context, p *v1alpha1.PavProvisioner, r templating.DynamicRequest) (*templating.CreationConfig, error) {
	cc, err := e.stubEngine.Creation(ctx, p, r)
	if err == nil {
		cc.Capacity = &e.capacity
	}
	return cc, err
}

// A claim's volume takes volumeCreation.capacity before the creation pod's
// /pav/capacity, the same rule an inline volume follows (nodeagent
// TestInlineCreationResultsWin): protocol.ChooseCapacity.
func TestCreationCapacityFieldBeforeFile(t *testing.T) {
	h := newHarness(t, testObjects()...)
	h.engine = fieldCapacityEngine{capacity: resource.MustParse("3Gi")}
	h.restart()
	for i := 0; i < 10 && !h.provisioned(); i++ {
		if err := h.step(); err != nil {
			t.Fatal(err)
		}
	}
	pv, err := h.kube.CoreV1().PersistentVolumes().Get(context.Background(), testVolume, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("no PV: %v\n%s", err, h.describe())
	}
	if got := pv.Spec.Capacity[corev1.ResourceStorage]; got.Cmp(resource.MustParse("3Gi")) != 0 || resultCapacity == "3Gi" {
		t.Errorf("PV capacity %s, want volumeCreation.capacity's 3Gi before /pav/capacity's %s", got.String(), resultCapacity)
	}
}
