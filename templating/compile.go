package templating

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/templating/jinja"
)

// section is a compiled phase section: its present fields, by JSON name, or
// (whole) one template for the whole section, which must evaluate to them.
type section struct {
	path   *field.Path
	fields map[string]*node
	whole  *node
}

// Compiled is a validated PavProvisioner with every template compiled, ready
// to evaluate any phase any number of times, from any goroutine.
type Compiled struct {
	// Provisioner is a private copy of the object that was compiled.
	Provisioner *v1alpha1.PavProvisioner

	validation, creation, deletion, staging, unstaging, expansion, capacity *section
	snapshotCreation, snapshotDeletion, modification                        *section
	groupSnapshotCreation, groupSnapshotDeletion                            *section
}

var specPath = field.NewPath("spec")

// Validate checks a PavProvisioner and returns every problem, each with its
// field path: the CRD's own rules (so that it also works offline), every
// template compiles (unknown filters, tests and functions are errors), and
// every literal value has the right type, pod templates included. The
// admission webhook and the controller both use it.
func Validate(p *v1alpha1.PavProvisioner) field.ErrorList {
	_, errs, _ := compile(p)
	return errs
}

// Warnings are what is likely wrong but does not stop PaV from using p:
// names a template reads that its phase's context does not have (a
// misspelt variable is undefined, and most templates then fail for every
// volume). The admission webhook returns them as warnings, so provisioners
// written before this check keep working; `pav validate` counts them as
// problems. Nil when p does not compile (Validate reports why).
func Warnings(p *v1alpha1.PavProvisioner) field.ErrorList {
	_, warnings := Check(p)
	return warnings
}

// Check is Validate and, for a valid p, Warnings, with one compile.
func Check(p *v1alpha1.PavProvisioner) (errs, warnings field.ErrorList) {
	c, errs, _ := compile(p)
	if len(errs) > 0 {
		return errs, nil
	}
	return nil, c.warnings()
}

func (c *Compiled) warnings() field.ErrorList {
	var warnings field.ErrorList
	for _, sec := range c.sections() {
		known := ContextVariables(sec.phase(), c.Provisioner.Spec.ProvisioningModes)
		sec.eachTemplate(func(path *field.Path, t *jinja.Template) {
			for _, n := range t.FreeNames() {
				if slices.Contains(known, n.Name) {
					continue
				}
				msg := fmt.Sprintf("'%s' is not a variable of %s's context", n.Name, strings.TrimPrefix(sec.path.String(), "spec."))
				if s := closest(n.Name, known); s != "" {
					msg += fmt.Sprintf(" (did you mean '%s'?)", s)
				}
				warnings = append(warnings, templateError(path, &jinja.Error{Line: n.Line, Column: n.Column, Message: msg}))
			}
		})
	}
	return warnings
}

// sections are c's present sections.
func (c *Compiled) sections() []*section {
	var out []*section
	for _, s := range []*section{c.validation, c.creation, c.deletion, c.staging, c.unstaging, c.expansion, c.modification} {
		if s != nil {
			out = append(out, s)
		}
	}
	return out
}

// Compile validates p (see Validate) and compiles it. The error is a
// utilerrors.Aggregate of *field.Error, one per problem.
func Compile(p *v1alpha1.PavProvisioner) (*Compiled, error) {
	c, errs, _ := compile(p)
	if len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	return c, nil
}

// maxTemplateBytes bounds the templates of one PavProvisioner together (every
// string with Jinja syntax), checked before any is compiled, far above what
// the examples need. With jinja's bound on each template's tokens, it bounds
// what compiling one provisioner costs.
const maxTemplateBytes = 64 << 10

