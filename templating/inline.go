package templating

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/protocol"
)

// A CSI inline ephemeral volume's attributes are written by a tenant (the
// pod's volumeAttributes): they become params only as
// spec.inlineVolumePolicy declares them.

// Bounds of spec.inlineVolumePolicy (the CRD has the same).
const (
	maxInlineAttributes       = 32
	maxInlinePatternBytes     = 1024
	maxInlineEnumValues       = 64
	maxInlineAttributeLength  = protocol.MaxVolumeAttributeValueBytes
	maxInlineAttributeKeySize = 316
)

// validateInline checks spec.inlineVolumePolicy: only with inlineVolumes,
// attribute names as label keys (none of kubelet's), once each, patterns
// that compile, bounded lengths and counts, defaults that fit their own
// declaration, a namespace selector that parses.
func validateInline(s *v1alpha1.PavProvisionerSpec) field.ErrorList {
	pol := s.InlineVolumePolicy
	if pol == nil {
		return nil
	}
	path := specPath.Child("inlineVolumePolicy")
	var errs field.ErrorList
	if !s.InlineVolumes {
		errs = append(errs, field.Forbidden(path, "only with spec.inlineVolumes: true"))
	}
	if n := len(pol.Attributes); n > maxInlineAttributes {
		errs = append(errs, field.TooMany(path.Child("attributes"), n, maxInlineAttributes))
	}
	seen := map[string]bool{}
	for i := range pol.Attributes {
		a := &pol.Attributes[i]
		ap := path.Child("attributes").Index(i)
		errs = append(errs, validateInlineAttribute(a, ap)...)
		if seen[a.Name] {
			errs = append(errs, field.Duplicate(ap.Child("name"), a.Name))
		}
		seen[a.Name] = true
	}
	if sel := pol.NamespaceSelector; sel != nil {
		if _, err := metav1.LabelSelectorAsSelector(sel); err != nil {
			errs = append(errs, field.Invalid(path.Child("namespaceSelector"), sel.String(), err.Error()))
		}
	}
	for name, v := range map[string]*int32{"maxVolumesPerPod": pol.MaxVolumesPerPod, "maxVolumesPerNamespace": pol.MaxVolumesPerNamespace} {
		if v != nil && *v < 1 {
			errs = append(errs, field.Invalid(path.Child(name), *v, "must be at least 1"))
		}
	}
	sort.SliceStable(errs, func(i, j int) bool { return errs[i].Field < errs[j].Field })
	return errs
}

// validateInlineAttribute checks one declared attribute: its name (a label
// key, none of kubelet's), pattern, enum and maxLength within bounds, and a
// default that fits the declaration.
func validateInlineAttribute(a *v1alpha1.InlineVolumeAttribute, ap *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case len(a.Name) > maxInlineAttributeKeySize:
		errs = append(errs, field.TooLong(ap.Child("name"), a.Name, maxInlineAttributeKeySize))
	case strings.HasPrefix(a.Name, protocol.ReservedAttributePrefix):
		errs = append(errs, field.Invalid(ap.Child("name"), a.Name, "keys under "+protocol.ReservedAttributePrefix+" are kubelet's"))
	default:
		for _, msg := range validation.IsQualifiedName(a.Name) {
			errs = append(errs, field.Invalid(ap.Child("name"), a.Name, "an attribute is written like a label key: "+msg))
		}
	}
	if len(a.Pattern) > maxInlinePatternBytes {
		errs = append(errs, field.TooLong(ap.Child("pattern"), "", maxInlinePatternBytes))
	} else if _, err := compilePattern(a.Pattern); err != nil {
		errs = append(errs, field.Invalid(ap.Child("pattern"), a.Pattern, err.Error()))
	}
	if n := len(a.Enum); n > maxInlineEnumValues {
		errs = append(errs, field.TooMany(ap.Child("enum"), n, maxInlineEnumValues))
	}
	if m := a.MaxLength; m != nil && (*m < 1 || *m > maxInlineAttributeLength) {
		errs = append(errs, field.Invalid(ap.Child("maxLength"), *m, fmt.Sprintf("must be between 1 and %d", maxInlineAttributeLength)))
	}
	for j, v := range a.Enum {
		if len(v) > a.MaxLengthOrDefault() {
			errs = append(errs, field.Invalid(ap.Child("enum").Index(j), v, fmt.Sprintf("longer than maxLength (%d)", a.MaxLengthOrDefault())))
		}
	}
	if a.Default != nil {
		if a.Required {
			errs = append(errs, field.Invalid(ap.Child("default"), *a.Default, "a required attribute has no default"))
		} else if err := checkInlineAttribute(a, *a.Default); err != nil {
			errs = append(errs, field.Invalid(ap.Child("default"), *a.Default, err.Error()))
		}
	}
	return errs
}

