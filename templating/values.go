package templating

import (
	"encoding/json"
	"fmt"
	"path"
	"reflect"

	"github.com/albertofaria/pav/protocol"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"
)

// The typed readers below take a value of a phase section, either evaluated
// (plain JSON-like) or a skeleton still holding templateValue{} placeholders,
// check what is known of it and, when it is fully known and valid, return its
// typed form. nil means "not set". Validation (skeletons) and evaluation
// (final values) share them, so both report the same problems the same way.

var (
	supportedVolumeModes = []corev1.PersistentVolumeMode{corev1.PersistentVolumeFilesystem, corev1.PersistentVolumeBlock}
	// ReadWriteOncePod needs nothing of a provisioner that ReadWriteOnce
	// does not: the scheduler and kubelet enforce it (the node plugin
	// advertises SINGLE_NODE_MULTI_WRITER so that kubelet passes it on).
	supportedAccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadOnlyMany, corev1.ReadWriteMany, corev1.ReadWriteOncePod}
	// defaultAccessModes are the user guide's default: a provisioner accepts
	// ReadWriteOncePod only if it lists it.
	defaultAccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadOnlyMany, corev1.ReadWriteMany}
)

func readVolumeModes(v interface{}, p *field.Path) ([]corev1.PersistentVolumeMode, field.ErrorList) {
	items, errs := readStringList(v, p)
	if items == nil {
		return nil, errs
	}
	if len(items) == 0 {
		// None at all: no claim could ever be provisioned or staged.
		return nil, append(errs, field.Required(p, "must list at least one volume mode"))
	}
	out := []corev1.PersistentVolumeMode{}
	for i, s := range items {
		if s == nil {
			continue
		}
		m := corev1.PersistentVolumeMode(*s)
		if !contains(supportedVolumeModes, m) {
			errs = append(errs, field.NotSupported(p.Index(i), *s, supportedVolumeModes))
			continue
		}
		out = append(out, m)
	}
	return out, errs
}

func readAccessModes(v interface{}, p *field.Path) ([]corev1.PersistentVolumeAccessMode, field.ErrorList) {
	items, errs := readStringList(v, p)
	if items == nil {
		return nil, errs
	}
	if len(items) == 0 {
		// None at all: no claim could ever be provisioned or staged.
		return nil, append(errs, field.Required(p, "must list at least one access mode"))
	}
	out := []corev1.PersistentVolumeAccessMode{}
	for i, s := range items {
		if s == nil {
			continue
		}
		m := corev1.PersistentVolumeAccessMode(*s)
		if !contains(supportedAccessModes, m) {
			errs = append(errs, field.NotSupported(p.Index(i), *s, supportedAccessModes))
			continue
		}
		out = append(out, m)
	}
	return out, errs
}

// readStringList returns one entry per item (nil for a template), or nil if
// v is unset, a template or not a list.
func readStringList(v interface{}, p *field.Path) ([]*string, field.ErrorList) {
	switch x := v.(type) {
	case nil, templateValue:
		return nil, nil
	case []interface{}:
		out := make([]*string, len(x))
		var errs field.ErrorList
		for i, item := range x {
			switch s := item.(type) {
			case string:
				out[i] = &s
			case templateValue:
			default:
				errs = append(errs, field.Invalid(p.Index(i), describe(item), "must be a string"))
			}
		}
		return out, errs
	default:
		return nil, field.ErrorList{field.Invalid(p, describe(v), "must be a list of strings")}
	}
}

// readQuantity accepts a quantity string ("1Gi", "1073741824") or a number of
// bytes; negative capacities are rejected.
func readQuantity(v interface{}, p *field.Path) (*resource.Quantity, field.ErrorList) {
	var q resource.Quantity
	switch x := v.(type) {
	case nil, templateValue:
		return nil, nil
	case string:
		var err error
		if q, err = resource.ParseQuantity(x); err != nil {
			return nil, field.ErrorList{field.Invalid(p, shorten(x), "must be a capacity, e.g. 1073741824 or 1Gi")}
		}
	case int64:
		q = *resource.NewQuantity(x, resource.BinarySI)
	case float64:
		var err error
		if q, err = resource.ParseQuantity(fmt.Sprint(x)); err != nil {
			return nil, field.ErrorList{field.Invalid(p, x, "must be a capacity, e.g. 1073741824 or 1Gi")}
		}
	default:
		return nil, field.ErrorList{field.Invalid(p, describe(v), "must be a capacity, e.g. 1073741824 or 1Gi")}
	}
	if q.Sign() < 0 {
		return nil, field.ErrorList{field.Invalid(p, q.String(), "must not be negative")}
	}
	return &q, nil
}

