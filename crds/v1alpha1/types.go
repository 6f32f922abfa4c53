package v1alpha1

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

const (
	GroupName = "pav.albertofaria.github.io"
	Version   = "v1alpha1"
	Kind      = "PavProvisioner"
	Plural    = "pavprovisioners"
	ShortName = "pav"
)

// SchemeGroupVersion is the API group and version of PavProvisioner.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: Version}

// GroupVersionResource identifies PavProvisioners for dynamic clients and informers.
var GroupVersionResource = SchemeGroupVersion.WithResource(Plural)

// ProvisioningMode is Dynamic (StorageClass) or Static (PersistentVolume written by a user).
type ProvisioningMode string

const (
	Dynamic ProvisioningMode = "Dynamic"
	Static  ProvisioningMode = "Static"
)

// PavProvisioner is a volume provisioner written as pod templates. Cluster-scoped.
//
// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type PavProvisioner struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PavProvisionerSpec   `json:"spec"`
	Status PavProvisionerStatus `json:"status,omitempty"`
}

// PavProvisionerSpec is the user's definition, unevaluated.
type PavProvisionerSpec struct {
	ProvisioningModes []ProvisioningMode `json:"provisioningModes"`
	VolumeValidation  *VolumeValidation  `json:"volumeValidation,omitempty"`
	VolumeCreation    *VolumeCreation    `json:"volumeCreation,omitempty"`
	VolumeDeletion    *VolumeDeletion    `json:"volumeDeletion,omitempty"`
	VolumeStaging     *VolumeStaging     `json:"volumeStaging,omitempty"`
	VolumeUnstaging   *VolumeUnstaging   `json:"volumeUnstaging,omitempty"`
	// VolumeExpansion is a PaV-Go addition to the spec.
	VolumeExpansion *VolumeExpansion `json:"volumeExpansion,omitempty"`
}

// VolumeValidation: what volumes the provisioner accepts, plus an optional validation pod.
type VolumeValidation struct {
	Section     `json:"-"`
	VolumeModes *Value `json:"volumeModes,omitempty"`
	AccessModes *Value `json:"accessModes,omitempty"`
	MinCapacity *Value `json:"minCapacity,omitempty"`
	MaxCapacity *Value `json:"maxCapacity,omitempty"`
	PodTemplate *Value `json:"podTemplate,omitempty"`
}

// VolumeCreation: how a volume is created (dynamic provisioning only).
type VolumeCreation struct {
	Section     `json:"-"`
	Handle      *Value `json:"handle,omitempty"`
	Capacity    *Value `json:"capacity,omitempty"`
	PodTemplate *Value `json:"podTemplate,omitempty"`
	// NodeAffinity is a PaV-Go addition to the spec: a VolumeNodeAffinity that is
	// set on the created PersistentVolume (e.g. for node-local volumes).
	NodeAffinity *Value `json:"nodeAffinity,omitempty"`
	// Cloning is a PaV-Go addition to the spec: true if the provisioner can
	// create a volume from another claim of the same provisioner (the new
	// claim's dataSource); its validation and creation contexts then have
	// sourcePvc, sourcePv and sourceHandle.
	Cloning bool `json:"cloning,omitempty"`
}

// VolumeDeletion: how a dynamically provisioned volume is deleted.
type VolumeDeletion struct {
	Section     `json:"-"`
	PodTemplate *Value `json:"podTemplate,omitempty"`
}

// VolumeStaging: how a volume is made available on a node. podTemplate is mandatory.
type VolumeStaging struct {
	Section     `json:"-"`
	PodTemplate *Value `json:"podTemplate,omitempty"`
}

// VolumeUnstaging: how the effects of staging are reverted.
type VolumeUnstaging struct {
	Section     `json:"-"`
	PodTemplate *Value `json:"podTemplate,omitempty"`
}

// VolumeExpansion: how a dynamically provisioned volume grows when its claim
// asks for more (a PaV-Go addition). Without a pod template the new size is
// only recorded.
type VolumeExpansion struct {
	Section     `json:"-"`
	PodTemplate *Value `json:"podTemplate,omitempty"`
}

// Section is what every phase section has besides its fields. Every string
// under spec may be a template, a whole section included: Template is set
// when the section is one string (which must evaluate, with
// {% set yaml = true %}, to the section's fields), and the fields are then
// empty. Unknown lists the keys the section has but does not know, so that
// validation reports them (the CRD preserves them, so that a section may be
// a string).
type Section struct {
	Template *string
	Unknown  []string
}

// IsTemplate reports whether the whole section is one template string.
func (s *Section) IsTemplate() bool { return s != nil && s.Template != nil }

