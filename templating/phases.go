package templating

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/protocol"
)

// sectionValues is the typed form of any section's fields.
type sectionValues struct {
	VolumeModes  []corev1.PersistentVolumeMode
	AccessModes  []corev1.PersistentVolumeAccessMode
	MinCapacity  *resource.Quantity
	MaxCapacity  *resource.Quantity
	Handle       *string
	Capacity     *resource.Quantity
	NodeAffinity *corev1.VolumeNodeAffinity
	PodTemplate  *corev1.PodTemplateSpec
}

// ValidationConfig is the evaluated spec.volumeValidation, defaults applied.
type ValidationConfig struct {
	VolumeModes []corev1.PersistentVolumeMode       // default [Filesystem]
	AccessModes []corev1.PersistentVolumeAccessMode // default ReadWriteOnce, ReadOnlyMany, ReadWriteMany
	MinCapacity *resource.Quantity                  // nil: no minimum
	MaxCapacity *resource.Quantity                  // nil: no maximum
	PodTemplate *corev1.PodTemplateSpec             // nil: no validation pod
	// Evaluated is the section as evaluated, fields named as in the spec.
	Evaluated map[string]interface{}
}

// CreationConfig is the evaluated spec.volumeCreation (all nil when absent).
// The controller records it as JSON on the creation pod (the fields that
// decide the PV), so a restarted controller makes the PV this evaluation
// meant.
type CreationConfig struct {
	Handle       *string                    `json:"handle,omitempty"`
	Capacity     *resource.Quantity         `json:"capacity,omitempty"`
	PodTemplate  *corev1.PodTemplateSpec    `json:"-"`
	NodeAffinity *corev1.VolumeNodeAffinity `json:"nodeAffinity,omitempty"`
	Evaluated    map[string]interface{}     `json:"-"`
	// VolumeAttributesClassName is not a field of the section: the
	// VolumeAttributesClass the creation context had (vac), which the PV
	// records; set by the controller, recorded with the rest.
	VolumeAttributesClassName string `json:"volumeAttributesClassName,omitempty"`
}

// Record is the annotation that records c on its creation pod
// (protocol.AnnotationCreationConfig), read back by RecordedCreation.
func (c *CreationConfig) Record() (map[string]string, error) {
	raw, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("recording the evaluated spec.volumeCreation: %w", err)
	}
	return map[string]string{protocol.AnnotationCreationConfig: string(raw)}, nil
}

// RecordedCreation is the CreationConfig recorded on a creation pod (the
// fields that decide the volume; no pod template); empty if the pod has no
// record.
func RecordedCreation(pod *corev1.Pod) (*CreationConfig, error) {
	cc := &CreationConfig{}
	raw, ok := pod.Annotations[protocol.AnnotationCreationConfig]
	if !ok {
		return cc, nil
	}
	if err := json.Unmarshal([]byte(raw), cc); err != nil {
		return nil, fmt.Errorf("reading annotation %s of creation pod %s/%s: %w", protocol.AnnotationCreationConfig, pod.Namespace, pod.Name, err)
	}
	return cc, nil
}

// PodConfig is an evaluated section that only holds a pod template
// (deletion, staging, unstaging). PodTemplate nil means no pod, except for
// staging, which always has one.
type PodConfig struct {
	PodTemplate *corev1.PodTemplateSpec
	Evaluated   map[string]interface{}
}

// evaluate evaluates a section (nil: absent) with vars and reads it typed,
// leaving out the fields named in omit (they do not apply to this use).
func (c *Compiled) evaluate(ctx context.Context, s *section, vars map[string]interface{}, get PVCGetter, omit ...string) (map[string]interface{}, *sectionValues, error) {
	if s == nil {
		return map[string]interface{}{}, &sectionValues{}, nil
	}
	e := &env{vars: vars, fns: functions(ctx, get)}
	out := make(map[string]interface{}, len(s.fields))
	var errs field.ErrorList
	if s.whole != nil {
		v, fe := s.whole.eval(s.path, e)
		if len(fe) > 0 {
			return nil, nil, fe.ToAggregate()
		}
		switch x := v.(type) {
		case nil:
		case map[string]interface{}:
			out = x
		default:
			return nil, nil, field.ErrorList{field.Invalid(s.path, describe(v), "a section written as one template must evaluate to an object (use {% set yaml = true %})")}.ToAggregate()
		}
		for _, k := range omit {
			delete(out, k)
		}
		for k, v := range out {
			if v == nil {
				delete(out, k)
			}
		}
	}
	for _, k := range sortedFieldKeys(s.fields) {
		if slices.Contains(omit, k) {
			continue
		}
		v, fe := s.fields[k].eval(s.path.Child(k), e)
		errs = append(errs, fe...)
		if v != nil {
			out[k] = v
		}
	}
	if len(errs) > 0 {
		return nil, nil, errs.ToAggregate()
	}
	typed, errs := s.typed(out)
	if len(errs) > 0 {
		return nil, nil, errs.ToAggregate()
	}
	return out, typed, nil
}