func readHandle(v interface{}, p *field.Path) (*string, field.ErrorList) {
	switch x := v.(type) {
	case nil, templateValue:
		return nil, nil
	case string:
		if err := protocol.CheckHandle(x); err != nil {
			return nil, field.ErrorList{field.Invalid(p, shorten(x), err.Error())}
		}
		return &x, nil
	default:
		return nil, field.ErrorList{field.Invalid(p, describe(v), "must be a string")}
	}
}

// decodeStrict decodes a fully known value into out, as the API server would.
func decodeStrict(v interface{}, out interface{}, p *field.Path) field.ErrorList {
	data, err := json.Marshal(v)
	if err != nil {
		return field.ErrorList{field.InternalError(p, err)}
	}
	strict, err := sigsjson.UnmarshalStrict(data, out)
	if err != nil {
		return field.ErrorList{field.Invalid(p, field.OmitValueType{}, cleanJSONError(err))}
	}
	var errs field.ErrorList
	for _, e := range strict {
		errs = append(errs, field.Invalid(p, field.OmitValueType{}, e.Error()))
	}
	return errs
}

func readNodeAffinity(v interface{}, p *field.Path) (*corev1.VolumeNodeAffinity, field.ErrorList) {
	if _, ok := v.(templateValue); ok || v == nil {
		return nil, nil
	}
	errs := checkShape(v, reflect.TypeOf(corev1.VolumeNodeAffinity{}), p)
	if m, ok := v.(map[string]interface{}); ok {
		switch r := m["required"].(type) {
		case nil:
			errs = append(errs, field.Required(p.Child("required"), "a VolumeNodeAffinity needs required.nodeSelectorTerms"))
		case map[string]interface{}:
			if terms, ok := r["nodeSelectorTerms"].([]interface{}); r["nodeSelectorTerms"] == nil || ok && len(terms) == 0 {
				errs = append(errs, field.Required(p.Child("required", "nodeSelectorTerms"), "must have at least one node selector term"))
			}
		}
	}
	if len(errs) > 0 || hasTemplate(v) {
		return nil, errs
	}
	out := &corev1.VolumeNodeAffinity{}
	if errs := decodeStrict(v, out, p); len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}

// readPodTemplate checks a pod template: only metadata and spec, a shape that
// decodes into a PodTemplateSpec, and the pod rules PaV relies on. phase
// decides the restart policies allowed.
func readPodTemplate(v interface{}, p *field.Path, phase protocol.Phase) (*corev1.PodTemplateSpec, field.ErrorList) {
	if _, ok := v.(templateValue); ok || v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]interface{})
	if !ok {
		return nil, field.ErrorList{field.Invalid(p, describe(v), "must be a pod template (an object with metadata and spec)")}
	}
	var errs field.ErrorList
	for _, k := range sortedKeys(m) {
		if k != "metadata" && k != "spec" {
			errs = append(errs, field.Forbidden(p.Child(k), "a pod template holds only metadata and spec"))
		}
	}
	errs = append(errs, checkShape(m["metadata"], reflect.TypeOf(metav1.ObjectMeta{}), p.Child("metadata"))...)
	errs = append(errs, checkShape(m["spec"], reflect.TypeOf(corev1.PodSpec{}), p.Child("spec"))...)
	errs = append(errs, checkPodMetadata(m["metadata"], p.Child("metadata"))...)
	if m["spec"] == nil {
		errs = append(errs, field.Required(p.Child("spec"), "a pod template needs a spec"))
	} else {
		errs = append(errs, checkPodSpec(m["spec"], p.Child("spec"), phase)...)
	}
	if len(errs) > 0 || hasTemplate(v) {
		return nil, errs
	}
	out := &corev1.PodTemplateSpec{}
	if errs := decodeStrict(map[string]interface{}{"metadata": m["metadata"], "spec": m["spec"]}, out, p); len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}

func checkPodMetadata(v interface{}, p *field.Path) field.ErrorList {
	m, ok := v.(map[string]interface{})
	if !ok {
		return nil
	}
	var errs field.ErrorList
	if ns, ok := m["namespace"].(string); ok {
		for _, msg := range validation.IsDNS1123Label(ns) {
			errs = append(errs, field.Invalid(p.Child("namespace"), ns, msg))
		}
	}
	errs = append(errs, checkReservedMetadata(m, p)...)
	if labels, ok := literalStringMap(m["labels"]); ok {
		errs = append(errs, metav1validation.ValidateLabels(labels, p.Child("labels"))...)
	}
	if ann, ok := literalStringMap(m["annotations"]); ok {
		errs = append(errs, apivalidation.ValidateAnnotations(ann, p.Child("annotations"))...)
	}
	return errs
}

