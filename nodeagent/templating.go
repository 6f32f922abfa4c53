package nodeagent

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/templating"
)

// errNoTemplating: package templating's evaluation API has not landed yet.
var errNoTemplating = errors.New("template evaluation is not available in this build")

// NewTemplatingEngine is the production Engine, backed by package templating.
func NewTemplatingEngine(kube kubernetes.Interface) Engine { return &templatingEngine{kube: kube} }

type templatingEngine struct{ kube kubernetes.Interface }

func (e *templatingEngine) CheckStatic(ctx context.Context, p *v1alpha1.PavProvisioner, pv *corev1.PersistentVolume) error {
	return errNoTemplating
}

func (e *templatingEngine) Staging(ctx context.Context, p *v1alpha1.PavProvisioner, req StagingRequest) (*corev1.PodTemplateSpec, error) {
	return nil, errNoTemplating
}

func (e *templatingEngine) Unstaging(ctx context.Context, p *v1alpha1.PavProvisioner, req StagingRequest) (*corev1.PodTemplateSpec, error) {
	return nil, errNoTemplating
}

func (e *templatingEngine) PodName(phase templating.Phase, key string) string {
	return templating.PodName(phase, key)
}

func (e *templatingEngine) NewHostDir(podName string) string { return templating.NewHostDir(podName) }

func (e *templatingEngine) BuildPod(tmpl *corev1.PodTemplateSpec, o PodOptions) *corev1.Pod {
	return templating.BuildPod(tmpl, templating.PodOptions{
		Provisioner: o.Provisioner, Phase: o.Phase, Name: o.Name, Volume: o.Volume, ClaimUID: o.ClaimUID,
		StagingID: o.StagingID, NodeName: o.NodeName, HostDir: o.HostDir, Annotations: o.Annotations,
	})
}
