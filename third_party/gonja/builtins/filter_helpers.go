package builtins

import (
	stdjson "encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/utils"
)

// tupleValue is a pair Jinja makes as a tuple.
type tupleValue = exec.Tuple

type groupTupleValue []any

func (g groupTupleValue) String() string {
	return tupleValue(g).String()
}

// TupleItems: Jinja's _GroupTuple prints as a tuple.
func (g groupTupleValue) TupleItems() []any { return g }

func (g groupTupleValue) GetAttribute(name string) (*exec.Value, bool) {
	if len(g) != 2 {
		return exec.AsValue(nil), false
	}
	switch name {
	case "grouper":
		return exec.AsValue(g[0]), true
	case "list":
		return exec.AsValue(g[1]), true
	default:
		return exec.AsValue(nil), false
	}
}

func stringifyFilterValue(value *exec.Value) string {
	if value != nil && value.IsUndefined() { // PaV: str(Undefined) is ""
		return ""
	}
	if value == nil || value.IsNil() {
		return "None"
	}
	if value.IsList() || value.IsDict() { // PaV: Python's str of a container
		return exec.PyStr(value)
	}
	return value.String()
}

func escapeFilterValue(value *exec.Value) string {
	if value != nil && value.IsUndefined() { // PaV: str(Undefined) is ""
		return ""
	}
	if value == nil || value.IsNil() {
		return "None"
	}
	if value.IsList() || value.IsDict() { // PaV: Python's str of a container
		return utils.Escape(exec.PyStr(value))
	}
	return utils.Escape(value.String())
}

// pastStringLimit is the error of a filter whose text, n bytes so far, is
// past the render's string limit, or nil (PaV): checked as its parts add
// up, so that a list of one long item shared many times fails before its
// text is made.
func pastStringLimit(e *exec.Evaluator, name string, n int) *exec.Value {
	if limit := e.Limits().StringBytes; limit > 0 && n > limit {
		return e.Raise(fmt.Errorf("filter %s: result longer than %d bytes", name, limit))
	}
	return nil
}

// attributeGetter is Jinja's make_attrgetter (PaV): the attribute filters'
// argument, a dotted path whose all-digit parts are indexes, or one key of
// another type, or none for the item itself. Each part is x[part]
// (exec.Subscript); a default replaces an undefined after each part; a part
// of an undefined is an error, as Jinja's Undefined raises. Upstream took a
// path of digits with a sign as an index, and a missing item as a reason to
// drop it or to give none.
type attributeGetter struct {
	parts        []*exec.Value
	defaultValue *exec.Value // nil: no default
}

func newAttributeGetter(attribute, defaultValue *exec.Value) attributeGetter {
	g := attributeGetter{defaultValue: defaultValue}
	if isNone(defaultValue) { // Jinja's default=None is no default
		g.defaultValue = nil
	}
	switch {
	case isNone(attribute):
	case attribute.IsString():
		for _, part := range strings.Split(attribute.String(), ".") {
			if index, err := strconv.Atoi(part); err == nil && exec.IsDigits(part) {
				g.parts = append(g.parts, exec.AsValue(index))
			} else {
				g.parts = append(g.parts, exec.AsValue(part))
			}
		}
	default:
		g.parts = []*exec.Value{attribute}
	}
	return g
}

// get is item's attribute, or the error of a part taken of an undefined.
func (g attributeGetter) get(item *exec.Value) (*exec.Value, error) {
	for _, part := range g.parts {
		if item.IsUndefined() {
			return nil, errors.New(item.UndefinedReason())
		}
		if item = exec.Subscript(item, part); item.IsError() {
			return nil, item
		}
		if g.defaultValue != nil && item.IsUndefined() {
			item = g.defaultValue
		}
	}
	return item, nil
}

// attributeGetters is Jinja's make_multi_attrgetter, sort's attribute: a
// getter for each of its comma-separated paths, without defaults.
func attributeGetters(attribute *exec.Value) []attributeGetter {
	if isNone(attribute) || !attribute.IsString() {
		return []attributeGetter{newAttributeGetter(attribute, nil)}
	}
	var getters []attributeGetter
	for _, path := range strings.Split(attribute.String(), ",") {
		getters = append(getters, newAttributeGetter(exec.AsValue(path), nil))
	}
	return getters
}

