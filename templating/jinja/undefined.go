package jinja

import (
	"fmt"

	controlStructures "github.com/nikolalohinski/gonja/v2/builtins/control_structures"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/nodes"
)

// gonja evaluates both undefined and none to nil. Where Jinja tells them
// apart, prepare passes the index of the original expression to an internal
// filter or test, which re-inspects the expression (only when its value is
// nil) to learn whether it is defined.

// undefinedAwareFilters maps Jinja filters whose result depends on whether
// their input is undefined to PaV's versions, which take the input
// expression's index as first argument.
var undefinedAwareFilters = map[string]string{
	"default": defaultFilter,
	"d":       defaultFilter,
	"tojson":  tojsonFilter,
}

var undefinedAwareTests = map[string]string{
	"defined":   definedTest,
	"undefined": undefinedTest,
	"none":      noneTest,
}

// exprOf returns the expression registered by prepare under the index held
// in v, or nil.
func exprOf(e *exec.Evaluator, v *exec.Value) nodes.Expression {
	if v == nil || !v.IsInteger() {
		return nil
	}
	s := stateOf(e)
	i := v.Integer()
	if i < 0 || i >= len(s.exprs) {
		return nil
	}
	return s.exprs[i]
}

// undefinedReason returns why n is undefined in Jinja's words, or "" if n is
// defined (its value may still be none). Only call it when n evaluated to nil.
func undefinedReason(e *exec.Evaluator, n nodes.Node) string {
	switch x := n.(type) {
	case nil:
		return ""
	case *nodes.Name:
		if x.Name.Val == "none" { // a literal (see rewriteArith)
			return ""
		}
		if _, ok := e.Environment.Context.Get(x.Name.Val); ok {
			return ""
		}
		return fmt.Sprintf("'%s' is undefined", x.Name.Val)
	case *nodes.Conditional:
		switch {
		case e.Eval(x.Condition).IsTrue():
			return undefinedReason(e, x.Expression)
		case x.Alternative == nil:
			return "the inline if has no else branch"
		}
		return undefinedReason(e, x.Alternative)
	case *nodes.FilteredExpression:
		// Our own wrappers are transparent.
		if len(x.Filters) == 1 && (x.Filters[0].Name == checkFilter || x.Filters[0].Name == finalizeFilter) {
			return undefinedReason(e, x.Expression)
		}
		return ""
	case *nodes.GetAttribute:
		parent := e.Eval(x.Node)
		if parent.IsError() {
			return ""
		}
		if x.Attribute != "" {
			if v, found := parent.GetAttribute(x.Attribute); found {
				// gonja's loop.previtem/nextitem are none at the ends of
				// the loop; Jinja's are undefined.
				if _, isLoop := parent.Interface().(*controlStructures.LoopInfos); isLoop && v.IsNil() &&
					(x.Attribute == "previtem" || x.Attribute == "nextitem") {
					return fmt.Sprintf("there is no %s", x.Attribute)
				}
				return ""
			}
			if _, found := parent.GetItem(x.Attribute); found {
				return ""
			}
			return fmt.Sprintf("%s has no attribute '%s'", typeName(parent), x.Attribute)
		}
		if _, found := parent.GetItem(x.Index); found {
			return ""
		}
		return fmt.Sprintf("%s has no element %d", typeName(parent), x.Index)
	case *nodes.GetItem:
		parent := e.Eval(x.Node)
		arg := e.Eval(x.Arg)
		if parent.IsError() || arg.IsError() {
			return ""
		}
		var key interface{}
		switch {
		case arg.IsString():
			key = arg.String()
		case arg.IsInteger():
			key = arg.Integer()
		default:
			return ""
		}
		if _, found := parent.GetItem(key); found {
			return ""
		}
		if arg.IsString() {
			if _, found := parent.GetAttribute(arg.String()); found {
				return ""
			}
			return fmt.Sprintf("%s has no attribute '%s'", typeName(parent), arg.String())
		}
		return fmt.Sprintf("%s has no element %d", typeName(parent), arg.Integer())
	}
	return ""
}

// typeName names a value's type as Jinja's messages do.
func typeName(v *exec.Value) string {
	if _, ok := v.Interface().(noneObject); ok {
		return "'None'"
	}
	switch {
	case v.IsNil():
		return "'None'"
	case v.IsDict():
		return "'dict object'"
	case v.IsList():
		return "'list object'"
	case v.IsString():
		return "'str object'"
	case v.IsBool():
		return "'bool object'"
	case v.IsInteger():
		return "'int object'"
	case v.IsFloat():
		return "'float object'"
	}
	return fmt.Sprintf("'%s object'", otherType(v))
}

// filterCheckDefined guards attribute and item access: the object being
// accessed must not be undefined.
func filterCheckDefined(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() || !in.IsNil() || len(params.Args) == 0 {
		return in
	}
	if reason := undefinedReason(e, exprOf(e, params.Args[0])); reason != "" {
		return fatal(e, params.Args[0], reason)
	}
	if len(params.Args) > 1 && params.Args[1].IsTrue() {
		return exec.AsValue(noneObject{})
	}
	return in
}

