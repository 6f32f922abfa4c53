package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/templating"
)

// Engine is what the controller needs from PavProvisioner evaluation. The
// production implementation wraps package templating (see templating.go);
// tests may substitute a literal one. Keeping the surface this small lets the
// reconcile logic be read and tested without Jinja in the way.
type Engine interface {
	// Validate checks a whole PavProvisioner (the same check the admission
	// webhook runs) and returns every problem with its field path.
	Validate(p *v1alpha1.PavProvisioner) field.ErrorList

	// Validation evaluates spec.volumeValidation for a claim and checks the
	// claim against it. A non-nil Unsatisfied in the result means the claim
	// asks for something the provisioner does not offer.
	Validation(ctx context.Context, p *v1alpha1.PavProvisioner, req templating.DynamicRequest) (*ValidationConfig, error)
	// Creation evaluates spec.volumeCreation.
	Creation(ctx context.Context, p *v1alpha1.PavProvisioner, req templating.DynamicRequest) (*templating.CreationConfig, error)
	// Deletion evaluates spec.volumeDeletion; a nil template means no pod.
	Deletion(ctx context.Context, p *v1alpha1.PavProvisioner, req templating.DynamicRequest) (*corev1.PodTemplateSpec, error)
	// Expansion evaluates spec.volumeExpansion for growing req.PV to what
	// req.PVC requests; ok is false if the provisioner cannot expand, a nil
	// template means no pod (the new size is only recorded).
	Expansion(ctx context.Context, p *v1alpha1.PavProvisioner, req templating.DynamicRequest) (tmpl *corev1.PodTemplateSpec, ok bool, err error)
	// Modification evaluates spec.volumeModification for giving req.PV
	// the class req.VolumeAttributesClass; ok is false if the provisioner
	// cannot modify volumes, a nil template means no pod (the class is only
	// recorded).
	Modification(ctx context.Context, p *v1alpha1.PavProvisioner, req templating.DynamicRequest) (tmpl *corev1.PodTemplateSpec, ok bool, err error)
	// SnapshotCreation evaluates spec.snapshotCreation; ok is false if the
	// provisioner cannot take snapshots.
	SnapshotCreation(ctx context.Context, p *v1alpha1.PavProvisioner, req templating.SnapshotRequest) (tmpl *corev1.PodTemplateSpec, ok bool, err error)
	// SnapshotDeletion evaluates spec.snapshotDeletion; a nil template means no pod.
	SnapshotDeletion(ctx context.Context, p *v1alpha1.PavProvisioner, req templating.SnapshotRequest) (*corev1.PodTemplateSpec, error)
	// GroupSnapshotCreation evaluates spec.groupSnapshotCreation; ok is
	// false if the provisioner cannot take group snapshots.
	GroupSnapshotCreation(ctx context.Context, p *v1alpha1.PavProvisioner, req templating.GroupSnapshotRequest) (tmpl *corev1.PodTemplateSpec, ok bool, err error)
	// GroupSnapshotDeletion evaluates spec.groupSnapshotDeletion; a nil
	// template means no pod.
	GroupSnapshotDeletion(ctx context.Context, p *v1alpha1.PavProvisioner, req templating.GroupSnapshotRequest) (*corev1.PodTemplateSpec, error)

	// StorageCapacity evaluates spec.storageCapacity for one segment and
	// class; nil if the provisioner tracks no capacity.
	StorageCapacity(ctx context.Context, p *v1alpha1.PavProvisioner, req templating.CapacityRequest) (*templating.CapacityConfig, error)

	// Forget drops what was cached for p, a deleted PavProvisioner.
	Forget(p *v1alpha1.PavProvisioner)
}

// ValidationConfig is the evaluated spec.volumeValidation.
type ValidationConfig struct {
	// Unsatisfied explains why the claim does not fit volumeModes,
	// accessModes, minCapacity or maxCapacity; nil when it fits.
	Unsatisfied error
	PodTemplate *corev1.PodTemplateSpec
}
