package v1alpha1

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	storagev1 "k8s.io/api/storage/v1"
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
//
// +kubebuilder:validation:Enum=Dynamic;Static
type ProvisioningMode string

const (
	Dynamic ProvisioningMode = "Dynamic"
	Static  ProvisioningMode = "Static"
)

// PavProvisioner is a volume provisioner whose logic is given as pod templates
// that PaV instantiates to validate, create, delete, stage and unstage volumes.
//
// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:resource:scope=Cluster,shortName=pav
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name=Modes,type=string,JSONPath=`.spec.provisioningModes`
// +kubebuilder:printcolumn:name=Ready,type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name=Stagings,type=integer,JSONPath=`.status.stagings`
// +kubebuilder:printcolumn:name=Outdated,type=integer,JSONPath=`.status.outdatedStagings`
// +kubebuilder:printcolumn:name=Age,type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="has(self.spec.topologyKeys) == has(oldSelf.spec.topologyKeys) && (!has(self.spec.topologyKeys) || self.spec.topologyKeys == oldSelf.spec.topologyKeys)",message="spec.topologyKeys cannot change: kubelet reads a driver's topology only when it registers",fieldPath=".spec.topologyKeys"
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63 && self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS label: at most 63 characters, only lowercase alphanumeric characters or '-', starting and ending with an alphanumeric character"
type PavProvisioner struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   PavProvisionerSpec   `json:"spec"`
	Status PavProvisionerStatus `json:"status,omitempty"`
}