// compile validates and compiles p; overtime reports a template that ran out
// of time, a failure another try may not have.
func compile(p *v1alpha1.PavProvisioner) (_ *Compiled, _ field.ErrorList, overtime bool) {
	// The bounds first, on the spec as the API server stores it: what an
	// admin stored before they applied (or what got past an older webhook)
	// costs no more here than at admission.
	spec, err := json.Marshal(&p.Spec)
	if err != nil {
		return nil, field.ErrorList{field.Invalid(specPath, "", fmt.Sprintf("encoding the spec: %v", err))}, false
	}
	if errs := CheckSpecBounds(spec); len(errs) > 0 {
		return nil, errs, false
	}
	errs := validateObjectMeta(p)
	errs = append(errs, validateModes(p)...)
	errs = append(errs, validateTopology(&p.Spec)...)
	errs = append(errs, validateInline(&p.Spec)...)

	c := &Compiled{Provisioner: p.DeepCopy()}
	sources := c.sectionSources(&p.Spec)
	if p.Spec.VolumeStaging == nil {
		errs = append(errs, field.Required(specPath.Child("volumeStaging"), "every provisioner needs a staging pod"))
	}
	if n := templateBytes(sources); n > maxTemplateBytes {
		return nil, append(errs, field.Forbidden(specPath,
			fmt.Sprintf("the templates of a PavProvisioner may have %d bytes together, these have %d", maxTemplateBytes, n))), false
	}
	for _, src := range sources {
		errs = append(errs, src.compile(&overtime)...)
	}
	errs = append(errs, c.checkRequired(p)...)
	errs = append(errs, c.checkLiterals()...)
	if len(errs) > 0 {
		return nil, errs, overtime
	}
	return c, nil, false
}

// validateObjectMeta checks what a PavProvisioner is and its name.
func validateObjectMeta(p *v1alpha1.PavProvisioner) field.ErrorList {
	var errs field.ErrorList
	if p.APIVersion != "" && p.APIVersion != v1alpha1.SchemeGroupVersion.String() {
		errs = append(errs, field.NotSupported(field.NewPath("apiVersion"), p.APIVersion, []string{v1alpha1.SchemeGroupVersion.String()}))
	}
	if p.Kind != "" && p.Kind != v1alpha1.Kind {
		errs = append(errs, field.NotSupported(field.NewPath("kind"), p.Kind, []string{v1alpha1.Kind}))
	}
	namePath := field.NewPath("metadata", "name")
	if p.Name == "" {
		errs = append(errs, field.Required(namePath, "a PavProvisioner needs a name"))
	} else {
		for _, msg := range validation.IsDNS1123Label(p.Name) {
			errs = append(errs, field.Invalid(namePath, p.Name, msg))
		}
	}
	if p.Namespace != "" {
		errs = append(errs, field.Forbidden(field.NewPath("metadata", "namespace"), "PavProvisioners are cluster-scoped"))
	}
	return errs
}

// validateModes checks spec.provisioningModes, the sections only Dynamic
// provisioning uses, and the staging's fsGroupPolicy.
func validateModes(p *v1alpha1.PavProvisioner) field.ErrorList {
	var errs field.ErrorList
	s := &p.Spec
	modesPath := specPath.Child("provisioningModes")
	if len(s.ProvisioningModes) == 0 {
		errs = append(errs, field.Required(modesPath, "list Dynamic, Static or both"))
	}
	seen := map[v1alpha1.ProvisioningMode]bool{}
	for i, m := range s.ProvisioningModes {
		switch {
		case m != v1alpha1.Dynamic && m != v1alpha1.Static:
			errs = append(errs, field.NotSupported(modesPath.Index(i), string(m), []v1alpha1.ProvisioningMode{v1alpha1.Dynamic, v1alpha1.Static}))
		case seen[m]:
			errs = append(errs, field.Duplicate(modesPath.Index(i), string(m)))
		}
		seen[m] = true
	}
	if st := s.VolumeStaging; st != nil && st.FSGroupPolicy != nil && !slices.Contains(v1alpha1.FSGroupPolicies, *st.FSGroupPolicy) {
		errs = append(errs, field.NotSupported(specPath.Child("volumeStaging", "fsGroupPolicy"), string(*st.FSGroupPolicy), v1alpha1.FSGroupPolicies))
	}
	if p.HasMode(v1alpha1.Dynamic) {
		return errs
	}
	for _, sec := range []struct {
		name string
		set  bool
	}{
		{"volumeCreation", s.VolumeCreation != nil}, {"volumeDeletion", s.VolumeDeletion != nil},
		{"volumeExpansion", s.VolumeExpansion != nil}, {"volumeModification", s.VolumeModification != nil},
	} {
		if sec.set {
			errs = append(errs, field.Forbidden(specPath.Child(sec.name), "may only be specified if provisioningModes contains Dynamic"))
		}
	}
	return errs
}

