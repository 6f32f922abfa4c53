package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/albertofaria/pav/crds/v1alpha1"
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
	Validation(ctx context.Context, p *v1alpha1.PavProvisioner, req Request) (*ValidationConfig, error)
	// Creation evaluates spec.volumeCreation.
	Creation(ctx context.Context, p *v1alpha1.PavProvisioner, req Request) (*CreationConfig, error)
	// Deletion evaluates spec.volumeDeletion; a nil template means no pod.
	Deletion(ctx context.Context, p *v1alpha1.PavProvisioner, req Request) (*corev1.PodTemplateSpec, error)
	// Expansion evaluates spec.volumeExpansion for growing req.PV to what
	// req.PVC requests; ok is false if the provisioner cannot expand, a nil
	// template means no pod (the new size is only recorded).
	Expansion(ctx context.Context, p *v1alpha1.PavProvisioner, req Request) (tmpl *corev1.PodTemplateSpec, ok bool, err error)

	// Forget drops what was cached for p, a deleted PavProvisioner.
	Forget(p *v1alpha1.PavProvisioner)
}

// Request identifies the volume a dynamic-provisioning phase is evaluated for.
type Request struct {
	PVC   *corev1.PersistentVolumeClaim
	Class *storagev1.StorageClass
	// SelectedNodeName is the node the scheduler chose (WaitForFirstConsumer),
	// else "". Exposed to templates as an extra context variable.
	SelectedNodeName string
	// PV and Handle, for deletion only: the volume being deleted (nil when
	// reverting a failed creation) and its handle ("" if none is known).
	PV     *corev1.PersistentVolume
	Handle string
	// SourcePVC and SourcePV: the claim a clone is made from, and its volume.
	SourcePVC *corev1.PersistentVolumeClaim
	SourcePV  *corev1.PersistentVolume
}

// ValidationConfig is the evaluated spec.volumeValidation.
type ValidationConfig struct {
	// Unsatisfied explains why the claim does not fit volumeModes,
	// accessModes, minCapacity or maxCapacity; nil when it fits.
	Unsatisfied error
	PodTemplate *corev1.PodTemplateSpec
}

// CreationConfig is the evaluated spec.volumeCreation.
type CreationConfig struct {
	Handle       *string                    `json:"handle,omitempty"`
	Capacity     *resource.Quantity         `json:"capacity,omitempty"`
	PodTemplate  *corev1.PodTemplateSpec    `json:"-"`
	NodeAffinity *corev1.VolumeNodeAffinity `json:"nodeAffinity,omitempty"`
}