// PavProvisionerSpec is the user's definition, unevaluated.
//
// Each phase section is an object of its fields, or one template string
// that evaluates to it (every string under spec may be a template): so the
// sections have no type and keep unknown fields, which validation reports.
type PavProvisionerSpec struct {
	// The provisioning modes supported by the provisioner (Dynamic, Static).
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=2
	// +listType=set
	ProvisioningModes []ProvisioningMode `json:"provisioningModes"`
	// Which volumes the provisioner accepts, and an optional validation pod.
	// +kubebuilder:pruning:PreserveUnknownFields
	VolumeValidation *VolumeValidation `json:"volumeValidation,omitempty"`
	// How volumes are created (dynamic provisioning only).
	// +kubebuilder:pruning:PreserveUnknownFields
	VolumeCreation *VolumeCreation `json:"volumeCreation,omitempty"`
	// How volumes are deleted (dynamic provisioning only).
	// +kubebuilder:pruning:PreserveUnknownFields
	VolumeDeletion *VolumeDeletion `json:"volumeDeletion,omitempty"`
	// How a volume is made available on a node.
	// +required
	// +kubebuilder:pruning:PreserveUnknownFields
	VolumeStaging *VolumeStaging `json:"volumeStaging,omitempty"`
	// How the effects of staging are reverted.
	// +kubebuilder:pruning:PreserveUnknownFields
	VolumeUnstaging *VolumeUnstaging `json:"volumeUnstaging,omitempty"`
	// PaV-Go addition: how volumes grow when their claim asks for more
	// (dynamic provisioning only). Without it, claims of the provisioner
	// cannot be expanded; with it but without a podTemplate, the new size is
	// only recorded.
	// +kubebuilder:pruning:PreserveUnknownFields
	VolumeExpansion *VolumeExpansion `json:"volumeExpansion,omitempty"`
	// PaV-Go addition: how a volume changes when its claim's
	// spec.volumeAttributesClassName changes (dynamic provisioning only):
	// PaV runs the modification pod and records the outcome in the claim's
	// status as external-resizer does for a CSI driver's ControllerModifyVolume.
	// Without it, such a change is Infeasible.
	// +kubebuilder:pruning:PreserveUnknownFields
	VolumeModification *VolumeModification `json:"volumeModification,omitempty"`
	// PaV-Go addition: how a VolumeSnapshot of one of the provisioner's
	// volumes is taken: PaV handles the VolumeSnapshotContents whose driver
	// is this provisioner as external-snapshotter's csi-snapshotter sidecar
	// does for a CSI driver. Without it, dynamic snapshots of its volumes
	// fail (pre-provisioned snapshot contents still bind).
	// +kubebuilder:pruning:PreserveUnknownFields
	SnapshotCreation *SnapshotCreation `json:"snapshotCreation,omitempty"`
	// PaV-Go addition: how a snapshot is deleted when its
	// VolumeSnapshotContent goes with deletionPolicy Delete. Without a pod
	// template nothing runs.
	// +kubebuilder:pruning:PreserveUnknownFields
	SnapshotDeletion *SnapshotDeletion `json:"snapshotDeletion,omitempty"`
	// PaV-Go addition: how a VolumeGroupSnapshot of several of the
	// provisioner's volumes is taken at once: PaV handles the
	// VolumeGroupSnapshotContents whose driver is this provisioner as
	// csi-snapshotter does for a CSI driver's CreateVolumeGroupSnapshot.
	// Without it, dynamic group snapshots of its volumes fail.
	// +kubebuilder:pruning:PreserveUnknownFields
	GroupSnapshotCreation *GroupSnapshotCreation `json:"groupSnapshotCreation,omitempty"`
	// PaV-Go addition: how a group snapshot (all its volumes' snapshots)
	// is deleted when its VolumeGroupSnapshotContent goes with
	// deletionPolicy Delete. Without a pod template nothing runs.
	// +kubebuilder:pruning:PreserveUnknownFields
	GroupSnapshotDeletion *GroupSnapshotDeletion `json:"groupSnapshotDeletion,omitempty"`
	// PaV-Go addition: true to put the end of a failed pod's log into the
	// Events PaV writes about it (on claims, PersistentVolumes and client
	// pods), and to let termination messages that kubelet took from the log
	// (terminationMessagePolicy FallbackToLogsOnError) in too. Default false:
	// logs may hold secrets, and tenants read those Events. /pav/error and
	// messages a container wrote to its terminationMessagePath are always
	// used.
	PodLogsInEvents bool `json:"podLogsInEvents,omitempty"`
	// PaV-Go addition: the node labels that make up the provisioner's CSI
	// topology (e.g. topology.kubernetes.io/zone, or kubernetes.io/hostname
	// for node-local volumes). The node plugin reports each node's values
	// of these labels as its segment (NodeGetInfo's accessible topology),
	// the creation context gets requisiteTopology and preferredTopology,
	// and a created PersistentVolume without a templated nodeAffinity gets
	// node affinity for the first preferred segment. Kubelet reads a
	// driver's topology only when it registers, so the keys cannot change.
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=317
	// +listType=set
	TopologyKeys []string `json:"topologyKeys,omitempty"`
	// PaV-Go addition: storage capacity tracking, opt-in. PaV measures the
	// free space of each topology segment for each StorageClass of the
	// provisioner and publishes it as CSIStorageCapacity objects, so that
	// the scheduler places WaitForFirstConsumer claims only on nodes with
	// room. Needs topologyKeys.
	StorageCapacity *StorageCapacity `json:"storageCapacity,omitempty"`
	// PaV-Go addition: CSI inline ephemeral volumes, opt-in. A pod's own
	// `csi:` volume naming the provisioner is created (volumeCreation's pod,
	// on the pod's node), staged, unstaged and deleted (volumeDeletion's
	// pod) by the node plugin; the CSIDriver then lists the Ephemeral
	// lifecycle mode. The pod's volumeAttributes are written by a tenant:
	// only those inlineVolumePolicy declares are accepted (none without
	// it), and they reach the templates as params.
	InlineVolumes bool `json:"inlineVolumes,omitempty"`
	// PaV-Go addition: what a pod may ask of the provisioner's inline
	// volumes, and which pods may: the attributes a pod's volumeAttributes
	// may set, the namespaces whose pods may use them, and how many. Only
	// with inlineVolumes: true.
	// +optional
	InlineVolumePolicy *InlineVolumePolicy `json:"inlineVolumePolicy,omitempty"`
}