// sectionSources are the sections p's spec has, each with where its
// compiled form goes in c.
func (c *Compiled) sectionSources(s *v1alpha1.PavProvisionerSpec) []sectionSource {
	var sources []sectionSource
	podOnly := func(name string, meta v1alpha1.Section, v *v1alpha1.Value, dst **section) {
		sources = append(sources, sectionSource{name, meta, map[string]*v1alpha1.Value{"podTemplate": v}, dst})
	}
	if v := s.VolumeValidation; v != nil {
		sources = append(sources, sectionSource{"volumeValidation", v.Section, map[string]*v1alpha1.Value{
			"volumeModes": v.VolumeModes, "accessModes": v.AccessModes,
			"minCapacity": v.MinCapacity, "maxCapacity": v.MaxCapacity, "podTemplate": v.PodTemplate}, &c.validation})
	}
	if v := s.VolumeCreation; v != nil {
		sources = append(sources, sectionSource{"volumeCreation", v.Section, map[string]*v1alpha1.Value{
			"handle": v.Handle, "capacity": v.Capacity, "podTemplate": v.PodTemplate, "nodeAffinity": v.NodeAffinity}, &c.creation})
	}
	if v := s.VolumeDeletion; v != nil {
		podOnly("volumeDeletion", v.Section, v.PodTemplate, &c.deletion)
	}
	if v := s.VolumeStaging; v != nil {
		podOnly("volumeStaging", v.Section, v.PodTemplate, &c.staging)
	}
	if v := s.VolumeUnstaging; v != nil {
		podOnly("volumeUnstaging", v.Section, v.PodTemplate, &c.unstaging)
	}
	if v := s.VolumeExpansion; v != nil {
		podOnly("volumeExpansion", v.Section, v.PodTemplate, &c.expansion)
	}
	if v := s.VolumeModification; v != nil {
		podOnly("volumeModification", v.Section, v.PodTemplate, &c.modification)
	}
	if v := s.StorageCapacity; v != nil {
		sources = append(sources, sectionSource{"storageCapacity", v1alpha1.Section{}, map[string]*v1alpha1.Value{
			"capacity": v.Capacity, "podTemplate": v.PodTemplate}, &c.capacity})
	}
	if v := s.SnapshotCreation; v != nil {
		podOnly("snapshotCreation", v.Section, v.PodTemplate, &c.snapshotCreation)
	}
	if v := s.SnapshotDeletion; v != nil {
		podOnly("snapshotDeletion", v.Section, v.PodTemplate, &c.snapshotDeletion)
	}
	if v := s.GroupSnapshotCreation; v != nil {
		podOnly("groupSnapshotCreation", v.Section, v.PodTemplate, &c.groupSnapshotCreation)
	}
	if v := s.GroupSnapshotDeletion; v != nil {
		podOnly("groupSnapshotDeletion", v.Section, v.PodTemplate, &c.groupSnapshotDeletion)
	}
	return sources
}

// compile compiles one section into its destination: the whole section if
// it is one template, else each field.
func (src sectionSource) compile(overtime *bool) field.ErrorList {
	var errs field.ErrorList
	sec := &section{path: specPath.Child(src.name), fields: map[string]*node{}}
	for _, k := range src.meta.Unknown {
		errs = append(errs, field.Forbidden(sec.path.Child(k), "unknown field"))
	}
	var e field.ErrorList
	if src.meta.Template != nil {
		sec.whole, e = compileNode(*src.meta.Template, sec.path, overtime)
		errs = append(errs, e...)
	}
	for _, f := range sortedFieldNames(src.fields) {
		if v := src.fields[f]; src.meta.Template == nil && v != nil && v.Object != nil {
			sec.fields[f], e = compileNode(v.Object, sec.path.Child(f), overtime)
			errs = append(errs, e...)
		}
	}
	*src.dst = sec
	return errs
}

// checkRequired checks the sections a provisioner cannot do without.
func (c *Compiled) checkRequired(p *v1alpha1.PavProvisioner) field.ErrorList {
	var errs field.ErrorList
	if p.HasMode(v1alpha1.Dynamic) && (c.creation == nil || (c.creation.whole == nil && c.creation.fields["capacity"] == nil && c.creation.fields["podTemplate"] == nil)) {
		// The volume's capacity comes from volumeCreation.capacity or the
		// creation pod's /pav/capacity: with neither, nothing is ever provisioned.
		errs = append(errs, field.Required(specPath.Child("volumeCreation"),
			"a provisioner with provisioningModes Dynamic needs volumeCreation.capacity or a volumeCreation.podTemplate whose pod writes /pav/capacity"))
	}
	if c.staging != nil && c.staging.whole == nil && c.staging.fields["podTemplate"] == nil {
		errs = append(errs, field.Required(specPath.Child("volumeStaging", "podTemplate"), "every provisioner needs a staging pod"))
	}
	return errs
}

