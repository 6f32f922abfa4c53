package exec

import (
	"fmt"
	"reflect"
	"runtime"

	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/pkg/errors"
)

func (e *Evaluator) evalCall(node *nodes.Call) *Value {
	fn := e.Eval(node.Func)
	if _, bound := fn.Interface().(*BoundMethod); bound {
		if getAttributeNode, ok := node.Func.(*nodes.GetAttribute); ok && node.Parent != nil {
			return e.evalMethod(node.Parent, getAttributeNode.Attribute, node.Args, node.Kwargs)
		}
	}
	if !fn.IsCallable() {
		getAttributeNode, ok := node.Func.(*nodes.GetAttribute)
		if node.Parent == nil || !ok {
			return AsValue(errors.Errorf(`%s is not callable`, node.Func))
		}
		return e.evalMethod(node.Parent, getAttributeNode.Attribute, node.Args, node.Kwargs)
	}
	if fn.IsError() {
		return AsValue(errors.Wrapf(fn, `unable to evaluate function '%s'`, node.Func))
	}
	if c, ok := fn.Interface().(Callable); ok {
		params, err := e.evalVarArgs(node)
		if err != nil {
			return AsValue(errors.Wrapf(err, `unable to evaluate parameters`))
		}
		return c.Call(params[0].Interface().(*VarArgs))
	}

	var current reflect.Value
	var isSafe bool

	var params []reflect.Value
	var err error
	t := fn.Val.Type()

	if t.NumIn() == 1 && t.In(0) == reflect.TypeFor[*VarArgs]() {
		params, err = e.evalVarArgs(node)
	} else if t.NumIn() == 2 && t.In(0) == reflect.TypeFor[*Evaluator]() && t.In(1) == reflect.TypeFor[*VarArgs]() {
		params, err = e.evalVarArgs(node)
		params = append([]reflect.Value{reflect.ValueOf(e)}, params...)
	} else {
		params, err = e.evalParams(node, fn)
	}
	if err != nil {
		return AsValue(errors.Wrapf(err, `unable to evaluate parameters`))
	}
	functionName := runtime.FuncForPC(fn.Val.Pointer()).Name()
	if nameNode, ok := node.Func.(*nodes.Name); ok {
		functionName = nameNode.Name.Val
	}

	// Call it and get first return parameter back
	values := fn.Val.Call(params)
	rv := values[0]
	if t.NumOut() == 2 {
		e := values[1].Interface()
		if e != nil {
			err, ok := e.(error)
			if !ok {
				return AsValue(fmt.Errorf("second return value of function '%s' is not an error", functionName))
			}
			if err, ok := err.(ErrInvalidCall); ok && err != nil {
				return AsValue(fmt.Errorf("invalid call to function '%s': %s", functionName, err.Error()))
			} else if err != nil {
				return AsValue(err)
			}
		}
	}

	if rv.Type() != typeOfValuePtr {
		current = reflect.ValueOf(rv.Interface())
	} else {
		// Return the function call value
		returned := rv.Interface().(*Value)
		if returned.IsUndefined() { // PaV: undefined, not none
			return returned
		}
		current = returned.Val
		isSafe = returned.Safe
	}

	if !current.IsValid() {
		// Value is not valid (e. g. NIL value)
		return AsValue(nil)
	}
	value := &Value{Val: current, Safe: isSafe}
	if value.IsError() {
		if err, ok := value.Interface().(ErrInvalidCall); ok {
			return AsValue(fmt.Errorf("invalid call to function '%s': %s", functionName, err.Error()))
		}
	}
	return value
}

func (e *Evaluator) evalMethod(parentNode nodes.Node, method string, args []nodes.Expression, kwargs map[string]nodes.Expression) *Value {
	parent := e.Eval(parentNode)
	if parent.IsError() {
		return AsValue(errors.Wrapf(parent, "unable to evaluate '%s'", parentNode))
	}
	parameters := NewVarArgs()
	for _, param := range args {
		value := e.Eval(param)
		if value.IsError() {
			return AsValue(errors.Wrapf(value, "unable to evaluate parameter %s", param))
		}
		parameters.Args = append(parameters.Args, value)
	}

	for key, param := range kwargs {
		value := e.Eval(param)
		if value.IsError() {
			return AsValue(errors.Wrapf(value, "unable to evaluate parameter %s=%s", key, param))
		}
		parameters.KwArgs[key] = value
	}
	// PaV: no write-back of the receiver (upstream's, for methods that
	// change it): the sandbox has no such method, and the write-back made a
	// Markup variable plain.
	return e.callMethod(parent, method, parameters)
}