// isNone is Python's `v is None`: a missing argument or none, not undefined.
func isNone(v *exec.Value) bool {
	return v == nil || v.IsNil() && !v.IsUndefined()
}

// ignoreCase is Jinja's ignore_case: a string key lowercased.
func ignoreCase(v *exec.Value) *exec.Value {
	if v.IsString() {
		return exec.AsValue(exec.PyLower(v.String()))
	}
	return v
}

func compareValues(left, right *exec.Value, caseSensitive bool) int {
	switch {
	case left == nil || left.IsNil():
		if right == nil || right.IsNil() {
			return 0
		}
		return -1
	case right == nil || right.IsNil():
		return 1
	case exec.IsNum(left) && exec.IsNum(right): // PaV: bools count, an int and a float exactly, as in Python
		c, _ := exec.NumOrder(left, right) // NaN: neither before nor after
		return c
	default:
		ls := stringifyFilterValue(left)
		rs := stringifyFilterValue(right)
		if !caseSensitive {
			ls = strings.ToLower(ls)
			rs = strings.ToLower(rs)
		}
		return strings.Compare(ls, rs)
	}
}

func takeValueArgument(output **exec.Value) exec.ArgumentTransmuter {
	return func(v *exec.Value) error {
		if output == nil {
			return fmt.Errorf("received nil pointer to value output")
		}
		*output = v
		return nil
	}
}

func takeStringArgument(output *string) exec.ArgumentTransmuter {
	return func(v *exec.Value) error {
		if output == nil {
			return fmt.Errorf("received nil pointer to string output")
		}
		*output = v.String()
		return nil
	}
}

func takeBoolArgument(output *bool) exec.ArgumentTransmuter {
	return func(v *exec.Value) error {
		if output == nil {
			return fmt.Errorf("received nil pointer to bool output")
		}
		*output = v.Bool()
		return nil
	}
}

func takeIntArgument(output *int) exec.ArgumentTransmuter {
	return func(v *exec.Value) error {
		if output == nil {
			return fmt.Errorf("received nil pointer to int output")
		}
		*output = v.Integer()
		return nil
	}
}

func takeFloatArgument(output *float64) exec.ArgumentTransmuter {
	return func(v *exec.Value) error {
		if output == nil {
			return fmt.Errorf("received nil pointer to float output")
		}
		*output = v.Float()
		return nil
	}
}

func normalizeJSONValue(value any) any {
	switch typed := value.(type) {
	case nil:
		return nil
	case stdjson.Marshaler:
		return typed
	case *exec.Dict:
		object := make(map[string]any, len(typed.Pairs))
		for _, pair := range typed.Pairs {
			object[pair.Key.String()] = normalizeJSONValue(pair.Value.Interface())
		}
		return object
	case exec.Dict:
		object := make(map[string]any, len(typed.Pairs))
		for _, pair := range typed.Pairs {
			object[pair.Key.String()] = normalizeJSONValue(pair.Value.Interface())
		}
		return object
	case *exec.Value:
		return normalizeJSONValue(typed.Interface())
	}

	resolved := reflect.ValueOf(value)
	if !resolved.IsValid() {
		return nil
	}

	switch resolved.Kind() {
	case reflect.Slice, reflect.Array:
		if resolved.Type().Elem().Kind() == reflect.Uint8 {
			return value
		}
		out := make([]any, resolved.Len())
		for i := 0; i < resolved.Len(); i++ {
			out[i] = normalizeJSONValue(resolved.Index(i).Interface())
		}
		return out
	case reflect.Map:
		if resolved.Type().Key().Kind() != reflect.String {
			return value
		}
		out := make(map[string]any, resolved.Len())
		iter := resolved.MapRange()
		for iter.Next() {
			out[iter.Key().String()] = normalizeJSONValue(iter.Value().Interface())
		}
		return out
	default:
		return value
	}
}

