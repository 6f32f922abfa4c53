// Package enginetest provides a controller.Engine for tests that do not need
// Jinja: every field of a PavProvisioner is taken literally. A string that
// contains "{{" or "{%" is reported as an evaluation error naming its field,
// which lets tests exercise the controller's handling of template errors.
package enginetest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/albertofaria/pav/controller"
	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/templating"
)

// Literal is the literal Engine.
type Literal struct{}

var _ controller.Engine = Literal{}

func checkLiteral(v interface{}, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch x := v.(type) {
	case string:
		if strings.Contains(x, "{{") || strings.Contains(x, "{%") {
			errs = append(errs, field.Invalid(p, x, "templates are not evaluated by the literal test engine"))
		}
	case []interface{}:
		for i, e := range x {
			errs = append(errs, checkLiteral(e, p.Index(i))...)
		}
	case map[string]interface{}:
		for k, e := range x {
			errs = append(errs, checkLiteral(e, p.Child(k))...)
		}
	}
	return errs
}

func decode(v *v1alpha1.Value, p *field.Path, out interface{}) error {
	if errs := checkLiteral(v.Object, p); len(errs) > 0 {
		return errs.ToAggregate()
	}
	b, err := json.Marshal(v.Object)
	if err != nil {
		return field.Invalid(p, v.Object, err.Error())
	}
	if err := json.Unmarshal(b, out); err != nil {
		return field.Invalid(p, v.Object, err.Error())
	}
	return nil
}

func podTemplate(v *v1alpha1.Value, p *field.Path) (*corev1.PodTemplateSpec, error) {
	if v == nil || v.Object == nil {
		return nil, nil
	}
	t := &corev1.PodTemplateSpec{}
	if err := decode(v, p, t); err != nil {
		return nil, err
	}
	return t, nil
}

func quantity(v *v1alpha1.Value, p *field.Path) (*resource.Quantity, error) {
	if v == nil || v.Object == nil {
		return nil, nil
	}
	var s interface{}
	if err := decode(v, p, &s); err != nil {
		return nil, err
	}
	q, err := resource.ParseQuantity(fmt.Sprint(s))
	if err != nil {
		return nil, field.Invalid(p, s, err.Error())
	}
	return &q, nil
}

// Validate checks what the literal engine can check.
func (Literal) Validate(p *v1alpha1.PavProvisioner) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if len(p.Spec.ProvisioningModes) == 0 {
		errs = append(errs, field.Required(spec.Child("provisioningModes"), "at least one provisioning mode is required"))
	}
	if p.Spec.VolumeStaging == nil || p.Spec.VolumeStaging.PodTemplate == nil {
		errs = append(errs, field.Required(spec.Child("volumeStaging", "podTemplate"), ""))
	}
	if v := p.Spec.VolumeValidation; v != nil {
		if _, err := quantity(v.MinCapacity, spec.Child("volumeValidation", "minCapacity")); err != nil {
			errs = append(errs, field.Invalid(spec.Child("volumeValidation", "minCapacity"), "", err.Error()))
		}
	}
	return errs
}