// InlineVolumePolicy is spec.inlineVolumePolicy.
type InlineVolumePolicy struct {
	// The attributes a pod may set in its inline volume's volumeAttributes
	// (the templates' params). A volume with any other attribute, or a
	// value that does not fit its declaration, fails to mount.
	// +kubebuilder:validation:MaxItems=32
	// +listType=map
	// +listMapKey=name
	// +optional
	Attributes []InlineVolumeAttribute `json:"attributes,omitempty"`
	// The namespaces (by their labels) whose pods may use inline volumes of
	// the provisioner. Not set: every namespace.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	// At most this many inline volumes of the provisioner in one pod. Not
	// set: no limit.
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaxVolumesPerPod *int32 `json:"maxVolumesPerPod,omitempty"`
	// At most this many inline volumes of the provisioner in the pods of
	// one namespace that have not terminated, the oldest pods first (a
	// newer pod's volumes wait until older ones go). Not set: no limit.
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaxVolumesPerNamespace *int32 `json:"maxVolumesPerNamespace,omitempty"`
}

// DefaultInlineAttributeMaxLength is InlineVolumeAttribute.MaxLength's default.
const DefaultInlineAttributeMaxLength = 253

// InlineVolumeAttribute declares one attribute a pod may set.
//
// +kubebuilder:validation:XValidation:rule="!has(self.enum) || !has(self.default) || self.default in self.enum",message="default must be one of enum"
// +kubebuilder:validation:XValidation:rule="!has(self.default) || self.default.size() <= (has(self.maxLength) ? self.maxLength : 253)",message="default is longer than maxLength"
// +kubebuilder:validation:XValidation:rule="!(has(self.required) && self.required && has(self.default))",message="a required attribute has no default"
type InlineVolumeAttribute struct {
	// The attribute's key, written like a label key (an optional DNS
	// subdomain prefix and "/", then a name), not under
	// csi.storage.k8s.io/ (kubelet's).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=316
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('csi.storage.k8s.io/')",message="keys under csi.storage.k8s.io/ are kubelet's"
	// +required
	Name string `json:"name"`
	// A regular expression (Go's RE2 syntax) the whole value must match.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Pattern string `json:"pattern,omitempty"`
	// The values a pod may give.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=4096
	// +listType=set
	// +optional
	Enum []string `json:"enum,omitempty"`
	// The longest value, in bytes (default 253, at most 4096).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4096
	// +optional
	MaxLength *int32 `json:"maxLength,omitempty"`
	// The value when the pod does not set the attribute. Without one the
	// attribute is then absent from params.
	// +kubebuilder:validation:MaxLength=4096
	// +optional
	Default *string `json:"default,omitempty"`
	// True if every pod must set the attribute.
	// +optional
	Required bool `json:"required,omitempty"`
}

// MaxLengthOrDefault is the attribute's maxLength, or its default.
func (a *InlineVolumeAttribute) MaxLengthOrDefault() int {
	if a.MaxLength != nil {
		return int(*a.MaxLength)
	}
	return DefaultInlineAttributeMaxLength
}

// StorageCapacity says how PaV measures the free space of one topology
// segment for one StorageClass: a template (capacity) or a
// run-to-completion pod (podTemplate) that writes the free bytes to
// /pav/capacity. Exactly one of the two.
type StorageCapacity struct {
	// The free space of the segment (a quantity). May be a template.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	Capacity *Value `json:"capacity,omitempty"`
	// PodTemplateSpec of the capacity pod, run on a node of the segment
	// (spec.nodeName is set to nodeName unless the template sets it). May
	// contain templates.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	PodTemplate *Value `json:"podTemplate,omitempty"`
	// How often each segment is measured again (default 1m), besides after
	// each creation and deletion of a volume of the provisioner. A pod
	// that has not finished within a period counts as failed.
	// +optional
	RefreshPeriod *metav1.Duration `json:"refreshPeriod,omitempty"`
}

// DefaultCapacityRefreshPeriod is StorageCapacity.RefreshPeriod's default.
const DefaultCapacityRefreshPeriod = time.Minute

// Period is the refresh period, or its default.
func (c *StorageCapacity) Period() time.Duration {
	if c.RefreshPeriod != nil && c.RefreshPeriod.Duration > 0 {
		return c.RefreshPeriod.Duration
	}
	return DefaultCapacityRefreshPeriod
}

