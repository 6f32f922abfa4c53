package nodeagent

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/kubeclient"
	"github.com/albertofaria/pav/templating"
)

// NewTemplatingEngine is the production Engine, backed by package templating
// (compiled templates cached per PavProvisioner UID and generation).
func NewTemplatingEngine(kube kubeclient.Interface) Engine {
	getPVC := func(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error) {
		return kube.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
	}
	return &templatingEngine{cache: templating.NewCache(), getPVC: getPVC}
}

type templatingEngine struct {
	cache  *templating.Cache
	getPVC templating.PVCGetter
}

func (e *templatingEngine) CheckStatic(ctx context.Context, p *v1alpha1.PavProvisioner, pv *corev1.PersistentVolume) error {
	c, err := e.cache.Get(p)
	if err != nil {
		return err
	}
	vr, err := templating.StaticVolumeRequest(pv)
	if err != nil {
		return fmt.Errorf("PersistentVolume %s: %w", pv.Name, err)
	}
	v, err := c.StaticValidation(ctx, templating.StaticRequest{PV: pv}, e.getPVC)
	if err != nil {
		return err
	}
	if err := v.Check(vr); err != nil {
		return fmt.Errorf("PersistentVolume %s does not fit PavProvisioner %s: %w", pv.Name, p.Name, err)
	}
	return nil
}

func (e *templatingEngine) Staging(ctx context.Context, p *v1alpha1.PavProvisioner, req templating.StagingRequest) (*corev1.PodTemplateSpec, error) {
	c, err := e.cache.Get(p)
	if err != nil {
		return nil, err
	}
	s, err := c.Staging(ctx, req, e.getPVC)
	if err != nil {
		return nil, err
	}
	return s.PodTemplate, nil
}

func (e *templatingEngine) Unstaging(ctx context.Context, p *v1alpha1.PavProvisioner, req templating.StagingRequest) (*corev1.PodTemplateSpec, error) {
	c, err := e.cache.Get(p)
	if err != nil {
		return nil, err
	}
	u, err := c.Unstaging(ctx, req, e.getPVC)
	if err != nil {
		return nil, err
	}
	return u.PodTemplate, nil
}

func (e *templatingEngine) InlineValidation(ctx context.Context, p *v1alpha1.PavProvisioner, r templating.DynamicRequest) (*templating.ValidationConfig, error) {
	c, err := e.cache.Get(p)
	if err != nil {
		return nil, err
	}
	return c.InlineValidation(ctx, r, e.getPVC)
}

func (e *templatingEngine) Creation(ctx context.Context, p *v1alpha1.PavProvisioner, r templating.DynamicRequest) (*templating.CreationConfig, error) {
	c, err := e.cache.Get(p)
	if err != nil {
		return nil, err
	}
	return c.Creation(ctx, r, e.getPVC)
}

func (e *templatingEngine) Deletion(ctx context.Context, p *v1alpha1.PavProvisioner, r templating.DynamicRequest) (*corev1.PodTemplateSpec, error) {
	c, err := e.cache.Get(p)
	if err != nil {
		return nil, err
	}
	d, err := c.Deletion(ctx, r, e.getPVC)
	if err != nil {
		return nil, err
	}
	return d.PodTemplate, nil
}

func (e *templatingEngine) Forget(p *v1alpha1.PavProvisioner) { e.cache.Forget(p.UID) }
