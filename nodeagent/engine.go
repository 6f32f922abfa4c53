package nodeagent

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/protocol"
)

// Engine is what the node plugin needs from PavProvisioner evaluation. The
// production implementation wraps package templating (templating.go); unit
// tests use a literal one.
type Engine interface {
	// CheckStatic evaluates spec.volumeValidation with the static context
	// of pv and checks pv against it (volume mode, access modes, capacity).
	// A non-nil error explains to the user why the PV does not fit.
	CheckStatic(ctx context.Context, p *v1alpha1.PavProvisioner, pv *corev1.PersistentVolume) error
	// Staging evaluates spec.volumeStaging.
	Staging(ctx context.Context, p *v1alpha1.PavProvisioner, req StagingRequest) (*corev1.PodTemplateSpec, error)
	// Unstaging evaluates spec.volumeUnstaging; nil without a pod template.
	Unstaging(ctx context.Context, p *v1alpha1.PavProvisioner, req StagingRequest) (*corev1.PodTemplateSpec, error)

	// Forget drops what was cached for p, a deleted PavProvisioner.
	Forget(p *v1alpha1.PavProvisioner)

	// PodName is the deterministic name of a phase's pod for a key.
	PodName(phase protocol.Phase, key string) string
	// NewHostDir picks a fresh host directory for a new pod's /pav.
	NewHostDir(podName string) string
	// BuildPod turns an evaluated template into the pod PaV creates.
	BuildPod(tmpl *corev1.PodTemplateSpec, opts PodOptions) *corev1.Pod
}

// StagingRequest is the context of volumeStaging and volumeUnstaging.
type StagingRequest struct {
	PVC      *corev1.PersistentVolumeClaim
	PV       *corev1.PersistentVolume
	Node     *corev1.Node
	ReadOnly bool
}

// PodOptions say what a staging or unstaging pod is for.
type PodOptions struct {
	Provisioner string
	Phase       protocol.Phase
	Name        string
	Volume      string // PV name
	ClaimUID    string
	StagingID   string
	NodeName    string
	HostDir     string
	Annotations map[string]string
}