// VolumeValidation: what volumes the provisioner accepts, plus an optional validation pod.
//
// +kubebuilder:validation:Type=""
type VolumeValidation struct {
	Section `json:"-"`
	// List of Filesystem/Block (default [Filesystem]). May be a template.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	VolumeModes *Value `json:"volumeModes,omitempty"`
	// List of ReadWriteOnce/ReadOnlyMany/ReadWriteMany/ReadWriteOncePod
	// (default the first three). May be a template.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	AccessModes *Value `json:"accessModes,omitempty"`
	// Minimum capacity (a quantity). May be a template.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	MinCapacity *Value `json:"minCapacity,omitempty"`
	// Maximum capacity (a quantity). May be a template.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	MaxCapacity *Value `json:"maxCapacity,omitempty"`
	// PodTemplateSpec of the volume validation pod. May contain templates.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	PodTemplate *Value `json:"podTemplate,omitempty"`
}

// VolumeCreation: how a volume is created (dynamic provisioning only).
//
// +kubebuilder:validation:Type=""
type VolumeCreation struct {
	Section `json:"-"`
	// The volume handle (PersistentVolume.spec.csi.volumeHandle). May be a template.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	Handle *Value `json:"handle,omitempty"`
	// The volume capacity (a quantity). May be a template.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	Capacity *Value `json:"capacity,omitempty"`
	// PodTemplateSpec of the volume creation pod. May contain templates.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	PodTemplate *Value `json:"podTemplate,omitempty"`
	// PaV-Go addition: a core/v1 VolumeNodeAffinity set on the created
	// PersistentVolume (e.g. for node-local volumes). May contain templates.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	NodeAffinity *Value `json:"nodeAffinity,omitempty"`
	// PaV-Go addition: true if the provisioner can clone, i.e. create a
	// volume from a claim of the same provisioner named in the new claim's
	// dataSource (its creation context then has sourcePvc, sourcePv and
	// sourceHandle). Default false: such claims are refused.
	Cloning bool `json:"cloning,omitempty"`
	// PaV-Go addition: true if the provisioner can restore, i.e. create a
	// volume from a VolumeSnapshot of one of its own volumes named in the
	// new claim's dataSource (its creation context then has snapshot,
	// snapshotContent and snapshotHandle). Default false: such claims are
	// refused.
	Restoring bool `json:"restoring,omitempty"`
}

// VolumeDeletion: how a dynamically provisioned volume is deleted.
//
// +kubebuilder:validation:Type=""
type VolumeDeletion struct {
	Section `json:"-"`
	// PodTemplateSpec of the volume deletion pod. May contain templates.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	PodTemplate *Value `json:"podTemplate,omitempty"`
}