// unmarshalSection decodes a section: a string is a whole-section template,
// an object its fields (into fields, a pointer to the section's type without
// its JSON methods), with unknown keys recorded rather than refused, so that
// a stored object always decodes.
func unmarshalSection(data []byte, sec *Section, fields interface{}) error {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '"' {
		var t string
		if err := json.Unmarshal(data, &t); err != nil {
			return err
		}
		sec.Template = &t
		return nil
	}
	if err := utiljson.Unmarshal(data, fields); err != nil {
		return err
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(data, &keys); err != nil {
		return err
	}
	known := jsonNames(fields)
	for k := range keys {
		if !known[k] {
			sec.Unknown = append(sec.Unknown, k)
		}
	}
	sort.Strings(sec.Unknown)
	return nil
}

// marshalSection encodes a section as it was written.
func marshalSection(sec Section, fields interface{}) ([]byte, error) {
	if sec.Template != nil {
		return json.Marshal(*sec.Template)
	}
	return json.Marshal(fields)
}

// jsonNames are the JSON field names of the struct v points to.
func jsonNames(v interface{}) map[string]bool {
	t := reflect.TypeOf(v).Elem()
	out := map[string]bool{}
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out[name] = true
		}
	}
	return out
}

// PavProvisionerStatus is written by the controller.
type PavProvisionerStatus struct {
	// ObservedGeneration is the generation the conditions describe.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready (valid, CSIDriver in place). Valid (templates compile, literals typed).
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Condition types and reasons reported in status.
const (
	ConditionReady = "Ready"
	ConditionValid = "Valid"
)

// PavProvisionerList is a list of PavProvisioners.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type PavProvisionerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PavProvisioner `json:"items"`
}

// HasMode reports whether the provisioner supports the given provisioning mode.
func (p *PavProvisioner) HasMode(m ProvisioningMode) bool {
	for _, x := range p.Spec.ProvisioningModes {
		if x == m {
			return true
		}
	}
	return false
}

// Value is an arbitrary JSON value (string, number, bool, null, list, object)
// whose strings are Jinja templates. Object holds the decoded value with the
// types of k8s.io/apimachinery/pkg/util/json: map[string]interface{},
// []interface{}, string, int64, float64, bool or nil.
//
// +k8s:deepcopy-gen=false
type Value struct {
	Object interface{}
}

// NewValue wraps a JSON-like Go value.
func NewValue(v interface{}) *Value { return &Value{Object: v} }

func (v Value) MarshalJSON() ([]byte, error) { return json.Marshal(v.Object) }

func (v *Value) UnmarshalJSON(data []byte) error {
	if bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		v.Object = nil
		return nil
	}
	var obj interface{}
	if err := utiljson.Unmarshal(data, &obj); err != nil {
		return fmt.Errorf("decoding template value: %w", err)
	}
	v.Object = obj
	return nil
}

func (v *Value) DeepCopy() *Value {
	if v == nil {
		return nil
	}
	out := new(Value)
	v.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies the JSON value (the generated deep copies call it).
func (v *Value) DeepCopyInto(out *Value) { out.Object = runtime.DeepCopyJSONValue(v.Object) }

func (v *VolumeValidation) UnmarshalJSON(data []byte) error {
	type fields VolumeValidation
	return unmarshalSection(data, &v.Section, (*fields)(v))
}

func (v VolumeValidation) MarshalJSON() ([]byte, error) {
	type fields VolumeValidation
	return marshalSection(v.Section, fields(v))
}

func (v *VolumeCreation) UnmarshalJSON(data []byte) error {
	type fields VolumeCreation
	return unmarshalSection(data, &v.Section, (*fields)(v))
}

func (v VolumeCreation) MarshalJSON() ([]byte, error) {
	type fields VolumeCreation
	return marshalSection(v.Section, fields(v))
}

func (v *VolumeDeletion) UnmarshalJSON(data []byte) error {
	type fields VolumeDeletion
	return unmarshalSection(data, &v.Section, (*fields)(v))
}

func (v VolumeDeletion) MarshalJSON() ([]byte, error) {
	type fields VolumeDeletion
	return marshalSection(v.Section, fields(v))
}

func (v *VolumeStaging) UnmarshalJSON(data []byte) error {
	type fields VolumeStaging
	return unmarshalSection(data, &v.Section, (*fields)(v))
}

func (v VolumeStaging) MarshalJSON() ([]byte, error) {
	type fields VolumeStaging
	return marshalSection(v.Section, fields(v))
}

func (v *VolumeUnstaging) UnmarshalJSON(data []byte) error {
	type fields VolumeUnstaging
	return unmarshalSection(data, &v.Section, (*fields)(v))
}

func (v VolumeUnstaging) MarshalJSON() ([]byte, error) {
	type fields VolumeUnstaging
	return marshalSection(v.Section, fields(v))
}

func (v *VolumeExpansion) UnmarshalJSON(data []byte) error {
	type fields VolumeExpansion
	return unmarshalSection(data, &v.Section, (*fields)(v))
}

func (v VolumeExpansion) MarshalJSON() ([]byte, error) {
	type fields VolumeExpansion
	return marshalSection(v.Section, fields(v))
}