// mutatingMethods are the methods of lists and dicts that change them,
// which Jinja's immutable sandbox hides (modifies_known_mutable): as
// values they are undefined there.
var mutatingMethods = map[string]bool{"append": true, "clear": true, "extend": true, "insert": true, "pop": true,
	"popitem": true, "remove": true, "reverse": true, "setdefault": true, "sort": true, "update": true}

// HasMethod says whether v's type has the Python method name, as a value
// (a mutating method of a list or dict has none).
func (e *Evaluator) HasMethod(v *Value, name string) bool {
	m := e.Environment.Methods
	if (v.IsList() || v.IsDict()) && mutatingMethods[name] {
		return false
	}
	switch {
	case v.IsString():
		return m.Str.Exists(name)
	case v.IsBool():
		return m.Bool.Exists(name)
	case v.IsFloat():
		return m.Float.Exists(name)
	case v.IsInteger():
		return m.Int.Exists(name)
	case v.IsDict():
		return m.Dict.Exists(name)
	case v.IsList():
		return m.List.Exists(name)
	}
	return false
}

// markupMethods are markupsafe's Markup methods that return Markup (or
// lists and tuples of it) where str's return str; Markup's other methods
// return what str's do.
var markupMethods = map[string]bool{"capitalize": true, "casefold": true, "center": true, "expandtabs": true,
	"format": true, "format_map": true, "join": true, "ljust": true, "lower": true, "lstrip": true, "partition": true,
	"removeprefix": true, "removesuffix": true, "replace": true, "rjust": true, "rpartition": true,
	"rsplit": true, "rstrip": true, "split": true, "splitlines": true, "strip": true, "swapcase": true,
	"title": true, "translate": true, "upper": true, "zfill": true}

// escapeMarkupArguments escapes what markupsafe's Markup method escapes
// before str's runs: replace's new, the fill character of ljust, rjust and
// center, and join's items (any value, as its str); format and format_map
// escape each field themselves (PyStrFormat).
func escapeMarkupArguments(method string, params *VarArgs) *VarArgs {
	out := &VarArgs{Args: append([]*Value(nil), params.Args...), KwArgs: map[string]*Value{}, KwOrder: params.KwOrder, Limits: params.Limits}
	for k, v := range params.KwArgs {
		out.KwArgs[k] = v
	}
	switch method {
	case "replace", "ljust", "rjust", "center":
		if len(out.Args) > 1 && out.Args[1].IsString() {
			out.Args[1] = Escape(out.Args[1])
		}
	case "join": // of any iterable: a mapping's keys, a string's characters
		if len(out.Args) == 1 && (out.Args[0].IsList() || out.Args[0].IsDict() || out.Args[0].IsString()) {
			items := []any{}
			out.Args[0].Iterate(func(_, _ int, key, _ *Value) bool {
				items = append(items, Escape(key))
				return true
			}, func() {})
			out.Args[0] = AsValue(items)
		}
	}
	return out
}

// asMarkup is a Markup method's result: its strings Markup, whatever their
// Go string type (pystring.PyString's methods return their own).
func asMarkup(result any) any {
	switch r := result.(type) {
	case []any:
		out := make([]any, len(r))
		for i, x := range r {
			out[i] = asMarkup(x)
		}
		return out
	case Tuple:
		out := make(Tuple, len(r))
		for i, x := range r {
			out[i] = asMarkup(x)
		}
		return out
	}
	switch rv := reflect.ValueOf(result); rv.Kind() {
	case reflect.String:
		return AsSafeValue(rv.String())
	case reflect.Slice:
		if rv.Type().Elem().Kind() == reflect.String {
			out := make([]any, rv.Len())
			for i := range out {
				out[i] = AsSafeValue(rv.Index(i).String())
			}
			return out
		}
	}
	return result
}

// MadeUpAddress is the object address in a method's repr (PaV): Python's
// differs from run to run, so a template cannot count on one.
const MadeUpAddress = "0x7f0000000000"

// BoundMethod is a Python method of a value named without a call (PaV):
// `x.upper`, `x|attr('upper')`. As in Jinja, it is defined and callable,
// a call calls the method, and its repr is Python's (with an address of
// its own: a template cannot count on one).
type BoundMethod struct {
	e    *Evaluator
	recv *Value
	name string
}

