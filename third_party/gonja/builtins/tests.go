package builtins

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/nikolalohinski/gonja/v2/exec"
)

var Tests = exec.NewTestSet(map[string]exec.TestFunction{
	"boolean":     testBoolean,
	"callable":    testCallable,
	"defined":     testDefined,
	"divisibleby": testDivisibleby,
	"eq":          testEqual,
	"equalto":     testEqual,
	"==":          testEqual,
	"escaped":     testEscaped,
	"even":        testEven,
	"false":       testFalse,
	"filter":      testFilter,
	"float":       testFloat,
	"ge":          testGreaterEqual,
	">=":          testGreaterEqual,
	"gt":          testGreaterThan,
	"greaterthan": testGreaterThan,
	">":           testGreaterThan,
	"in":          testIn,
	"integer":     testInteger,
	"iterable":    testIterable,
	"le":          testLessEqual,
	"<=":          testLessEqual,
	"lower":       testLower,
	"lt":          testLessThan,
	"lessthan":    testLessThan,
	"<":           testLessThan,
	"mapping":     testMapping,
	"ne":          testNotEqual,
	"!=":          testNotEqual,
	"none":        testNone,
	"number":      testNumber,
	"odd":         testOdd,
	"sameas":      testSameas,
	"sequence":    testSequence,
	"string":      testString,
	"test":        testTest,
	"true":        testTrue,
	"undefined":   testUndefined,
	"upper":       testUpper,
})

func testBoolean(_ *exec.Context, in *exec.Value, params *exec.VarArgs) (bool, error) {
	return in.IsBool(), nil
}

func testCallable(_ *exec.Context, in *exec.Value, params *exec.VarArgs) (bool, error) {
	// PaV: Jinja's Undefined is callable (calling it fails)
	return in.IsCallable() || in.IsUndefined(), nil
}

func testDefined(_ *exec.Context, in *exec.Value, params *exec.VarArgs) (bool, error) {
	return !(in.IsError() || in.IsNil()), nil
}

func testDivisibleby(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) (bool, error) {
	return pyRemainderIs(e, in, params.First(), 0)
}

// pyRemainderIs reports whether in % by == want, with Python's modulo
// (PaV: -1 is odd, 3.0 is odd, a remainder by zero is an error; upstream
// used Go's on integers only). A string's % formats it, within e's limits.
func pyRemainderIs(e *exec.Evaluator, in, by *exec.Value, want float64) (bool, error) {
	r, err := exec.PyArith("%", in, by, false, e.Limits())
	if err != nil {
		return false, err
	}
	if in.IsString() {
		// Python formats the string: '%s' % 3 is '3', never a number
		return false, nil
	}
	return exec.AsFloat(exec.AsValue(r)) == want, nil
}

func testEqual(_ *exec.Context, in *exec.Value, params *exec.VarArgs) (bool, error) {
	param := params.First()
	return in.EqualValueTo(param), nil
}

func testEven(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) (bool, error) {
	return pyRemainderIs(e, in, exec.AsValue(2), 0)
}

func testFalse(_ *exec.Context, in *exec.Value, params *exec.VarArgs) (bool, error) {
	return !in.Bool(), nil
}

func testFloat(_ *exec.Context, in *exec.Value, params *exec.VarArgs) (bool, error) {
	return in.IsFloat(), nil
}

func testGreaterEqual(_ *exec.Context, in *exec.Value, params *exec.VarArgs) (bool, error) {
	param := params.Args[0]
	if !in.IsNumber() || !param.IsNumber() {
		return false, nil
	}
	return in.Float() >= param.Float(), nil
}

func testGreaterThan(_ *exec.Context, in *exec.Value, params *exec.VarArgs) (bool, error) {
	var to float64
	if err := params.Take(
		exec.PositionalArgument("to", nil, exec.NumberArgument(&to)),
	); err != nil {
		return false, exec.ErrInvalidCall(err)
	}

	return in.Float() > to, nil
}

func testIn(_ *exec.Context, in *exec.Value, params *exec.VarArgs) (bool, error) {
	seq := params.First()
	// Python (PaV): numbers and none are no containers; undefined is
	// iterable and empty; a mapping hashes the key.
	switch {
	case seq.IsBool():
		return false, errors.New("argument of type 'bool' is not iterable")
	case seq.IsInteger():
		return false, errors.New("argument of type 'int' is not iterable")
	case seq.IsFloat():
		return false, errors.New("argument of type 'float' is not iterable")
	case seq.IsNil() && !seq.IsUndefined():
		return false, errors.New("argument of type 'NoneType' is not iterable")
	case seq.IsString() && !in.IsString():
		return false, fmt.Errorf("'in <string>' requires string as left operand, not %s", exec.TypeName(in))
	case seq.IsDict() && exec.Unhashable(in) != "":
		return false, fmt.Errorf("unhashable type: '%s'", exec.Unhashable(in))
	}
	return seq.Contains(in), nil
}