// noneObject stands for none where an attribute or item of it is taken: it
// has none, so the access is undefined, as in Jinja.
type noneObject []interface{}

// fatal fails the render with an error no Jinja construct can swallow.
func fatal(e *exec.Evaluator, _ *exec.Value, msg string) *exec.Value {
	err := &Error{Message: msg}
	stateOf(e).fail(err)
	return exec.AsValue(err)
}

// filterDefault is Jinja's default(value, default_value=”, boolean=false):
// it replaces an undefined (or, with boolean, falsy) value but, unlike gonja's,
// keeps none and never hides an error.
func filterDefault(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	var ref *exec.Value
	args := params.Args
	if len(args) > 0 {
		ref, args = args[0], args[1:]
	}
	def := exec.AsValue("")
	if len(args) > 0 {
		def = args[0]
	} else if v, ok := params.KwArgs["default_value"]; ok {
		def = v
	}
	boolean := false
	if len(args) > 1 {
		boolean = args[1].IsTrue()
	} else if v, ok := params.KwArgs["boolean"]; ok {
		boolean = v.IsTrue()
	}
	if in.IsNil() && undefinedReason(e, exprOf(e, ref)) != "" {
		return def
	}
	if boolean && !in.IsTrue() {
		return def
	}
	return in
}

func filterToJSONAware(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if in.IsNil() && len(params.Args) > 0 {
		if reason := undefinedReason(e, exprOf(e, params.Args[0])); reason != "" {
			return fatal(e, nil, "tojson: value is undefined ("+reason+")")
		}
	}
	args := params.Args
	if len(args) > 0 {
		args = args[1:]
	}
	return filterToJSON(e, in, &exec.VarArgs{Args: args, KwArgs: params.KwArgs})
}

func testDefined(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) (bool, error) {
	if in.IsError() {
		return false, in.Interface().(error)
	}
	if !in.IsNil() {
		return true, nil
	}
	if len(params.Args) == 0 {
		return false, nil
	}
	return undefinedReason(e, exprOf(e, params.Args[0])) == "", nil
}

func testUndefined(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) (bool, error) {
	d, err := testDefined(e, in, params)
	return !d, err
}

func testNone(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) (bool, error) {
	if in.IsError() {
		return false, in.Interface().(error)
	}
	if !in.IsNil() {
		return false, nil
	}
	return testDefined(e, in, params)
}

// filterIter guards a for loop's iterable: undefined iterates as empty, none
// is an error, as in Jinja.
func filterIter(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() || !in.IsNil() {
		return in
	}
	if len(params.Args) > 0 && undefinedReason(e, exprOf(e, params.Args[0])) != "" {
		return exec.AsValue([]interface{}{})
	}
	return fatal(e, nil, "'NoneType' object is not iterable")
}

// filterEqual is `left == right` (or `!=` when its first argument is true):
// gonja's equality, except that undefined equals only undefined, as in Jinja
// (`missing == none` is false). Its last two arguments refer to the operands'
// expressions.
func filterEqual(e *exec.Evaluator, left *exec.Value, params *exec.VarArgs) *exec.Value {
	if left.IsError() {
		return left
	}
	if len(params.Args) != 4 {
		return exec.AsValue(fmt.Errorf("internal: comparison needs 4 arguments"))
	}
	negate, right := params.Args[0].IsTrue(), params.Args[1]
	if right.IsError() {
		return right
	}
	eq := left.EqualValueTo(right)
	if left.IsNil() && right.IsNil() {
		lu := undefinedReason(e, exprOf(e, params.Args[2])) != ""
		ru := undefinedReason(e, exprOf(e, params.Args[3])) != ""
		eq = lu == ru
	}
	return exec.AsValue(eq != negate)
}

// filterConcat is `left ~ right`: Python's str() of both operands, except
// that undefined is "" (gonja prints none as "" too, Jinja as "None"). Its
// last two arguments refer to the operands' expressions.
func filterConcat(e *exec.Evaluator, left *exec.Value, params *exec.VarArgs) *exec.Value {
	if left.IsError() {
		return left
	}
	if len(params.Args) != 3 {
		return exec.AsValue(fmt.Errorf("internal: concatenation needs 3 arguments"))
	}
	right := params.Args[0]
	if right.IsError() {
		return right
	}
	str := func(v *exec.Value, ref *exec.Value) string {
		if v.IsNil() && undefinedReason(e, exprOf(e, ref)) != "" {
			return ""
		}
		return pyStr(v)
	}
	l, r := str(left, params.Args[1]), str(right, params.Args[2])
	if len(l)+len(r) > maxOutputBytes {
		return fatal(e, nil, "string too long")
	}
	return exec.AsValue(l + r)
}
