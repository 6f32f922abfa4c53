package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/kubeclient"
	"github.com/albertofaria/pav/templating"
)

// NewTemplatingEngine is the production Engine, backed by package templating.
// Compiled templates are cached per PavProvisioner UID and generation;
// get_pvc reads claims from the API server, so templates see what
// `kubectl get pvc -o yaml` shows.
func NewTemplatingEngine(kube kubeclient.Interface) Engine {
	return &templatingEngine{cache: templating.NewCache(), getPVC: PVCGetter(kube)}
}

// PVCGetter is get_pvc for templates evaluated in the cluster.
func PVCGetter(kube kubeclient.Interface) templating.PVCGetter {
	return func(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error) {
		return kube.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
	}
}

type templatingEngine struct {
	cache  *templating.Cache
	getPVC templating.PVCGetter
}

func (e *templatingEngine) Validate(p *v1alpha1.PavProvisioner) field.ErrorList {
	return templating.Validate(p)
}

func (e *templatingEngine) Validation(ctx context.Context, p *v1alpha1.PavProvisioner, req templating.DynamicRequest) (*ValidationConfig, error) {
	c, err := e.cache.Get(p)
	if err != nil {
		return nil, err
	}
	vr, err := templating.DynamicVolumeRequest(req.PVC)
	if err != nil {
		return nil, err
	}
	v, err := c.DynamicValidation(ctx, req, e.getPVC)
	if err != nil {
		return nil, err
	}
	return &ValidationConfig{
		Unsatisfied: v.Check(vr),
		PodTemplate: v.PodTemplate,
	}, nil
}

func (e *templatingEngine) Creation(ctx context.Context, p *v1alpha1.PavProvisioner, req templating.DynamicRequest) (*templating.CreationConfig, error) {
	c, err := e.cache.Get(p)
	if err != nil {
		return nil, err
	}
	return c.Creation(ctx, req, e.getPVC)
}

func (e *templatingEngine) Deletion(ctx context.Context, p *v1alpha1.PavProvisioner, req templating.DynamicRequest) (*corev1.PodTemplateSpec, error) {
	c, err := e.cache.Get(p)
	if err != nil {
		return nil, err
	}
	d, err := c.Deletion(ctx, req, e.getPVC)
	if err != nil {
		return nil, err
	}
	return d.PodTemplate, nil
}

func (e *templatingEngine) Expansion(ctx context.Context, p *v1alpha1.PavProvisioner, req templating.DynamicRequest) (*corev1.PodTemplateSpec, bool, error) {
	c, err := e.cache.Get(p)
	if err != nil {
		return nil, false, err
	}
	x, ok, err := c.Expansion(ctx, req, e.getPVC)
	if err != nil || !ok {
		return nil, ok, err
	}
	return x.PodTemplate, true, nil
}

func (e *templatingEngine) Modification(ctx context.Context, p *v1alpha1.PavProvisioner, req templating.DynamicRequest) (*corev1.PodTemplateSpec, bool, error) {
	c, err := e.cache.Get(p)
	if err != nil {
		return nil, false, err
	}
	x, ok, err := c.Modification(ctx, req, e.getPVC)
	if err != nil || !ok {
		return nil, ok, err
	}
	return x.PodTemplate, true, nil
}

func (e *templatingEngine) StorageCapacity(ctx context.Context, p *v1alpha1.PavProvisioner, req templating.CapacityRequest) (*templating.CapacityConfig, error) {
	c, err := e.cache.Get(p)
	if err != nil {
		return nil, err
	}
	return c.StorageCapacity(ctx, req)
}

func (e *templatingEngine) SnapshotCreation(ctx context.Context, p *v1alpha1.PavProvisioner, req templating.SnapshotRequest) (*corev1.PodTemplateSpec, bool, error) {
	c, err := e.cache.Get(p)
	if err != nil {
		return nil, false, err
	}
	x, ok, err := c.SnapshotCreation(ctx, req, e.getPVC)
	if err != nil || !ok {
		return nil, ok, err
	}
	if x.PodTemplate == nil {
		return nil, true, fmt.Errorf("spec.snapshotCreation.podTemplate evaluated to null: a snapshot creation pod must write /pav/snapshot-handle")
	}
	return x.PodTemplate, true, nil
}

func (e *templatingEngine) SnapshotDeletion(ctx context.Context, p *v1alpha1.PavProvisioner, req templating.SnapshotRequest) (*corev1.PodTemplateSpec, error) {
	c, err := e.cache.Get(p)
	if err != nil {
		return nil, err
	}
	d, err := c.SnapshotDeletion(ctx, req, e.getPVC)
	if err != nil {
		return nil, err
	}
	return d.PodTemplate, nil
}

func (e *templatingEngine) GroupSnapshotCreation(ctx context.Context, p *v1alpha1.PavProvisioner, req templating.GroupSnapshotRequest) (*corev1.PodTemplateSpec, bool, error) {
	c, err := e.cache.Get(p)
	if err != nil {
		return nil, false, err
	}
	x, ok, err := c.GroupSnapshotCreation(ctx, req, e.getPVC)
	if err != nil || !ok {
		return nil, ok, err
	}
	if x.PodTemplate == nil {
		return nil, true, fmt.Errorf("spec.groupSnapshotCreation.podTemplate evaluated to null: a group snapshot creation pod must write /pav/snapshot-handle and /pav/snapshot-handles")
	}
	return x.PodTemplate, true, nil
}

func (e *templatingEngine) GroupSnapshotDeletion(ctx context.Context, p *v1alpha1.PavProvisioner, req templating.GroupSnapshotRequest) (*corev1.PodTemplateSpec, error) {
	c, err := e.cache.Get(p)
	if err != nil {
		return nil, err
	}
	d, err := c.GroupSnapshotDeletion(ctx, req, e.getPVC)
	if err != nil {
		return nil, err
	}
	return d.PodTemplate, nil
}

func (e *templatingEngine) Forget(p *v1alpha1.PavProvisioner) { e.cache.Forget(p.UID) }