// checkLiterals checks what is known before evaluation: literal values and
// the literal parts around templates.
func (c *Compiled) checkLiterals() field.ErrorList {
	var errs field.ErrorList
	checked := c.sections()
	// Not checked against a phase's context variables (Warnings): the
	// sections without a volume phase of the user guide.
	for _, extra := range []*section{c.capacity, c.snapshotCreation, c.snapshotDeletion, c.groupSnapshotCreation, c.groupSnapshotDeletion} {
		if extra != nil {
			checked = append(checked, extra)
		}
	}
	for _, sec := range checked {
		skel := map[string]interface{}{}
		for k, n := range sec.fields {
			skel[k] = n.skeleton()
		}
		errs = append(errs, sec.read(skel)...)
	}
	return errs
}

// validateTopology checks spec.topologyKeys (label keys, no duplicates) and
// spec.storageCapacity (which needs them, and one way of measuring).
func validateTopology(s *v1alpha1.PavProvisionerSpec) field.ErrorList {
	var errs field.ErrorList
	keysPath := specPath.Child("topologyKeys")
	seen := map[string]bool{}
	for i, k := range s.TopologyKeys {
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, field.Invalid(keysPath.Index(i), k, "a topology key is a node label key: "+msg))
		}
		if seen[k] {
			errs = append(errs, field.Duplicate(keysPath.Index(i), k))
		}
		seen[k] = true
	}
	sc := s.StorageCapacity
	if sc == nil {
		return errs
	}
	path := specPath.Child("storageCapacity")
	if len(s.TopologyKeys) == 0 {
		errs = append(errs, field.Required(keysPath, "storage capacity is tracked per topology segment: storageCapacity needs topologyKeys (kubernetes.io/hostname for node-local volumes)"))
	}
	hasCapacity, hasPod := sc.Capacity != nil && sc.Capacity.Object != nil, sc.PodTemplate != nil && sc.PodTemplate.Object != nil
	if hasCapacity == hasPod {
		errs = append(errs, field.Required(path, "give exactly one of capacity (a template) and podTemplate (a pod that writes /pav/capacity)"))
	}
	if r := sc.RefreshPeriod; r != nil && r.Duration < time.Second {
		errs = append(errs, field.Invalid(path.Child("refreshPeriod"), r.Duration.String(), "must be at least 1s"))
	}
	return errs
}

// sectionSource is a phase section as written, to be compiled into dst.
type sectionSource struct {
	name   string
	meta   v1alpha1.Section
	fields map[string]*v1alpha1.Value
	dst    **section
}

// templateBytes adds up the length of every template in the sections.
func templateBytes(sources []sectionSource) int {
	n := 0
	var walk func(v interface{})
	walk = func(v interface{}) {
		switch x := v.(type) {
		case string:
			if jinja.IsTemplate(x) {
				n += len(x)
			}
		case []interface{}:
			for _, item := range x {
				walk(item)
			}
		case map[string]interface{}:
			for _, item := range x {
				walk(item)
			}
		}
	}
	for _, src := range sources {
		if src.meta.Template != nil {
			walk(*src.meta.Template)
		}
		for _, v := range src.fields {
			if v != nil {
				walk(v.Object)
			}
		}
	}
	return n
}

// read checks a section's (skeleton or evaluated) values with the readers of
// its fields.
func (s *section) read(vals map[string]interface{}) field.ErrorList {
	_, errs := s.typed(vals)
	return errs
}