// compilePattern compiles an attribute's pattern to match whole values.
func compilePattern(p string) (*regexp.Regexp, error) {
	if p == "" {
		return nil, nil
	}
	return regexp.Compile(`^(?:` + p + `)$`)
}

// checkInlineAttribute checks one value against its declaration.
func checkInlineAttribute(a *v1alpha1.InlineVolumeAttribute, v string) error {
	if max := a.MaxLengthOrDefault(); len(v) > max {
		return fmt.Errorf("it is %d bytes long; at most %d are allowed", len(v), max)
	}
	if len(a.Enum) > 0 && !slices.Contains(a.Enum, v) {
		return fmt.Errorf("it must be one of %s", quoteAll(a.Enum))
	}
	re, err := compilePattern(a.Pattern)
	if err != nil {
		return fmt.Errorf("its pattern does not compile: %v", err)
	}
	if re != nil && !re.MatchString(v) {
		return fmt.Errorf("it must match the pattern %q", a.Pattern)
	}
	return nil
}

// InlineAttributes is what a pod's inline volume attributes (without
// kubelet's) become as params: each declared in pol and fitting its
// declaration, the defaults of those not given added. Any other attribute,
// a value that does not fit or a required one missing is an error that
// names it; without a policy no attribute is accepted.
func InlineAttributes(pol *v1alpha1.InlineVolumePolicy, attrs map[string]string) (map[string]string, error) {
	var decl []v1alpha1.InlineVolumeAttribute
	if pol != nil {
		decl = pol.Attributes
	}
	keys := make([]string, 0, len(attrs))
	for k := range attrs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var problems []string
	out := map[string]string{}
	for _, k := range keys {
		i := slices.IndexFunc(decl, func(a v1alpha1.InlineVolumeAttribute) bool { return a.Name == k })
		if i < 0 {
			problems = append(problems, fmt.Sprintf("attribute %q is not one the provisioner accepts (%s)", truncate(k, 64), declared(decl)))
			continue
		}
		if err := checkInlineAttribute(&decl[i], attrs[k]); err != nil {
			problems = append(problems, fmt.Sprintf("attribute %q: %v", k, err))
			continue
		}
		out[k] = attrs[k]
	}
	for i := range decl {
		a := &decl[i]
		if _, ok := attrs[a.Name]; ok {
			continue
		}
		switch {
		case a.Required:
			problems = append(problems, fmt.Sprintf("attribute %q is required", a.Name))
		case a.Default != nil:
			out[a.Name] = *a.Default
		}
	}
	if n := len(problems); n > maxInlineProblems {
		problems = append(problems[:maxInlineProblems], fmt.Sprintf("and %d more", n-maxInlineProblems))
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return out, nil
}

// maxInlineProblems bounds the message (a pod may have any number of
// attributes; kubelet puts the message in an Event).
const maxInlineProblems = 4

func declared(decl []v1alpha1.InlineVolumeAttribute) string {
	if len(decl) == 0 {
		return "it declares none in spec.inlineVolumePolicy.attributes"
	}
	names := make([]string, len(decl))
	for i, a := range decl {
		names[i] = a.Name
	}
	return "declared: " + quoteAll(names)
}

// quoteAll lists values for a message: the first 8, each cut at 64 bytes.
func quoteAll(l []string) string {
	q := make([]string, 0, min(len(l), 9))
	for i, s := range l {
		if i == 8 {
			q = append(q, fmt.Sprintf("… (%d in all)", len(l)))
			break
		}
		q = append(q, fmt.Sprintf("%q", truncate(s, 64)))
	}
	return strings.Join(q, ", ")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