func urlEncodePair(item *exec.Value) (*exec.Value, *exec.Value, bool) {
	first, ok := item.GetItem(0)
	if !ok {
		return nil, nil, false
	}
	second, ok := item.GetItem(1)
	if !ok {
		return nil, nil, false
	}
	return first, second, true
}

// pyFloat is Python's float(value) (PaV): a number, a bool or a numeric
// string; undefined raises its UndefinedError, anything else Python's error.
func pyFloat(in *exec.Value) (float64, error) {
	switch {
	case in.IsUndefined():
		return 0, errors.New(in.UndefinedReason())
	case in.IsBool():
		if in.Bool() {
			return 1, nil
		}
		return 0, nil
	case in.IsInteger() || in.IsFloat():
		return in.Float(), nil
	case in.IsString():
		s := strings.TrimSpace(in.String())
		lower := strings.ToLower(strings.TrimLeft(s, "+-"))
		if !strings.HasPrefix(lower, "0x") && !strings.HasPrefix(lower, "0b") && !strings.HasPrefix(lower, "0o") &&
			!strings.HasPrefix(s, "_") && !strings.HasSuffix(s, "_") && !strings.Contains(s, "__") {
			if f, err := strconv.ParseFloat(strings.ReplaceAll(s, "_", ""), 64); err == nil || errors.Is(err, strconv.ErrRange) {
				return f, nil
			}
		}
		return 0, fmt.Errorf("could not convert string to float: %s", exec.PyRepr(in))
	}
	return 0, fmt.Errorf("float() argument must be a string or a real number, not '%s'", exec.PyTypeName(in))
}

// pyFixed is Python's format(f, '.Nf'): inf, -inf and nan as Python spells them.
func pyFixed(f float64, decimals int) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	return strconv.FormatFloat(f, 'f', decimals, 64)
}

// tupleKey is hashKeys' key of a tuple: the number it gave the keys of
// its items (a key holding them whole grows with the tuple's depth at
// every level).
type tupleKey int

// undefinedKey is hashKeys' key of Jinja's undefined, none's is nil.
type undefinedKey struct{}

// hashKeys makes map keys that two values share when Python's dict would
// take them for one key (PaV): true, 1 and 1.0 are one key; a tuple is its
// items; a list or a dict is Python's "unhashable type". Each key's walk
// is bounded (exec.ValueItems).
type hashKeys struct{ tuples map[string]tupleKey }

// key is val's key; lower lowercases a string (not one inside a tuple), as
// unique's case_sensitive=false does.
func (h *hashKeys) key(val *exec.Value, lower bool) (any, error) {
	return h.walk(val, lower, exec.NewWalkBudget())
}

func (h *hashKeys) walk(val *exec.Value, lower bool, budget *exec.WalkBudget) (any, error) {
	if err := budget.Spend(); err != nil {
		return nil, err
	}
	switch {
	case val.IsUndefined(): // Jinja's undefined equals only undefined
		return undefinedKey{}, nil
	case exec.IsInt(val):
		return exec.AsInt(val), nil
	case val.IsFloat():
		if f := val.Float(); f == math.Trunc(f) && math.Abs(f) < 1<<63 {
			return int64(f), nil
		}
		return val.Float(), nil
	case val.IsString():
		if lower {
			return strings.ToLower(val.String()), nil
		}
		return val.String(), nil
	}
	if t, ok := val.Interface().(exec.PyTuple); ok {
		var items strings.Builder
		for _, item := range t.TupleItems() {
			k, err := h.walk(exec.ToValue(item), false, budget)
			if err != nil {
				return nil, err
			}
			text := fmt.Sprint(k)
			fmt.Fprintf(&items, "%T:%d:%s", k, len(text), text)
		}
		if h.tuples == nil {
			h.tuples = map[string]tupleKey{}
		}
		key, known := h.tuples[items.String()]
		if !known {
			key = tupleKey(len(h.tuples))
			h.tuples[items.String()] = key
		}
		return key, nil
	}
	tracked := val.Interface()
	if t := reflect.TypeOf(tracked); val.IsList() || val.IsDict() || t != nil && !t.Comparable() {
		return nil, fmt.Errorf("unhashable type: '%s'", exec.PyType(val))
	}
	return tracked, nil
}
