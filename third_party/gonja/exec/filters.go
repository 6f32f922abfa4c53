package exec

import (
	"fmt"

	"github.com/pkg/errors"

	"github.com/nikolalohinski/gonja/v2/nodes"
)

// FilterFunction is the type filter functions must fulfill
type FilterFunction func(e *Evaluator, in *Value, params *VarArgs) *Value

// EvaluateFiltered evaluates a filtered expression
func (e *Evaluator) EvaluateFiltered(expr *nodes.FilteredExpression) *Value {
	value := e.Eval(expr.Expression)
	// PaV: an operand that fails raises before any filter sees it, as in
	// Python (`+s|int(0)` with a string s fails, it is not 0).
	if value.IsError() {
		return value
	}
	for _, filter := range expr.Filters {
		value = e.ExecuteFilter(filter, value)
		if value.IsError() {
			return AsValue(errors.Wrapf(value, "unable to evaluate filter %s", filter))
		}
	}

	return value
}

// ExecuteFilter executes a filter node
func (e *Evaluator) ExecuteFilter(fc *nodes.FilterCall, v *Value) *Value {
	params := NewVarArgs()

	for _, param := range fc.Args {
		value := e.Eval(param)
		if value.IsError() {
			return AsValue(errors.Wrapf(value, "unable to evaluate parameter %s", param))
		}
		params.Args = append(params.Args, value)
	}

	for key, param := range fc.Kwargs {
		value := e.Eval(param)
		if value.IsError() {
			return AsValue(errors.Wrapf(value, "unable to evaluate parameter %s=%s", key, param))
		}
		params.KwArgs[key] = value
	}
	return e.ExecuteFilterByName(fc.Name, v, params)
}

// ExecuteFilterByName executes a filter given its name
func (e *Evaluator) ExecuteFilterByName(name string, in *Value, params *VarArgs) *Value {
	if err := e.Environment.interrupted(); err != nil {
		return AsValue(err)
	}
	filter, ok := e.Environment.Filters.Get(name)
	if !e.Environment.Filters.Exists(name) || !ok {
		return AsValue(errors.Errorf("filter '%s' not found", name))
	}
	returnedValue := filter(e, in, params)
	// PaV: Jinja's filters that call a str method on their input keep Markup
	if in.Safe && in.IsString() && keepMarkup[name] && returnedValue.IsString() && !returnedValue.Safe {
		returnedValue = AsSafeValue(returnedValue.String())
	}
	// PaV: a filter that fails raises, as a Python exception does: an error
	// value a later filter does not look at must not print as a value.
	if returnedValue.IsError() {
		if err, ok := returnedValue.Interface().(ErrInvalidCall); ok {
			return e.Raise(fmt.Errorf("invalid call to filter '%s': %s", name, err.Error()))
		}
		return e.Raise(returnedValue.Interface().(error))
	}

	return returnedValue
}

// keepMarkup are the filters whose result is Markup when their input is
// (PaV): Jinja's call a method of the string, and Markup's methods return
// Markup.
var keepMarkup = map[string]bool{"upper": true, "lower": true, "capitalize": true, "trim": true,
	"string": true, "reverse": true, "center": true}