// checkReservedMetadata refuses labels, annotations and finalizers under
// PaV's prefix in a pod template's metadata: PaV's service account creates
// the pod, so they would pass for PaV's own (a pod marked succeeded, a
// forged result). Keys are always literal; a templated value is checked once
// evaluated, so a template that copies a claim's annotations fails there.
func checkReservedMetadata(meta map[string]interface{}, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	msg := fmt.Sprintf("names under %s are reserved to PaV", protocol.ReservedPrefix)
	for _, kind := range []string{"labels", "annotations"} {
		m, _ := meta[kind].(map[string]interface{})
		for _, k := range sortedKeys(m) {
			if protocol.IsReserved(k) {
				errs = append(errs, field.Forbidden(p.Child(kind).Key(k), msg))
			}
		}
	}
	list, _ := meta["finalizers"].([]interface{})
	for i, f := range list {
		if s, ok := f.(string); ok && protocol.IsReserved(s) {
			errs = append(errs, field.Forbidden(p.Child("finalizers").Index(i), msg))
		}
	}
	return errs
}

func literalStringMap(v interface{}) (map[string]string, bool) {
	m, ok := v.(map[string]interface{})
	if !ok {
		return nil, false
	}
	out := make(map[string]string, len(m))
	for k, x := range m {
		s, ok := x.(string)
		if !ok {
			return nil, false // a template or a type error reported elsewhere
		}
		out[k] = s
	}
	return out, true
}

func checkPodSpec(v interface{}, p *field.Path, phase protocol.Phase) field.ErrorList {
	spec, ok := v.(map[string]interface{})
	if !ok {
		return nil // a template, or a type error already reported
	}
	var errs field.ErrorList
	switch c := spec["containers"].(type) {
	case nil:
		errs = append(errs, field.Required(p.Child("containers"), "a pod needs at least one container"))
	case []interface{}:
		if len(c) == 0 {
			errs = append(errs, field.Required(p.Child("containers"), "a pod needs at least one container"))
		}
	}
	names := sets.New[string]()
	for _, kind := range []string{"initContainers", "containers"} {
		list, _ := spec[kind].([]interface{})
		for i, item := range list {
			errs = append(errs, checkContainer(item, p.Child(kind).Index(i), names)...)
		}
	}
	if vols, ok := spec["volumes"].([]interface{}); ok {
		for i, item := range vols {
			if vol, ok := item.(map[string]interface{}); ok && vol["name"] == protocol.PavVolumeName {
				errs = append(errs, field.Forbidden(p.Child("volumes").Index(i).Child("name"),
					fmt.Sprintf("the volume name %q is reserved: PaV adds its own volume %q, mounted at %s in every container", protocol.PavVolumeName, protocol.PavVolumeName, protocol.PavMountPath)))
			}
		}
	}
	if rp, ok := spec["restartPolicy"].(string); ok {
		switch corev1.RestartPolicy(rp) {
		case corev1.RestartPolicyNever, corev1.RestartPolicyOnFailure:
		case corev1.RestartPolicyAlways:
			msg := "PaV pods run to completion: use Never (the default) or OnFailure"
			if phase == protocol.PhaseStaging {
				msg = "use Never (the default) or OnFailure: a staging pod that keeps running creates /pav/ready instead"
			}
			errs = append(errs, field.Forbidden(p.Child("restartPolicy"), msg))
		default:
			errs = append(errs, field.NotSupported(p.Child("restartPolicy"), rp, []corev1.RestartPolicy{corev1.RestartPolicyNever, corev1.RestartPolicyOnFailure}))
		}
	}
	return errs
}

func checkContainer(v interface{}, p *field.Path, names sets.Set[string]) field.ErrorList {
	c, ok := v.(map[string]interface{})
	if !ok {
		return nil
	}
	var errs field.ErrorList
	switch name := c["name"].(type) {
	case nil:
		errs = append(errs, field.Required(p.Child("name"), "every container needs a name"))
	case string:
		for _, msg := range validation.IsDNS1123Label(name) {
			errs = append(errs, field.Invalid(p.Child("name"), name, msg))
		}
		if names.Has(name) {
			errs = append(errs, field.Duplicate(p.Child("name"), name))
		}
		names.Insert(name)
	}
	switch img := c["image"].(type) {
	case nil:
		errs = append(errs, field.Required(p.Child("image"), "every container needs an image"))
	case string:
		if img == "" {
			errs = append(errs, field.Required(p.Child("image"), "every container needs an image"))
		}
	}
	mounts, _ := c["volumeMounts"].([]interface{})
	for i, item := range mounts {
		m, ok := item.(map[string]interface{})
		if !ok {
			continue
		}
		if mp, ok := m["mountPath"].(string); ok && path.Clean("/"+mp) == protocol.PavMountPath {
			errs = append(errs, field.Forbidden(p.Child("volumeMounts").Index(i).Child("mountPath"),
				fmt.Sprintf("%s is reserved: PaV mounts its own volume there in every container", protocol.PavMountPath)))
		}
	}
	return errs
}

func contains[T comparable](list []T, x T) bool {
	for _, y := range list {
		if y == x {
			return true
		}
	}
	return false
}