func testInteger(_ *exec.Context, in *exec.Value, params *exec.VarArgs) (bool, error) {
	return in.IsInteger(), nil
}

func testIterable(_ *exec.Context, in *exec.Value, params *exec.VarArgs) (bool, error) {
	// PaV: Jinja's undefined iterates (as nothing)
	return in.IsDict() || in.IsList() || in.IsString() || in.IsUndefined(), nil
}

func testSequence(_ *exec.Context, in *exec.Value, params *exec.VarArgs) (bool, error) {
	return in.IsList(), nil
}

func testLessEqual(_ *exec.Context, in *exec.Value, params *exec.VarArgs) (bool, error) {
	param := params.Args[0]
	if !in.IsNumber() || !param.IsNumber() {
		return false, nil
	}
	return in.Float() <= param.Float(), nil
}

func testLower(_ *exec.Context, in *exec.Value, params *exec.VarArgs) (bool, error) {
	if !in.IsString() {
		return false, nil
	}
	return strings.ToLower(in.String()) == in.String(), nil
}

func testLessThan(_ *exec.Context, in *exec.Value, params *exec.VarArgs) (bool, error) {
	param := params.Args[0]
	if !in.IsNumber() || !param.IsNumber() {
		return false, nil
	}
	return in.Float() < param.Float(), nil
}

func testMapping(_ *exec.Context, in *exec.Value, params *exec.VarArgs) (bool, error) {
	return in.IsDict(), nil
}

func testNotEqual(_ *exec.Context, in *exec.Value, params *exec.VarArgs) (bool, error) {
	param := params.First()
	return !in.EqualValueTo(param), nil
}

func testNone(_ *exec.Context, in *exec.Value, params *exec.VarArgs) (bool, error) {
	return in.IsNil(), nil
}

func testNumber(_ *exec.Context, in *exec.Value, params *exec.VarArgs) (bool, error) {
	return exec.IsNum(in), nil // a bool is a number, as in Python (PaV)
}

func testOdd(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) (bool, error) {
	return pyRemainderIs(e, in, exec.AsValue(2), 1)
}

func testSameas(_ *exec.Context, in *exec.Value, params *exec.VarArgs) (bool, error) {
	param := params.Args[0]
	if in.IsNil() && param.IsNil() {
		return true, nil
	} else if param.Val.CanAddr() && in.Val.CanAddr() {
		return param.Val.Addr() == in.Val.Addr(), nil
	}
	return reflect.Indirect(param.Val) == reflect.Indirect(in.Val), nil
}

func testString(_ *exec.Context, in *exec.Value, params *exec.VarArgs) (bool, error) {
	return in.IsString(), nil
}

func testTrue(_ *exec.Context, in *exec.Value, params *exec.VarArgs) (bool, error) {
	return in.Bool(), nil
}

func testUndefined(ctx *exec.Context, in *exec.Value, params *exec.VarArgs) (bool, error) {
	defined, err := testDefined(ctx, in, params)
	return !defined, err
}

func testUpper(_ *exec.Context, in *exec.Value, params *exec.VarArgs) (bool, error) {
	if !in.IsString() {
		return false, nil
	}
	return strings.ToUpper(in.String()) == in.String(), nil
}

func testEscaped(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) (bool, error) {
	if in.IsError() {
		return false, errors.New(in.Error())
	}
	if err := params.ExpectNothing(); err != nil {
		return false, exec.ErrInvalidCall(err)
	}
	escaped := in.Escaped()
	return escaped == in.String(), nil
}

func testTest(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) (bool, error) {
	if in.IsError() {
		return false, errors.New(in.Error())
	}
	if err := params.ExpectNothing(); err != nil {
		return false, exec.ErrInvalidCall(err)
	}
	return e.Environment.Tests.Exists(in.String()), nil
}

func testFilter(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) (bool, error) {
	if in.IsError() {
		return false, errors.New(in.Error())
	}
	if err := params.ExpectNothing(); err != nil {
		return false, exec.ErrInvalidCall(err)
	}
	return e.Environment.Filters.Exists(in.String()), nil
}