// typed reads a section's evaluated values into the typed fields of every
// phase config (a superset; each phase keeps its own fields).
func (s *section) typed(vals map[string]interface{}) (*sectionValues, field.ErrorList) {
	out := &sectionValues{}
	var errs, e field.ErrorList
	phase := s.phase()
	for _, k := range sortedKeys(vals) {
		v, p := vals[k], s.path.Child(k)
		switch k {
		case "volumeModes":
			out.VolumeModes, e = readVolumeModes(v, p)
		case "accessModes":
			out.AccessModes, e = readAccessModes(v, p)
		case "minCapacity":
			out.MinCapacity, e = readQuantity(v, p)
		case "maxCapacity":
			out.MaxCapacity, e = readQuantity(v, p)
		case "capacity":
			out.Capacity, e = readQuantity(v, p)
			if out.Capacity != nil && out.Capacity.Sign() == 0 && phase != protocol.PhaseCapacity {
				e = append(e, field.Invalid(p, out.Capacity.String(), "a volume's capacity must be positive"))
			}
		case "handle":
			out.Handle, e = readHandle(v, p)
		case "nodeAffinity":
			out.NodeAffinity, e = readNodeAffinity(v, p)
		case "podTemplate":
			out.PodTemplate, e = readPodTemplate(v, p, phase)
		default:
			// Only a whole-section template can produce a key no field has.
			e = field.ErrorList{field.Forbidden(p, "unknown field")}
		}
		errs = append(errs, e...)
	}
	if out.MinCapacity != nil && out.MaxCapacity != nil && out.MinCapacity.Cmp(*out.MaxCapacity) > 0 {
		errs = append(errs, field.Invalid(s.path.Child("maxCapacity"), out.MaxCapacity.String(),
			fmt.Sprintf("must not be less than minCapacity (%s): no claim could be provisioned", out.MinCapacity.String())))
	}
	return out, errs
}

func (s *section) phase() protocol.Phase {
	switch s.path.String() {
	case "spec.volumeValidation":
		return protocol.PhaseValidation
	case "spec.volumeCreation":
		return protocol.PhaseCreation
	case "spec.volumeDeletion":
		return protocol.PhaseDeletion
	case "spec.volumeStaging":
		return protocol.PhaseStaging
	case "spec.volumeExpansion":
		return protocol.PhaseExpansion
	case "spec.volumeModification":
		return protocol.PhaseModification
	case "spec.storageCapacity":
		return protocol.PhaseCapacity
	case "spec.snapshotCreation":
		return protocol.PhaseSnapshotCreation
	case "spec.snapshotDeletion":
		return protocol.PhaseSnapshotDeletion
	case "spec.groupSnapshotCreation":
		return protocol.PhaseGroupSnapshotCreation
	case "spec.groupSnapshotDeletion":
		return protocol.PhaseGroupSnapshotDeletion
	}
	return protocol.PhaseUnstaging
}

func sortedFieldNames(m map[string]*v1alpha1.Value) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Cache holds compiled PavProvisioners keyed by UID and generation, so that
// templates are compiled once per generation. Safe for concurrent use.
type Cache struct {
	mu      sync.Mutex
	entries map[types.UID]cacheEntry
}

type cacheEntry struct {
	generation int64
	compiled   *Compiled
	err        error
}

// NewCache returns an empty Cache.
func NewCache() *Cache { return &Cache{entries: map[types.UID]cacheEntry{}} }

// Get returns p compiled, compiling it if this UID and generation was not seen
// yet (a failure is cached too). Objects without a UID are never cached.
func (c *Cache) Get(p *v1alpha1.PavProvisioner) (*Compiled, error) {
	if p.UID == "" {
		return Compile(p)
	}
	c.mu.Lock()
	e, ok := c.entries[p.UID]
	c.mu.Unlock()
	if ok && e.generation == p.Generation {
		return e.compiled, e.err
	}
	compiled, errs, overtime := compile(p)
	if len(errs) > 0 {
		if overtime {
			// Not the provisioner's fault: the next Get tries again.
			return nil, errs.ToAggregate()
		}
		c.mu.Lock()
		c.entries[p.UID] = cacheEntry{generation: p.Generation, err: errs.ToAggregate()}
		c.mu.Unlock()
		return nil, errs.ToAggregate()
	}
	c.mu.Lock()
	c.entries[p.UID] = cacheEntry{generation: p.Generation, compiled: compiled}
	c.mu.Unlock()
	return compiled, nil
}

// Forget drops a deleted PavProvisioner's entry.
func (c *Cache) Forget(uid types.UID) {
	c.mu.Lock()
	delete(c.entries, uid)
	c.mu.Unlock()
}