// VolumeStaging: how a volume is made available on a node. podTemplate is mandatory.
//
// +kubebuilder:validation:Type=""
type VolumeStaging struct {
	Section `json:"-"`
	// PodTemplateSpec of the volume staging pod. May contain templates.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	PodTemplate *Value `json:"podTemplate,omitempty"`
	// PaV-Go addition: true to publish Filesystem volumes without nosuid and
	// nodev, for backends whose files must keep setuid bits or device nodes
	// working in the client pod (a root file system image, say). Default
	// false: whatever the staging pod or anyone writing to the volume put
	// there, a setuid binary does not raise privileges in the client and a
	// device node does not open. A literal: a section written as a template
	// cannot set it.
	AllowSetuidAndDevices bool `json:"allowSetuidAndDevices,omitempty"`
	// PaV-Go addition: what the node plugin does when a volume's staging
	// stops serving clients that still use it (a long-running staging pod
	// stops; a run-to-completion one's volume is found gone). Restage (the
	// default): stage the volume again and replace the mount, or the
	// device, in the running client containers. None: only report it
	// (Event, abnormal volume condition), e.g. for a daemon whose cache
	// must not be replaced silently.
	// +kubebuilder:validation:Enum=Restage;None
	// +optional
	Recovery StagingRecovery `json:"recovery,omitempty"`
	// PaV-Go addition: true to stage a volume once per node: one staging
	// pod serves every client pod on the node that uses the volume (CSI
	// NodeStageVolume), and its unstaging pod runs when the last of them
	// goes. Default false: one staging pod per client pod, as the spec
	// says. The staging context then has no client in it: readOnly is
	// whether the volume is staged read-only (a read-only access mode),
	// and each client's own read-only flag applies to its bind only. A
	// literal: a section written as a template cannot set it.
	// +optional
	Shared bool `json:"shared,omitempty"`
	// PaV-Go addition: what happens to running staging pods when this
	// section changes. OnDelete (the default): they keep serving and are
	// counted in status.outdatedStagings. RollingUpdate: each node plugin
	// replaces its outdated staging pods one at a time, make-before-break:
	// the new staging pod starts, the volume is swapped under the running
	// clients, then the old one stops and its unstaging pod runs (so the
	// backend must allow two daemons at once for a while). A literal.
	// +kubebuilder:validation:Enum=OnDelete;RollingUpdate
	// +optional
	UpdateStrategy StagingUpdateStrategy `json:"updateStrategy,omitempty"`
	// PaV-Go addition: the fsGroupPolicy of the provisioner's CSIDriver,
	// which decides whether kubelet applies a client pod's
	// securityContext.fsGroup to the published volume (changing the group
	// of its files, recursively, and making them group-writable): None:
	// never; File: always, but not to read-only mounts;
	// ReadWriteOnceWithFSType (the default): only to volumes whose
	// PersistentVolume sets spec.csi.fsType and lists ReadWriteOnce. A
	// change applies to volumes published afterwards. A literal: a section
	// written as a template cannot set it.
	// +kubebuilder:validation:Enum=None;File;ReadWriteOnceWithFSType
	FSGroupPolicy *storagev1.FSGroupPolicy `json:"fsGroupPolicy,omitempty"`
}

// StagingUpdateStrategy is spec.volumeStaging.updateStrategy.
type StagingUpdateStrategy string

const (
	UpdateOnDelete      StagingUpdateStrategy = "OnDelete"
	UpdateRollingUpdate StagingUpdateStrategy = "RollingUpdate"
)

// StagingRecovery is spec.volumeStaging.recovery.
type StagingRecovery string

const (
	RecoveryRestage StagingRecovery = "Restage"
	RecoveryNone    StagingRecovery = "None"
)

// VolumeUnstaging: how the effects of staging are reverted.
//
// +kubebuilder:validation:Type=""
type VolumeUnstaging struct {
	Section `json:"-"`
	// PodTemplateSpec of the volume unstaging pod. May contain templates.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	PodTemplate *Value `json:"podTemplate,omitempty"`
}

// VolumeExpansion: how a dynamically provisioned volume grows when its claim
// asks for more (a PaV-Go addition). Without a pod template the new size is
// only recorded.
//
// +kubebuilder:validation:Type=""
type VolumeExpansion struct {
	Section `json:"-"`
	// PodTemplateSpec of the volume expansion pod, which grows the volume
	// and may write its new capacity to /pav/capacity. May contain templates.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	PodTemplate *Value `json:"podTemplate,omitempty"`
}

// VolumeModification: how a dynamically provisioned volume takes the
// parameters of another VolumeAttributesClass (a PaV-Go addition). Without a
// pod template the new class is only recorded.
//
// +kubebuilder:validation:Type=""
type VolumeModification struct {
	Section `json:"-"`
	// PodTemplateSpec of the volume modification pod, which gives the
	// volume the new class's parameters, or writes /pav/infeasible if it
	// never can. May contain templates.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	PodTemplate *Value `json:"podTemplate,omitempty"`
}

// SnapshotCreation: how a snapshot of a volume is taken (a PaV-Go addition).
//
// +kubebuilder:validation:Type=""
type SnapshotCreation struct {
	Section `json:"-"`
	// PodTemplateSpec of the snapshot creation pod, which writes the
	// snapshot's handle to /pav/snapshot-handle and may write its restore
	// size (bytes, or a quantity) to /pav/restore-size. May contain
	// templates.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	PodTemplate *Value `json:"podTemplate,omitempty"`
}

// SnapshotDeletion: how a snapshot is deleted (a PaV-Go addition).
//
// +kubebuilder:validation:Type=""
type SnapshotDeletion struct {
	Section `json:"-"`
	// PodTemplateSpec of the snapshot deletion pod. May contain templates.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	PodTemplate *Value `json:"podTemplate,omitempty"`
}