func (c *Compiled) requireMode(m v1alpha1.ProvisioningMode) error {
	if !c.Provisioner.HasMode(m) {
		return fmt.Errorf("PavProvisioner %s does not support %s provisioning (spec.provisioningModes: %v)", c.Provisioner.Name, m, c.Provisioner.Spec.ProvisioningModes)
	}
	return nil
}

func (c *Compiled) validationConfig(ctx context.Context, vars map[string]interface{}, get PVCGetter, omit ...string) (*ValidationConfig, error) {
	raw, v, err := c.evaluate(ctx, c.validation, vars, get, omit...)
	if err != nil {
		return nil, err
	}
	cfg := &ValidationConfig{
		VolumeModes: v.VolumeModes, AccessModes: v.AccessModes,
		MinCapacity: v.MinCapacity, MaxCapacity: v.MaxCapacity,
		PodTemplate: v.PodTemplate, Evaluated: raw,
	}
	if cfg.VolumeModes == nil {
		cfg.VolumeModes = []corev1.PersistentVolumeMode{corev1.PersistentVolumeFilesystem}
	}
	if cfg.AccessModes == nil {
		cfg.AccessModes = append([]corev1.PersistentVolumeAccessMode(nil), defaultAccessModes...)
	}
	return cfg, nil
}

// DynamicValidation evaluates spec.volumeValidation for a claim. Check the
// claim with cfg.Check(DynamicVolumeRequest(r.PVC)).
func (c *Compiled) DynamicValidation(ctx context.Context, r DynamicRequest, get PVCGetter) (*ValidationConfig, error) {
	if err := c.requireMode(v1alpha1.Dynamic); err != nil {
		return nil, err
	}
	vars, err := dynamicVars(r)
	if err != nil {
		return nil, err
	}
	return c.validationConfig(ctx, vars, get)
}

// StaticValidation evaluates spec.volumeValidation for a PersistentVolume
// written by a user. Check it with cfg.Check(StaticVolumeRequest(r.PV)).
// The pod template is for dynamic provisioning only (the spec), so it is not
// evaluated: in the static context it could not even refer to pvc or sc.
func (c *Compiled) StaticValidation(ctx context.Context, r StaticRequest, get PVCGetter) (*ValidationConfig, error) {
	if err := c.requireMode(v1alpha1.Static); err != nil {
		return nil, err
	}
	vars, err := staticVars(r)
	if err != nil {
		return nil, err
	}
	return c.validationConfig(ctx, vars, get, "podTemplate")
}

// InlineValidation evaluates spec.volumeValidation's fields for a CSI
// inline ephemeral volume (r.Inline), whatever the provisioning modes; the
// validation pod is for claims only and is not evaluated (its template may
// need pvc). The node plugin checks the volume mode before the creation
// (CheckInlineRequest) and the capacity after it (CheckInlineCapacity).
func (c *Compiled) InlineValidation(ctx context.Context, r DynamicRequest, get PVCGetter) (*ValidationConfig, error) {
	if r.Inline == nil {
		return nil, fmt.Errorf("no inline volume")
	}
	return c.validationConfig(ctx, inlineVars(r), get, "podTemplate")
}

// CheckInlineRequest checks an inline volume before its creation: volumeModes
// must have Filesystem (kubelet mounts inline volumes only as file
// systems). accessModes is not checked: one pod uses the volume, which any
// access mode allows.
func (v *ValidationConfig) CheckInlineRequest() error {
	return v.Check(VolumeRequest{VolumeMode: corev1.PersistentVolumeFilesystem})
}