// NewBoundMethod is recv's method name, for e's calls.
func NewBoundMethod(e *Evaluator, recv *Value, name string) *BoundMethod {
	return &BoundMethod{e: e, recv: recv, name: name}
}

func (m *BoundMethod) Call(params *VarArgs) *Value { return m.e.callMethod(m.recv, m.name, params) }

// String is Python's repr of the method, as Jinja's sandbox hands it out:
// str.format and format_map are functions it wraps, markupsafe's own
// Markup methods are bound methods, the others built-in ones.
func (m *BoundMethod) String() string {
	typ := PyType(m.recv)
	markup := m.recv.Safe && m.recv.IsString()
	if markup {
		typ = "Markup"
	}
	switch {
	case m.recv.IsString() && (m.name == "format" || m.name == "format_map"):
		return fmt.Sprintf("<function %s.%s at %s>", typ, m.name, MadeUpAddress)
	case markup && markupMethods[m.name]:
		return fmt.Sprintf("<bound method Markup.%s of %s>", m.name, PyRepr(m.recv))
	}
	return fmt.Sprintf("<built-in method %s of %s object at %s>", m.name, typ, MadeUpAddress)
}

// callMethod calls method of parent with parameters.
func (e *Evaluator) callMethod(parent *Value, method string, parameters *VarArgs) *Value {
	parameters.Limits = e.Limits()
	var result any
	err := fmt.Errorf("unknown method '%s' for '%s'", method, parent.String())
	switch {
	case parent.IsString():
		if m, ok := e.Environment.Methods.Str.Get(method); ok {
			markup := parent.Safe && markupMethods[method]
			if markup {
				parameters = escapeMarkupArguments(method, parameters)
			}
			result, err = m(parent.String(), parent, parameters)
			if markup && err == nil {
				result = asMarkup(result)
			}
		}
	case parent.IsBool():
		if method, ok := e.Environment.Methods.Bool.Get(method); ok {
			result, err = method(parent.Bool(), parent, parameters)
		}
	case parent.IsFloat():
		if method, ok := e.Environment.Methods.Float.Get(method); ok {
			result, err = method(parent.Float(), parent, parameters)
		}
	case parent.IsInteger():
		if method, ok := e.Environment.Methods.Int.Get(method); ok {
			result, err = method(parent.Integer(), parent, parameters)
		}
	case parent.IsDict():
		if method, ok := e.Environment.Methods.Dict.Get(method); ok {
			dict := parent.ToGoSimpleType(false)
			goMap, ok := dict.(map[string]any)
			if _, literal := dictLiteral(parent); !ok && literal {
				// PaV: keys that are not strings (1, None): the methods
				// keys, values, items, get read the pairs (PyPairs)
				goMap, ok = map[string]any{}, true
			}
			if err, isErr := dict.(error); !ok && err != nil && isErr {
				return AsValue(fmt.Errorf("failed to cast '%s' to a Go type: %s", parent.String(), err))
			}
			if !ok {
				return AsValue(fmt.Errorf("failed to cast '%s' to map[string]interface{}: %s", parent.String(), err))
			}
			result, err = method(goMap, parent, parameters)
		}
	case parent.IsList():
		if method, ok := e.Environment.Methods.List.Get(method); ok {
			list := parent.ToGoSimpleType(false)
			if err, ok := list.(error); err != nil && ok {
				return AsValue(fmt.Errorf("failed to cast '%s' to a Go type: %s", parent.String(), err))
			}
			goList, ok := list.([]any)
			if !ok {
				return AsValue(fmt.Errorf("failed to cast '%s' to []interface{}: %s", parent.String(), err))
			}
			result, err = method(goList, parent, parameters)
		}
	default:
		err = AsValue(errors.Errorf(`'%s' is not callable on %s`, method, parent))
	}
	if err != nil {
		if callErr, ok := err.(ErrInvalidCall); ok {
			// PaV: the value's type, not the value, which may be long
			// PaV: raised, as Python's exception, so no filter prints it
			return e.Raise(fmt.Errorf("invalid call to method '%s' of %s: %s", method, PyType(parent), callErr.Error()))
		}
		return e.Raise(err)
	}
	if v, ok := result.(*Value); ok { // a Markup method's
		return v
	}
	return AsValue(result)
}