// GroupSnapshotCreation: how a group snapshot of several volumes is taken
// (a PaV-Go addition).
//
// +kubebuilder:validation:Type=""
type GroupSnapshotCreation struct {
	Section `json:"-"`
	// PodTemplateSpec of the group snapshot creation pod, which writes the
	// group's handle to /pav/snapshot-handle and, for each volume, a line
	// "<volume handle> <snapshot handle> [<restore size>]" to
	// /pav/snapshot-handles. May contain templates.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	PodTemplate *Value `json:"podTemplate,omitempty"`
}

// GroupSnapshotDeletion: how a group snapshot is deleted (a PaV-Go addition).
//
// +kubebuilder:validation:Type=""
type GroupSnapshotDeletion struct {
	Section `json:"-"`
	// PodTemplateSpec of the group snapshot deletion pod. May contain
	// templates.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
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
	// The metadata.generation that the conditions describe.
	// +kubebuilder:validation:Minimum=0
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Ready (valid, CSIDriver in place) and Valid (templates compile, literals typed).
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// PaV-Go addition: the provisioner's staging pods that serve volumes
	// (not being deleted), on all nodes.
	// +optional
	Stagings int32 `json:"stagings,omitempty"`
	// PaV-Go addition: how many of them were made from an earlier
	// spec.volumeStaging than the current one (they keep serving; a new
	// staging, or a recovery, uses the current one).
	// +optional
	OutdatedStagings int32 `json:"outdatedStagings,omitempty"`
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

// FSGroupPolicies are the values volumeStaging.fsGroupPolicy may take:
// storagev1's.
var FSGroupPolicies = []storagev1.FSGroupPolicy{storagev1.NoneFSGroupPolicy, storagev1.FileFSGroupPolicy, storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy}

// FSGroupPolicy is the provisioner's spec.volumeStaging.fsGroupPolicy, or
// the default ReadWriteOnceWithFSType (also Kubernetes' default).
func (p *PavProvisioner) FSGroupPolicy() storagev1.FSGroupPolicy {
	if st := p.Spec.VolumeStaging; st != nil && st.FSGroupPolicy != nil {
		return *st.FSGroupPolicy
	}
	return storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy
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

func (v *VolumeModification) UnmarshalJSON(data []byte) error {
	type fields VolumeModification
	return unmarshalSection(data, &v.Section, (*fields)(v))
}

func (v VolumeModification) MarshalJSON() ([]byte, error) {
	type fields VolumeModification
	return marshalSection(v.Section, fields(v))
}

func (v *SnapshotCreation) UnmarshalJSON(data []byte) error {
	type fields SnapshotCreation
	return unmarshalSection(data, &v.Section, (*fields)(v))
}

func (v SnapshotCreation) MarshalJSON() ([]byte, error) {
	type fields SnapshotCreation
	return marshalSection(v.Section, fields(v))
}

func (v *SnapshotDeletion) UnmarshalJSON(data []byte) error {
	type fields SnapshotDeletion
	return unmarshalSection(data, &v.Section, (*fields)(v))
}

func (v SnapshotDeletion) MarshalJSON() ([]byte, error) {
	type fields SnapshotDeletion
	return marshalSection(v.Section, fields(v))
}

func (v *GroupSnapshotCreation) UnmarshalJSON(data []byte) error {
	type fields GroupSnapshotCreation
	return unmarshalSection(data, &v.Section, (*fields)(v))
}

func (v GroupSnapshotCreation) MarshalJSON() ([]byte, error) {
	type fields GroupSnapshotCreation
	return marshalSection(v.Section, fields(v))
}

func (v *GroupSnapshotDeletion) UnmarshalJSON(data []byte) error {
	type fields GroupSnapshotDeletion
	return unmarshalSection(data, &v.Section, (*fields)(v))
}

func (v GroupSnapshotDeletion) MarshalJSON() ([]byte, error) {
	type fields GroupSnapshotDeletion
	return marshalSection(v.Section, fields(v))
}