// CheckInlineCapacity checks the capacity an inline volume's creation made
// as Check does a statically provisioned volume's: within minCapacity and
// maxCapacity.
func (v *ValidationConfig) CheckInlineCapacity(capacity resource.Quantity) error {
	n, err := Bytes(capacity)
	if err != nil {
		return err
	}
	return v.Check(VolumeRequest{VolumeMode: corev1.PersistentVolumeFilesystem, MinCapacity: n, MaxCapacity: &n})
}

// Creation evaluates spec.volumeCreation.
func (c *Compiled) Creation(ctx context.Context, r DynamicRequest, get PVCGetter) (*CreationConfig, error) {
	if err := c.requireMode(v1alpha1.Dynamic); err != nil {
		return nil, err
	}
	vars, err := creationVars(r)
	if err != nil {
		return nil, err
	}
	raw, v, err := c.evaluate(ctx, c.creation, vars, get)
	if err != nil {
		return nil, err
	}
	return &CreationConfig{Handle: v.Handle, Capacity: v.Capacity, PodTemplate: v.PodTemplate, NodeAffinity: v.NodeAffinity, Evaluated: raw}, nil
}

// Deletion evaluates spec.volumeDeletion: the creation context plus, a
// PaV-Go addition, pv and handle when known (see DynamicRequest).
func (c *Compiled) Deletion(ctx context.Context, r DynamicRequest, get PVCGetter) (*PodConfig, error) {
	if err := c.requireMode(v1alpha1.Dynamic); err != nil {
		return nil, err
	}
	vars, err := deletionVars(r)
	if err != nil {
		return nil, err
	}
	raw, v, err := c.evaluate(ctx, c.deletion, vars, get)
	if err != nil {
		return nil, err
	}
	return &PodConfig{PodTemplate: v.PodTemplate, Evaluated: raw}, nil
}

// Expansion evaluates spec.volumeExpansion (a PaV-Go addition) for growing
// r.PV to what r.PVC now requests: the creation context (whose
// requestedMinCapacity and requestedMaxCapacity are the new size) plus pv,
// handle and capacity (the volume's current capacity in bytes). ok is false
// if the provisioner has no volumeExpansion section (it cannot expand).
func (c *Compiled) Expansion(ctx context.Context, r DynamicRequest, get PVCGetter) (cfg *PodConfig, ok bool, err error) {
	if c.expansion == nil {
		return nil, false, nil
	}
	if r.PV == nil {
		return nil, true, fmt.Errorf("no PersistentVolume to expand")
	}
	vars, err := expansionVars(r)
	if err != nil {
		return nil, true, err
	}
	raw, v, err := c.evaluate(ctx, c.expansion, vars, get)
	if err != nil {
		return nil, true, err
	}
	return &PodConfig{PodTemplate: v.PodTemplate, Evaluated: raw}, true, nil
}

// Modification evaluates spec.volumeModification (a PaV-Go addition) for
// giving r.PV the parameters of r.VolumeAttributesClass: the expansion
// context plus currentVac and currentMutableParams (the class r.PV has
// now). ok is false if the provisioner has no volumeModification section
// (it cannot modify volumes).
func (c *Compiled) Modification(ctx context.Context, r DynamicRequest, get PVCGetter) (cfg *PodConfig, ok bool, err error) {
	if c.modification == nil {
		return nil, false, nil
	}
	if r.PV == nil || r.VolumeAttributesClass == nil {
		return nil, true, fmt.Errorf("no PersistentVolume or VolumeAttributesClass to modify it to")
	}
	vars, err := modificationVars(r)
	if err != nil {
		return nil, true, err
	}
	raw, v, err := c.evaluate(ctx, c.modification, vars, get)
	if err != nil {
		return nil, true, err
	}
	return &PodConfig{PodTemplate: v.PodTemplate, Evaluated: raw}, true, nil
}

// CapacityRequest is what storage capacity is measured for (a PaV-Go
// addition): one topology segment, for one StorageClass, and the node of the
// segment where a capacity pod runs. Templates see params (the class's
// parameters), sc, topology (the segment: a dict of topology key to value)
// and nodeName.
type CapacityRequest struct {
	Class    *storagev1.StorageClass
	Segment  map[string]string
	NodeName string
}

