package exec

import (
	"fmt"
	u "github.com/nikolalohinski/gonja/v2/utils"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"

	"github.com/pkg/errors"

	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/loaders"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

var typeOfValuePtr = reflect.TypeFor[*Value]()

type ErrInvalidCall error

type Evaluator struct {
	Config      *config.Config
	Environment *Environment
	Loader      loaders.Loader
	// folding: the expression is evaluated as Jinja's compiler folds a
	// constant one (PaV; Eval).
	folding bool
}

// Eval evaluates an expression (PaV: with Jinja's constant folding).
// Jinja's optimizer folds each constant expression, from the leaves up,
// into its value when that value has a safe repr; one holding an undefined
// (a constant slice of what is not a sequence folds to undefined) or
// failing runs at render time instead, its constant operands folded. The
// two differ in one place: a slice at render time is Python's own
// subscript, which raises a TypeError where folding took undefined.
func (e *Evaluator) Eval(node nodes.Expression) *Value {
	if e.folding || !jinjaConstant(node) {
		return e.eval(node)
	}
	e.folding = true
	v := e.eval(node)
	e.folding = false
	if v.IsError() || holdsUndefined(v, maxNesting) {
		v = e.eval(node) // at render time: its operands are folded by Eval
	}
	return v
}

// maxNesting bounds holdsUndefined's walk (a constant's literals nest a
// few levels).
const maxNesting = 100

// holdsUndefined: v is undefined or a container holding one (Python's
// has_safe_repr is false for it).
func holdsUndefined(v *Value, depth int) bool {
	if v.IsUndefined() {
		return true
	}
	if depth == 0 || !(v.IsList() || v.IsDict()) {
		return false
	}
	found := false
	v.Iterate(func(_, _ int, key, value *Value) bool {
		found = holdsUndefined(key, depth-1) || v.IsDict() && holdsUndefined(value, depth-1)
		return !found
	}, func() {})
	return found
}

func (e *Evaluator) eval(node nodes.Expression) *Value {
	if err := e.Environment.interrupted(); err != nil {
		return AsValue(err)
	}
	switch n := node.(type) {
	case *nodes.None:
		return AsValue(nil)
	case *nodes.Undefined:
		return Undefined(n.Reason)
	case *nodes.String:
		return AsValue(n.Val)
	case *nodes.Integer:
		return AsValue(n.Val)
	case *nodes.Float:
		return AsValue(n.Val)
	case *nodes.Bool:
		return AsValue(n.Val)
	case *nodes.List:
		return e.evalList(n)
	case *nodes.Tuple:
		return e.evalTuple(n)
	case *nodes.Dict:
		return e.evalDict(n)
	case *nodes.Pair:
		return e.evalPair(n)
	case *nodes.Name:
		return e.evalName(n)
	case *nodes.Call:
		return e.evalCall(n)
	case *nodes.GetItem:
		return e.evalGetItem(n)
	case *nodes.GetAttribute:
		return e.evalGetAttribute(n)
	case *nodes.GetSlice:
		return e.evalGetSlice(n)
	case *nodes.Error:
		return AsValue(n.Error)
	case *nodes.Negation:
		result := e.Eval(n.Term)
		if result.IsError() {
			return result
		}
		return result.Negate()
	case *nodes.BinaryExpression:
		return e.evalBinaryExpression(n)
	case *nodes.UnaryExpression:
		return e.evalUnaryExpression(n)
	case *nodes.FilteredExpression:
		return e.EvaluateFiltered(n)
	case *nodes.TestExpression:
		return e.EvalTest(n)
	case *nodes.Conditional:
		condition := e.Eval(n.Condition)
		switch {
		case condition.IsError():
			return condition
		case condition.IsTrue():
			return e.Eval(n.Expression)
		case n.Alternative == nil:
			return Undefined("the inline if has no else branch")
		}
		return e.Eval(n.Alternative)
	default:
		return AsValue(errors.Errorf(`Unknown expression type "%T"`, n))
	}
}

func (e *Evaluator) evalBinaryExpression(node *nodes.BinaryExpression) *Value {
	if node.Chained {
		result, _ := e.evalChain(node)
		return result
	}
	var (
		left  *Value
		right *Value
	)
	// An operand's error is returned as is (PaV): wrapping it with the
	// operand's text at every level of a long chain (1 + 1 + ...) made
	// messages, and the time to build them, cubic in its length.
	left = e.Eval(node.Left)
	if left.IsError() {
		return left
	}

	switch node.Operator.Token.Val {
	// These operators allow lazy right expression evluation
	case "and", "or":
	default:
		right = e.Eval(node.Right)
		if right.IsError() {
			return right
		}
	}

	switch node.Operator.Token.Type {
	case tokens.And:
		// Python/Jinja2 semantics: `x and y` returns x if x is falsy,
		// otherwise y. The result is the operand value, not a coerced bool,
		// so `{{ '' and 'fallback' }}` renders ''  and `{{ 'a' and 'b' }}`
		// renders 'b'. Short-circuit on the left.
		if !left.IsTrue() {
			return left
		}
		right = e.Eval(node.Right)
		if right.IsError() {
			return right
		}
		return right
	case tokens.Or:
		// Python/Jinja2 semantics: `x or y` returns x if x is truthy,
		// otherwise y. So `{{ '' or 'fallback' }}` renders 'fallback' and
		// `{{ 'a' or 'b' }}` renders 'a'. Short-circuit on the left.
		if left.IsTrue() {
			return left
		}
		right = e.Eval(node.Right)
		if right.IsError() {
			return right
		}
		return right
	}
	return e.operate(node, left, right)
}

// evalChain evaluates a comparison of a chain (a < b < c) as Python does,
// a < b and b < c with b evaluated once: it returns the result and the
// right operand.
func (e *Evaluator) evalChain(node *nodes.BinaryExpression) (*Value, *Value) {
	var left *Value
	if prev, ok := node.Left.(*nodes.BinaryExpression); ok && node.Chained {
		result, mid := e.evalChain(prev)
		if result.IsError() || !result.IsTrue() {
			return result, nil
		}
		left = mid
	} else {
		left = e.Eval(node.Left)
		if left.IsError() {
			return left, nil
		}
	}
	right := e.Eval(node.Right)
	if right.IsError() {
		return right, nil
	}
	return e.operate(node, left, right), right
}

// operate applies node's operator, other than and/or, to its operands.
func (e *Evaluator) operate(node *nodes.BinaryExpression, left, right *Value) *Value {
	switch node.Operator.Token.Type {
	case tokens.Equals:
		return AsValue(left.EqualValueTo(right))
	case tokens.Ne:
		return AsValue(!left.EqualValueTo(right))
	case tokens.In: // PaV: the `in` test's rules (Python's TypeErrors)
		in := e.ExecuteTestByName("in", left, &VarArgs{Args: []*Value{right}, KwArgs: map[string]*Value{}})
		if node.Operator.Token.Val == nodes.NotIn && !in.IsError() {
			return AsValue(!in.IsTrue())
		}
		return in
	case tokens.Tilde:
		return e.concat(node, left, right)
	}
	op, ok := arithOperators[node.Operator.Token.Type]
	if !ok {
		return AsValue(errors.Errorf(`Unknown operator "%s"`, node.Operator.Token))
	}
	// PaV: Markup + str escapes the str, Markup * n and Markup % args stay Markup.
	markup := false
	switch {
	case op == "+" && left.IsString() && right.IsString() && (left.Safe || right.Safe):
		left, right, markup = Escape(left), Escape(right), true
	case op == "*" && (left.IsString() && left.Safe || right.IsString() && right.Safe):
		markup = true
	case op == "%" && left.IsString() && left.Safe: // Markup % args escapes the args
		markup = true
	}
	// PaV: Python's semantics; `%` with a tuple, written or made (('a',) * 2,
	// a groupby group), formats its items.
	_, literal := node.Right.(*nodes.Tuple)
	_, made := right.Interface().(PyTuple)
	tuple := literal || made
	v, err := PyArith(op, left, right, tuple, e.Environment.limits())
	if err != nil {
		return e.Raise(err)
	}
	if markup {
		return AsSafeValue(v)
	}
	return AsValue(v)
}

// Escape is markupsafe's escape: v as Markup, escaped unless it already
// is Markup (PaV).
func Escape(v *Value) *Value {
	if v.Safe {
		return v
	}
	return AsSafeValue(u.Escape(PyStr(v)))
}

// arithOperators are the operators PyArith evaluates, by token type.
var arithOperators = map[tokens.Type]string{
	tokens.Power: "**", tokens.FloorDivision: "//", tokens.Modulo: "%", tokens.Division: "/",
	tokens.Addition: "+", tokens.Subtraction: "-", tokens.Multiply: "*", tokens.LowerThan: "<",
	tokens.LowerThanOrEqual: "<=", tokens.GreaterThan: ">", tokens.GreaterThanOrEqual: ">=",
}

// concat is `left ~ right`: Python's str() of both operands, undefined
// printing as "" (PaV; gonja printed none as "" too, Jinja prints None).
func (e *Evaluator) concat(node *nodes.BinaryExpression, left, right *Value) *Value {
	str := func(v *Value) string {
		if v.IsUndefined() {
			return ""
		}
		return PyStr(v)
	}
	// In an autoescape block a Markup operand makes `~` Jinja's markup_join:
	// the other is escaped and the result is Markup (PaV).
	// Jinja folds a concatenation of constants into a str.
	markup := e.Config != nil && e.Config.AutoEscape && (left.Safe || right.Safe) &&
		!(jinjaConstant(node.Left) && jinjaConstant(node.Right))
	if markup {
		str = func(v *Value) string {
			if v.IsUndefined() {
				return ""
			}
			return Escape(v).String()
		}
	}
	l, r := str(left), str(right)
	if exceeds(int64(len(l)+len(r)), e.Environment.limits().StringBytes) {
		return e.Raise(errors.New("string too long"))
	}
	if markup {
		return AsSafeValue(l + r)
	}
	return AsValue(l + r)
}

func (e *Evaluator) evalUnaryExpression(expr *nodes.UnaryExpression) *Value {
	result := e.Eval(expr.Term)
	if result.IsError() {
		return AsValue(errors.Wrapf(result, `Unable to evaluate term %s`, expr.Term))
	}
	if expr.Negative && result.IsBool() { // -True is -1 in Python (PaV)
		if result.Bool() {
			return AsValue(-1)
		}
		return AsValue(0)
	}
	if expr.Negative {
		if result.IsNumber() {
			switch {
			case result.IsFloat():
				return AsValue(-1 * result.Float())
			case result.IsInteger():
				if AsInt(result) == math.MinInt64 {
					return e.Raise(ErrOverflow)
				}
				return AsValue(-1 * result.Integer())
			default:
				return AsValue(errors.New("Operation between a number and a non-(float/integer) is not possible"))
			}
		} else {
			return AsValue(errors.Errorf("Negative sign on a non-number expression %s", expr.Position()))
		}
	}
	// Python's unary plus takes numbers only (PaV): +'x' and +undefined fail.
	switch {
	case result.IsBool():
		if result.Bool() {
			return AsValue(1)
		}
		return AsValue(0)
	case result.IsUndefined():
		return AsValue(errors.Errorf("%s is undefined", expr.Term))
	case !result.IsNumber():
		return AsValue(fmt.Errorf("unary + takes a number, not a %s", TypeName(result)))
	}
	return result
}

func (e *Evaluator) evalList(node *nodes.List) *Value {
	values := ValuesList{}
	for _, val := range node.Val {
		value := e.Eval(val)
		if value.IsError() { // PaV: an item's error is the list's
			return value
		}
		values = append(values, value)
	}
	return AsValue(values)
}

func (e *Evaluator) evalTuple(node *nodes.Tuple) *Value {
	values := Tuple{} // PaV: a tuple, as Jinja's (upstream: a list)
	for _, val := range node.Val {
		value := e.Eval(val)
		if value.IsError() { // PaV: an item's error is the tuple's
			return value
		}
		values = append(values, value)
	}
	return AsValue(values)
}

func (e *Evaluator) evalDict(node *nodes.Dict) *Value {
	pairs := []*Pair{}
	for _, pair := range node.Pairs {
		p := e.evalPair(pair)
		if p.IsError() {
			return AsValue(errors.Wrapf(p, `Unable to evaluate pair "%s"`, pair))
		}
		pair := p.Interface().(*Pair)
		// PaV: a repeated key keeps its place and takes the last value, as in Python
		if i := slices.IndexFunc(pairs, func(q *Pair) bool { return q.Key.EqualValueTo(pair.Key) }); i >= 0 {
			pairs[i] = &Pair{Key: pairs[i].Key, Value: pair.Value}
			continue
		}
		pairs = append(pairs, pair)
	}
	return AsValue(&Dict{pairs})
}

func (e *Evaluator) evalPair(node *nodes.Pair) *Value {
	key := e.Eval(node.Key)
	if key.IsError() {
		return AsValue(errors.Wrapf(key, `Unable to evaluate key "%s"`, node.Key))
	}
	value := e.Eval(node.Value)
	if value.IsError() {
		return AsValue(errors.Wrapf(value, `Unable to evaluate value "%s"`, node.Value))
	}
	return AsValue(&Pair{key, value})
}

func (e *Evaluator) evalName(node *nodes.Name) *Value {
	val, ok := e.Environment.Context.Get(node.Name.Val)
	if !ok && e.Config.StrictUndefined {
		return AsValue(errors.Errorf(`Unable to evaluate name "%s"`, node.Name.Val))
	}
	if !ok {
		return Undefined(fmt.Sprintf("'%s' is undefined", node.Name.Val))
	}
	return ToValue(val)
}

func (e *Evaluator) evalGetItem(node *nodes.GetItem) *Value {
	value := e.Eval(node.Node)
	if value.IsError() {
		return AsValue(errors.Wrapf(value, `unable to evaluate target %s`, node.Node))
	}
	if value.IsUndefined() { // PaV: an error in Jinja (of none: undefined)
		return e.Raise(errors.New(value.UndefinedReason()))
	}
	if node.Arg == nil {
		if e.Config.StrictUndefined {
			return AsValue(errors.Wrapf(value, `argument is undefined to access: %s`, node.Node))
		} else {
			return AsValue(nil)
		}
	}

	argument := e.Eval(node.Arg)
	switch {
	case argument.IsError():
		return argument
	case argument.IsNil() && e.Config.StrictUndefined:
		return AsValue(errors.Wrapf(value, `argument is undefined to access: %s`, node.Node))
	}
	item := Subscript(value, argument)
	if item.IsError() {
		return AsValue(errors.Wrapf(item, `unable to evaluate %s`, node))
	}
	if item.IsUndefined() && e.Config.StrictUndefined {
		return AsValue(errors.Errorf(`unable to evaluate %s: item '%s' not found`, node, node.Arg))
	}
	return item
}

// Subscript is Jinja's environment.getitem, value[argument] (PaV): an item,
// else an attribute of that name, else undefined saying what value lacks.
// value must not be undefined, whose items Jinja refuses.
func Subscript(value, argument *Value) *Value {
	var key any
	switch {
	case argument.IsString():
		key = argument.String()
	case argument.IsInteger():
		key = argument.Integer()
	case argument.IsBool(): // PaV: Python's bool is an int, True indexes 1
		key = int(AsInt(argument))
	default:
		// PaV: another key finds a mapping's key equal to it, as Python
		// hashes 1.0 as 1; what finds nothing, or indexes a sequence, is
		// undefined, as Jinja's getitem takes the error for (upstream: an
		// error that printed the value)
		if d, ok := value.Interface().(*Dict); ok {
			if item, found := d.ItemByEqualKey(argument); found {
				return keepMarkupOf(value, item)
			}
		}
		return Undefined(fmt.Sprintf("%s has no element %s", TypeName(value), PyRepr(argument)))
	}

	if value.IsNil() {
		return missing(value, key)
	}
	item, found := value.GetItem(key)
	if !found && argument.IsString() {
		item, found = value.GetAttribute(argument.String())
	}
	if !found {
		if item.IsError() {
			return item
		}
		return missing(value, key)
	}
	return keepMarkupOf(value, item)
}

func (e *Evaluator) evalGetSlice(node *nodes.GetSlice) *Value {
	value := e.Eval(node.Node)
	return keepMarkupOf(value, e.slice(node, value))
}

// keepMarkupOf is out, as Markup if value is a Markup string: Markup's
// indexing and slicing return Markup (PaV; upstream: a str, which escape
// then escaped again).
func keepMarkupOf(value, out *Value) *Value {
	if value.Safe && value.IsString() && out.IsString() && !out.Safe {
		return AsSafeValue(out.String())
	}
	return out
}

func (e *Evaluator) slice(node *nodes.GetSlice, value *Value) *Value {
	if value.IsError() {
		return AsValue(errors.Wrapf(value, `unable to evaluate target %s`, node.Node))
	}
	if value.IsUndefined() {
		return e.Raise(errors.New(value.UndefinedReason()))
	}
	if !value.CanSlice() {
		bounds := make([]string, 3) // evaluated first, as Python does
		for i, bound := range []nodes.Node{node.Start, node.End, node.Step} {
			bounds[i] = "None"
			if bound != nil {
				v := e.Eval(bound)
				if v.IsError() {
					return v
				}
				bounds[i] = PyRepr(v)
			}
		}
		// PaV: Jinja compiles a slice to Python's own subscript, which
		// raises Python's TypeError; only a slice its compiler folds into a
		// constant goes through the environment's getitem, which takes the
		// error for undefined.
		if e.folding {
			return Undefined(fmt.Sprintf("%s has no element slice(%s)", TypeName(value), strings.Join(bounds, ", ")))
		}
		if value.IsDict() {
			return e.Raise(errors.New("unhashable type: 'slice'"))
		}
		return e.Raise(fmt.Errorf("'%s' object is not subscriptable", PyTypeName(value))) // undefined raised above
	}

	n := value.Len()

	step, _, errValue := e.sliceIndex(node.Step, value, "step", 1)
	if errValue != nil {
		return errValue
	}
	if step == 0 {
		return AsValue(errors.New("slice step cannot be zero"))
	}
	start, startProvided, errValue := e.sliceIndex(node.Start, value, "start", 0)
	if errValue != nil {
		return errValue
	}
	end, endProvided, errValue := e.sliceIndex(node.End, value, "end", 0)
	if errValue != nil {
		return errValue
	}

	// Fast path: step == 1 → use the existing Slice() method (preserves prior behavior).
	if step == 1 {
		s := 0
		if startProvided {
			s = start
			if s < 0 {
				s = n + s
			}
		}
		ee := n
		if endProvided {
			ee = end
			if ee < 0 {
				ee = n + ee
			}
		}
		return value.Slice(s, ee)
	}

	// --- general case: emulate Python's slice with start/stop/step (incl. negative step) ---
	start, end = pythonSliceBounds(n, start, end, step, startProvided, endProvided)

	return sliceStep(value, start, end, step)
}

// sliceStep is value[start:end:step] with bounds already resolved.
func sliceStep(value *Value, start, end, step int) *Value {
	n := value.Len()
	// Materialise the underlying sequence into items, then walk by `step`.
	isString := value.getResolvedValue().Kind() == reflect.String
	var srcRunes []rune
	var srcLen int
	if isString {
		srcRunes = []rune(value.getResolvedValue().String())
		srcLen = len(srcRunes)
	} else {
		srcLen = n
	}

	if isString {
		var out []rune
		if step > 0 {
			for i := start; i < end && i < srcLen; i += step {
				if i < 0 {
					continue
				}
				out = append(out, srcRunes[i])
			}
		} else {
			for i := start; i > end && i >= 0; i += step {
				if i >= srcLen {
					continue
				}
				out = append(out, srcRunes[i])
			}
		}
		return AsValue(string(out))
	}

	out := make([]any, 0)
	if step > 0 {
		for i := start; i < end && i < srcLen; i += step {
			if i < 0 {
				continue
			}
			item := value.Index(i)
			if item != nil {
				out = append(out, item.Interface())
			}
		}
	} else {
		for i := start; i > end && i >= 0; i += step {
			if i >= srcLen {
				continue
			}
			item := value.Index(i)
			if item != nil {
				out = append(out, item.Interface())
			}
		}
	}
	if _, ok := value.Interface().(Tuple); ok { // PaV: a tuple's slice is a tuple
		return AsValue(Tuple(out))
	}
	return AsValue(out)
}

// sliceIndex evaluates a slice's start, end or step (what), dflt when absent.
func (e *Evaluator) sliceIndex(n nodes.Expression, value *Value, what string, dflt int) (int, bool, *Value) {
	if n == nil {
		return dflt, false, nil
	}
	v := e.Eval(n)
	if v.IsError() {
		return 0, true, AsValue(errors.Wrapf(value, `unable to evaluate slice %s %s`, what, n))
	}
	if !v.IsInteger() {
		return 0, true, AsValue(errors.Errorf(`slice %s is not an integer: %s`, what, v))
	}
	return v.Integer(), true, nil
}

// pythonSliceBounds returns (start, stop) indices following Python's slice
// semantics, including handling of negative indices and negative step.
func pythonSliceBounds(length, start, stop, step int, startProvided, stopProvided bool) (int, int) {
	if step > 0 {
		if !startProvided {
			start = 0
		} else {
			if start < 0 {
				start += length
			}
			if start < 0 {
				start = 0
			}
			if start > length {
				start = length
			}
		}
		if !stopProvided {
			stop = length
		} else {
			if stop < 0 {
				stop += length
			}
			if stop < 0 {
				stop = 0
			}
			if stop > length {
				stop = length
			}
		}
		return start, stop
	}

	// step < 0
	if !startProvided {
		start = length - 1
	} else {
		if start < 0 {
			start += length
		}
		if start < 0 {
			start = -1
		}
		if start >= length {
			start = length - 1
		}
	}
	if !stopProvided {
		stop = -1
	} else {
		if stop < 0 {
			stop += length
		}
		if stop < -1 {
			stop = -1
		}
		if stop >= length {
			stop = length - 1
		}
	}
	return start, stop
}
func (e *Evaluator) evalGetAttribute(node *nodes.GetAttribute) *Value {
	value := e.Eval(node.Node)
	if value.IsError() {
		return AsValue(errors.Wrapf(value, `Unable to evaluate target %s`, node.Node))
	}
	if value.IsUndefined() { // PaV: an error in Jinja (of none: undefined)
		return e.Raise(errors.New(value.UndefinedReason()))
	}
	if value.IsNil() {
		if node.Attribute != "" {
			return missing(value, node.Attribute)
		}
		return missing(value, node.Index)
	}

	if node.Attribute != "" {
		attr, found := value.GetAttribute(node.Attribute)
		if !found {
			attr, found = value.GetItem(node.Attribute)
		}
		if !found {
			if attr.IsError() {
				return AsValue(errors.Wrapf(attr, `Unable to evaluate %s`, node))
			}
			if e.Config.StrictUndefined {
				return AsValue(errors.Errorf(`Unable to evaluate %s: attribute '%s' not found`, node, node.Attribute))
			}
			if e.HasMethod(value, node.Attribute) { // PaV: a method is a value
				return AsValue(NewBoundMethod(e, value, node.Attribute))
			}
			return missing(value, node.Attribute)
		}
		return attr
	} else {
		item, found := value.GetItem(node.Index)
		if !found {
			if item.IsError() {
				return AsValue(errors.Wrapf(item, `Unable to evaluate %s`, node))
			}
			if e.Config.StrictUndefined {
				return AsValue(errors.Errorf(`Unable to evaluate %s: item %d not found`, node, node.Index))
			}
			return missing(value, node.Index)
		}
		return item
	}
}

func (e *Evaluator) evalVarArgs(node *nodes.Call) ([]reflect.Value, error) {
	params := &VarArgs{
		Args:   []*Value{},
		KwArgs: map[string]*Value{},
	}
	for _, param := range node.Args {
		value := e.Eval(param)
		if value.IsError() {
			return nil, value
		}
		params.Args = append(params.Args, value)
	}

	// PaV: in the order written, as Python evaluates them
	order := node.KwargOrder
	if len(order) != len(node.Kwargs) { // a call no parser built
		order = slices.Sorted(maps.Keys(node.Kwargs))
	}
	for _, key := range order {
		value := e.Eval(node.Kwargs[key])
		if value.IsError() {
			return nil, value
		}
		params.KwArgs[key] = value
	}
	params.KwOrder = order
	return []reflect.Value{reflect.ValueOf(params)}, nil
}

func (e *Evaluator) evalParams(node *nodes.Call, fn *Value) ([]reflect.Value, error) {
	// TODO: add the ability to detect the function signature and see if it wants a pointer to the evaluator

	args := node.Args
	t := fn.Val.Type()

	if len(args) != t.NumIn() && !(len(args) >= t.NumIn()-1 && t.IsVariadic()) {
		return nil, errors.Errorf(
			"function input argument count (%d) of '%s' must be equal to the calling argument count (%d)",
			t.NumIn(),
			node.String(),
			len(args),
		)
	}

	// Output arguments
	if t.NumOut() != 1 && t.NumOut() != 2 {
		msg := "'%s' must have exactly 1 or 2 output arguments, the second argument must be of type error"
		return nil, errors.Errorf(msg, node.String())
	}

	// Evaluate all parameters
	var parameters []reflect.Value

	numArgs := t.NumIn()
	isVariadic := t.IsVariadic()
	var functionArgument reflect.Type

	for index, argument := range args {
		evaluatedArgument := e.Eval(argument)
		if evaluatedArgument.IsError() {
			return nil, evaluatedArgument
		}

		if isVariadic {
			if index >= numArgs-1 {
				functionArgument = t.In(numArgs - 1).Elem()
			} else {
				functionArgument = t.In(index)
			}
		} else {
			functionArgument = t.In(index)
		}

		if functionArgument != typeOfValuePtr {
			// Function's argument is not a *gonja.Value, then we have to check whether input argument is of the same type as the function's argument
			if !isVariadic && functionArgument != reflect.TypeOf(evaluatedArgument.Interface()) && functionArgument.Kind() != reflect.Interface {
				return nil, errors.Errorf(
					"function input argument %d of '%s' must be of type %s or *gonja.Value (not %T)",
					index,
					node.String(),
					functionArgument.String(),
					evaluatedArgument.Interface(),
				)
			} else if functionArgument != reflect.TypeOf(evaluatedArgument.Interface()) && functionArgument.Kind() != reflect.Interface {
				return nil, errors.Errorf(
					"function variadic input argument of '%s' must be of type %s or *gonja.Value (not %T)",
					node.String(),
					functionArgument.String(),
					evaluatedArgument.Interface(),
				)
			}
			parameters = append(parameters, reflect.ValueOf(evaluatedArgument.Interface()))
		} else {
			parameters = append(parameters, reflect.ValueOf(evaluatedArgument))
		}
	}

	// Check if any of the values are invalid
	for _, p := range parameters {
		if p.Kind() == reflect.Invalid {
			return nil, errors.Errorf("calling a function using an invalid parameter")
		}
	}

	return parameters, nil
}

// missing is the undefined value of an attribute or item that value lacks,
// which says so in Jinja's words (PaV).
func missing(value *Value, key any) *Value {
	if name, ok := key.(string); ok {
		return Undefined(fmt.Sprintf("%s has no attribute '%s'", TypeName(value), name))
	}
	return Undefined(fmt.Sprintf("%s has no element %v", TypeName(value), key))
}
