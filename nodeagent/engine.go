package nodeagent

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/nodeagent/inline"
	"github.com/albertofaria/pav/templating"
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
	Staging(ctx context.Context, p *v1alpha1.PavProvisioner, req templating.StagingRequest) (*corev1.PodTemplateSpec, error)
	// Unstaging evaluates spec.volumeUnstaging; nil without a pod template.
	Unstaging(ctx context.Context, p *v1alpha1.PavProvisioner, req templating.StagingRequest) (*corev1.PodTemplateSpec, error)
	// inline.Engine: volumeValidation, volumeCreation and volumeDeletion
	// for CSI inline ephemeral volumes.
	inline.Engine

	// Forget drops what was cached for p, a deleted PavProvisioner.
	Forget(p *v1alpha1.PavProvisioner)
}