// CapacityConfig is the evaluated spec.storageCapacity: the free space, or
// the pod that measures it.
type CapacityConfig struct {
	Capacity    *resource.Quantity
	PodTemplate *corev1.PodTemplateSpec
	// Evaluated is the section as evaluated, fields named as in the spec.
	Evaluated map[string]interface{}
}

// StorageCapacity evaluates spec.storageCapacity; nil if the provisioner has
// none.
func (c *Compiled) StorageCapacity(ctx context.Context, r CapacityRequest) (*CapacityConfig, error) {
	if c.capacity == nil {
		return nil, nil
	}
	if r.Class == nil {
		return nil, fmt.Errorf("no StorageClass")
	}
	vars := map[string]interface{}{"params": stringMap(r.Class.Parameters), "topology": stringMap(r.Segment), "nodeName": r.NodeName}
	var err error
	if vars["sc"], err = toMap(r.Class, classGVK); err != nil {
		return nil, err
	}
	raw, v, err := c.evaluate(ctx, c.capacity, vars, nil)
	if err != nil {
		return nil, err
	}
	return &CapacityConfig{Capacity: v.Capacity, PodTemplate: v.PodTemplate, Evaluated: raw}, nil
}

// Staging evaluates spec.volumeStaging; the result always has a pod template.
func (c *Compiled) Staging(ctx context.Context, r StagingRequest, get PVCGetter) (*PodConfig, error) {
	vars, err := stagingVars(r)
	if err != nil {
		return nil, err
	}
	raw, v, err := c.evaluate(ctx, c.staging, vars, get)
	if err != nil {
		return nil, err
	}
	if v.PodTemplate == nil {
		return nil, field.ErrorList{field.Required(specPath.Child("volumeStaging", "podTemplate"), "evaluated to null, but every volume needs a staging pod")}.ToAggregate()
	}
	return &PodConfig{PodTemplate: v.PodTemplate, Evaluated: raw}, nil
}

// Unstaging evaluates spec.volumeUnstaging (same context as staging).
func (c *Compiled) Unstaging(ctx context.Context, r StagingRequest, get PVCGetter) (*PodConfig, error) {
	vars, err := stagingVars(r)
	if err != nil {
		return nil, err
	}
	raw, v, err := c.evaluate(ctx, c.unstaging, vars, get)
	if err != nil {
		return nil, err
	}
	return &PodConfig{PodTemplate: v.PodTemplate, Evaluated: raw}, nil
}

// Check reports whether a request fits the provisioner: the volume mode is
// one of VolumeModes, every requested access mode is in AccessModes, the
// requested minimum (requests.storage, or the PV's capacity) is at most
// MaxCapacity, and the requested maximum (limits.storage when set, or the
// PV's capacity) is at least MinCapacity. The error lists every mismatch.
func (v *ValidationConfig) Check(r VolumeRequest) error {
	var problems []string
	if !contains(v.VolumeModes, r.VolumeMode) {
		problems = append(problems, fmt.Sprintf("volume mode %s is not supported (supported: %s)", r.VolumeMode, joinModes(v.VolumeModes)))
	}
	for _, m := range r.AccessModes {
		if !contains(v.AccessModes, m) {
			problems = append(problems, fmt.Sprintf("access mode %s is not supported (supported: %s)", m, joinModes(v.AccessModes)))
		}
	}
	if v.MaxCapacity != nil && resource.NewQuantity(r.MinCapacity, resource.BinarySI).Cmp(*v.MaxCapacity) > 0 {
		problems = append(problems, fmt.Sprintf("the requested capacity %s is above the maximum capacity %s", resource.NewQuantity(r.MinCapacity, resource.BinarySI), v.MaxCapacity))
	}
	if v.MinCapacity != nil && r.MaxCapacity != nil && resource.NewQuantity(*r.MaxCapacity, resource.BinarySI).Cmp(*v.MinCapacity) < 0 {
		problems = append(problems, fmt.Sprintf("the capacity limit %s is below the minimum capacity %s", resource.NewQuantity(*r.MaxCapacity, resource.BinarySI), v.MinCapacity))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return nil
}

func joinModes[T ~string](l []T) string {
	if len(l) == 0 {
		return "none"
	}
	s := make([]string, len(l))
	for i, m := range l {
		s[i] = string(m)
	}
	return strings.Join(s, ", ")
}

func sortedFieldKeys(m map[string]*node) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
