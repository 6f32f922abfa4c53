package templating

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/albertofaria/pav/templating/jinja"
)

// node is one compiled value of a phase section: a scalar, a string (maybe a
// Jinja template), a list or an object. Only values are templates; object
// keys are always taken literally (so the shape of an object, and hence the
// set of its fields, is known before evaluation).
type node struct {
	raw       interface{}     // the value as written (JSON-like)
	tmpl      *jinja.Template // non-nil for a string with Jinja syntax
	items     []*node
	keys      []string // sorted, for deterministic error order
	fields    map[string]*node
	templated bool // this value or something under it is a template
	broken    bool // a string that failed to compile (reported already)
}

// compileNode compiles every string under v, reporting each template that
// does not compile with its path and line/column, and in overtime one that
// ran out of time.
func compileNode(v interface{}, path *field.Path, overtime *bool) (*node, field.ErrorList) {
	n := &node{raw: v}
	var errs field.ErrorList
	switch x := v.(type) {
	case string:
		t, err := jinja.Compile(x)
		if err != nil {
			*overtime = *overtime || errors.Is(err, jinja.ErrDeadline)
			n.broken, n.templated = true, true
			return n, field.ErrorList{templateError(path, err)}
		}
		if !t.IsLiteral() {
			n.tmpl, n.templated = t, true
		} else {
			// Jinja renders even a string without any syntax: one trailing
			// newline goes, as it does from a template.
			n.raw = t.LiteralText()
		}
	case []interface{}:
		n.items = make([]*node, len(x))
		for i, item := range x {
			c, e := compileNode(item, path.Index(i), overtime)
			errs = append(errs, e...)
			n.items[i] = c
			n.templated = n.templated || c.templated
		}
	case map[string]interface{}:
		n.fields = make(map[string]*node, len(x))
		for k := range x {
			n.keys = append(n.keys, k)
		}
		sort.Strings(n.keys)
		for _, k := range n.keys {
			c, e := compileNode(x[k], path.Child(k), overtime)
			errs = append(errs, e...)
			n.fields[k] = c
			n.templated = n.templated || c.templated
		}
	}
	return n, errs
}

// eachTemplate calls f with every template of the section and its path.
func (s *section) eachTemplate(f func(*field.Path, *jinja.Template)) {
	if s.whole != nil {
		s.whole.eachTemplate(s.path, f)
	}
	for _, k := range sortedFieldKeys(s.fields) {
		s.fields[k].eachTemplate(s.path.Child(k), f)
	}
}

func (n *node) eachTemplate(path *field.Path, f func(*field.Path, *jinja.Template)) {
	switch {
	case !n.templated:
	case n.tmpl != nil:
		f(path, n.tmpl)
	case n.items != nil:
		for i, c := range n.items {
			c.eachTemplate(path.Index(i), f)
		}
	default:
		for _, k := range n.keys {
			n.fields[k].eachTemplate(path.Child(k), f)
		}
	}
}

// closest is the candidate nearest to name, "" when none is near: at most
// two edits away, one per three letters (so that short names, which are
// near everything, get no suggestion), case ignored.
func closest(name string, candidates []string) string {
	best, bestDist := "", min(2, len(name)/3)+1
	for _, c := range candidates {
		d := editDistance(strings.ToLower(name), strings.ToLower(c))
		if d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// editDistance is Levenshtein's distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

const templatePositionFormat = "template line %d, column %d: %s"

var templatePositionRe = regexp.MustCompile(`(?s)^template line (\d+), column (\d+): (.*)$`)

// TemplatePosition reads back where in its template (1-based line and
// column) a problem Validate or Warnings found is, and what it is; ok is
// false for a problem that is not about a position in a template.
func TemplatePosition(e *field.Error) (line, column int, message string, ok bool) {
	m := templatePositionRe.FindStringSubmatch(e.Detail)
	if m == nil {
		return 0, 0, "", false
	}
	line, _ = strconv.Atoi(m[1])
	column, _ = strconv.Atoi(m[2])
	return line, column, m[3], true
}

// templateError turns an engine error into a field error that names the
// field and the template's line and column, never the whole template.
func templateError(path *field.Path, err error) *field.Error {
	var je *jinja.Error
	if errors.As(err, &je) {
		if je.Line > 0 {
			return field.Invalid(path, field.OmitValueType{}, fmt.Sprintf(templatePositionFormat, je.Line, je.Column, je.Message))
		}
		return field.Invalid(path, field.OmitValueType{}, "template: "+je.Message)
	}
	return field.Invalid(path, field.OmitValueType{}, "template: "+err.Error())
}

// env is what templates are evaluated with.
type env struct {
	vars map[string]interface{}
	fns  *jinja.Functions
}

// eval evaluates n: each template becomes its output string, or the
// YAML-parsed output when the template set yaml to true (not evaluated again).
func (n *node) eval(path *field.Path, e *env) (interface{}, field.ErrorList) {
	if !n.templated {
		return runtime.DeepCopyJSONValue(n.raw), nil
	}
	switch {
	case n.broken:
		return nil, field.ErrorList{field.InternalError(path, errors.New("evaluating a template that did not compile"))}
	case n.tmpl != nil:
		out, isYAML, err := n.tmpl.Render(e.vars, e.fns)
		if err != nil {
			return nil, field.ErrorList{templateError(path, err)}
		}
		if !isYAML {
			return out, nil
		}
		v, err := parseYAML(out)
		if err != nil {
			return nil, field.ErrorList{field.Invalid(path, shorten(out), "the template set yaml to true but its output is not valid YAML: "+err.Error())}
		}
		return v, nil
	case n.items != nil:
		var errs field.ErrorList
		out := make([]interface{}, len(n.items))
		for i, c := range n.items {
			v, e := c.eval(path.Index(i), e)
			errs = append(errs, e...)
			out[i] = v
		}
		return out, errs
	default:
		var errs field.ErrorList
		out := make(map[string]interface{}, len(n.fields))
		for _, k := range n.keys {
			v, e := n.fields[k].eval(path.Child(k), e)
			errs = append(errs, e...)
			out[k] = v
		}
		return out, errs
	}
}

// templateValue stands for a template in a value whose evaluation is not
// known yet (validation of a PavProvisioner before any volume exists).
type templateValue struct{}

// skeleton returns n's value with every template replaced by templateValue{}:
// what validation can check before evaluation.
func (n *node) skeleton() interface{} {
	if !n.templated {
		return n.raw
	}
	switch {
	case n.tmpl != nil || n.broken:
		// Its type is unknown until evaluation (or, if broken, never), so
		// nothing more can be said about it.
		return templateValue{}
	case n.items != nil:
		out := make([]interface{}, len(n.items))
		for i, c := range n.items {
			out[i] = c.skeleton()
		}
		return out
	default:
		out := make(map[string]interface{}, len(n.fields))
		for k, c := range n.fields {
			out[k] = c.skeleton()
		}
		return out
	}
}

// hasTemplate reports whether a skeleton value holds a template anywhere.
func hasTemplate(v interface{}) bool {
	switch x := v.(type) {
	case templateValue:
		return true
	case []interface{}:
		for _, i := range x {
			if hasTemplate(i) {
				return true
			}
		}
	case map[string]interface{}:
		for _, i := range x {
			if hasTemplate(i) {
				return true
			}
		}
	}
	return false
}

// shorten keeps error messages readable when a value is long.
func shorten(s string) string {
	const max = 80
	if i := strings.IndexByte(s, '\n'); i >= 0 && i < max {
		return s[:i] + "..."
	}
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}