func (Literal) Validation(ctx context.Context, p *v1alpha1.PavProvisioner, req templating.DynamicRequest) (*controller.ValidationConfig, error) {
	out := &controller.ValidationConfig{}
	v := p.Spec.VolumeValidation
	if v == nil {
		return out, nil
	}
	base := field.NewPath("spec", "volumeValidation")
	var err error
	if out.PodTemplate, err = podTemplate(v.PodTemplate, base.Child("podTemplate")); err != nil {
		return nil, err
	}
	modes := []string{string(corev1.PersistentVolumeFilesystem)}
	if v.VolumeModes != nil {
		if err := decode(v.VolumeModes, base.Child("volumeModes"), &modes); err != nil {
			return nil, err
		}
	}
	mode := string(corev1.PersistentVolumeFilesystem)
	if req.PVC.Spec.VolumeMode != nil {
		mode = string(*req.PVC.Spec.VolumeMode)
	}
	if !contains(modes, mode) {
		out.Unsatisfied = fmt.Errorf("volume mode %s is not one of %v", mode, modes)
		return out, nil
	}
	if v.AccessModes != nil {
		var access []string
		if err := decode(v.AccessModes, base.Child("accessModes"), &access); err != nil {
			return nil, err
		}
		for _, m := range req.PVC.Spec.AccessModes {
			if !contains(access, string(m)) {
				out.Unsatisfied = fmt.Errorf("access mode %s is not one of %v", m, access)
				return out, nil
			}
		}
	}
	min, err := quantity(v.MinCapacity, base.Child("minCapacity"))
	if err != nil {
		return nil, err
	}
	max, err := quantity(v.MaxCapacity, base.Child("maxCapacity"))
	if err != nil {
		return nil, err
	}
	reqQ := req.PVC.Spec.Resources.Requests[corev1.ResourceStorage]
	if max != nil && reqQ.Cmp(*max) > 0 {
		out.Unsatisfied = fmt.Errorf("requested capacity %s exceeds the maximum %s", reqQ.String(), max.String())
	}
	if lim, ok := req.PVC.Spec.Resources.Limits[corev1.ResourceStorage]; ok && min != nil && lim.Cmp(*min) < 0 {
		out.Unsatisfied = fmt.Errorf("capacity limit %s is below the minimum %s", lim.String(), min.String())
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (Literal) Creation(ctx context.Context, p *v1alpha1.PavProvisioner, req templating.DynamicRequest) (*templating.CreationConfig, error) {
	out := &templating.CreationConfig{}
	c := p.Spec.VolumeCreation
	if c == nil {
		return out, nil
	}
	base := field.NewPath("spec", "volumeCreation")
	var err error
	if out.PodTemplate, err = podTemplate(c.PodTemplate, base.Child("podTemplate")); err != nil {
		return nil, err
	}
	if c.Handle != nil && c.Handle.Object != nil {
		var h string
		if err := decode(c.Handle, base.Child("handle"), &h); err != nil {
			return nil, err
		}
		out.Handle = &h
	}
	if out.Capacity, err = quantity(c.Capacity, base.Child("capacity")); err != nil {
		return nil, err
	}
	if c.NodeAffinity != nil && c.NodeAffinity.Object != nil {
		out.NodeAffinity = &corev1.VolumeNodeAffinity{}
		if err := decode(c.NodeAffinity, base.Child("nodeAffinity"), out.NodeAffinity); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (Literal) Deletion(ctx context.Context, p *v1alpha1.PavProvisioner, req templating.DynamicRequest) (*corev1.PodTemplateSpec, error) {
	if p.Spec.VolumeDeletion == nil {
		return nil, nil
	}
	return podTemplate(p.Spec.VolumeDeletion.PodTemplate, field.NewPath("spec", "volumeDeletion", "podTemplate"))
}

func (Literal) Expansion(ctx context.Context, p *v1alpha1.PavProvisioner, req templating.DynamicRequest) (*corev1.PodTemplateSpec, bool, error) {
	if p.Spec.VolumeExpansion == nil {
		return nil, false, nil
	}
	tmpl, err := podTemplate(p.Spec.VolumeExpansion.PodTemplate, field.NewPath("spec", "volumeExpansion", "podTemplate"))
	return tmpl, true, err
}

func (Literal) Modification(ctx context.Context, p *v1alpha1.PavProvisioner, req templating.DynamicRequest) (*corev1.PodTemplateSpec, bool, error) {
	if p.Spec.VolumeModification == nil {
		return nil, false, nil
	}
	tmpl, err := podTemplate(p.Spec.VolumeModification.PodTemplate, field.NewPath("spec", "volumeModification", "podTemplate"))
	return tmpl, true, err
}

func (Literal) StorageCapacity(ctx context.Context, p *v1alpha1.PavProvisioner, req templating.CapacityRequest) (*templating.CapacityConfig, error) {
	sc := p.Spec.StorageCapacity
	if sc == nil {
		return nil, nil
	}
	base := field.NewPath("spec", "storageCapacity")
	out := &templating.CapacityConfig{}
	var err error
	if out.PodTemplate, err = podTemplate(sc.PodTemplate, base.Child("podTemplate")); err != nil {
		return nil, err
	}
	if out.Capacity, err = quantity(sc.Capacity, base.Child("capacity")); err != nil {
		return nil, err
	}
	return out, nil
}

func (Literal) SnapshotCreation(ctx context.Context, p *v1alpha1.PavProvisioner, req templating.SnapshotRequest) (*corev1.PodTemplateSpec, bool, error) {
	if p.Spec.SnapshotCreation == nil {
		return nil, false, nil
	}
	tmpl, err := podTemplate(p.Spec.SnapshotCreation.PodTemplate, field.NewPath("spec", "snapshotCreation", "podTemplate"))
	return tmpl, true, err
}

func (Literal) SnapshotDeletion(ctx context.Context, p *v1alpha1.PavProvisioner, req templating.SnapshotRequest) (*corev1.PodTemplateSpec, error) {
	if p.Spec.SnapshotDeletion == nil {
		return nil, nil
	}
	return podTemplate(p.Spec.SnapshotDeletion.PodTemplate, field.NewPath("spec", "snapshotDeletion", "podTemplate"))
}

func (Literal) GroupSnapshotCreation(ctx context.Context, p *v1alpha1.PavProvisioner, req templating.GroupSnapshotRequest) (*corev1.PodTemplateSpec, bool, error) {
	if p.Spec.GroupSnapshotCreation == nil {
		return nil, false, nil
	}
	tmpl, err := podTemplate(p.Spec.GroupSnapshotCreation.PodTemplate, field.NewPath("spec", "groupSnapshotCreation", "podTemplate"))
	return tmpl, true, err
}

func (Literal) GroupSnapshotDeletion(ctx context.Context, p *v1alpha1.PavProvisioner, req templating.GroupSnapshotRequest) (*corev1.PodTemplateSpec, error) {
	if p.Spec.GroupSnapshotDeletion == nil {
		return nil, nil
	}
	return podTemplate(p.Spec.GroupSnapshotDeletion.PodTemplate, field.NewPath("spec", "groupSnapshotDeletion", "podTemplate"))
}

func (Literal) Forget(*v1alpha1.PavProvisioner) {}
