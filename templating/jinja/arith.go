package jinja

import (
	"fmt"
	"math"
	"math/bits"
	"strings"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// filterArith evaluates `left <op> right` with Python's semantics. Errors
// (division by zero, overflow, bad operands) fail the render.
func filterArith(e *exec.Evaluator, left *exec.Value, params *exec.VarArgs) *exec.Value {
	if left.IsError() {
		return left
	}
	if len(params.Args) != 2 {
		return exec.AsValue(fmt.Errorf("internal: arithmetic needs an operator and an operand"))
	}
	op, right := params.Args[0].String(), params.Args[1]
	if right.IsError() {
		return right
	}
	v, err := arith(op, left, right)
	if err != nil {
		ferr := &Error{Message: err.Error()}
		stateOf(e).fail(ferr)
		return exec.AsValue(ferr)
	}
	return exec.AsValue(v)
}

func isInt(v *exec.Value) bool  { return v.IsInteger() && !v.IsBool() }
func isNum(v *exec.Value) bool  { return v.IsNumber() && !v.IsBool() }
func asInt(v *exec.Value) int64 { return toInt64(v.Interface()) }
func asFloat(v *exec.Value) float64 {
	if isInt(v) {
		return float64(asInt(v))
	}
	return v.Float()
}

func arith(op string, l, r *exec.Value) (interface{}, error) {
	if op == "%" && l.IsString() {
		return pyFormat(l.String(), r)
	}
	if !isNum(l) || !isNum(r) {
		return nil, fmt.Errorf("unsupported operand types for %s", op)
	}
	ints := isInt(l) && isInt(r)
	switch op {
	case "/":
		if asFloat(r) == 0 {
			return nil, fmt.Errorf("division by zero")
		}
		return asFloat(l) / asFloat(r), nil
	case "//":
		if ints {
			a, b := asInt(l), asInt(r)
			if b == 0 {
				return nil, fmt.Errorf("integer division or modulo by zero")
			}
			q := a / b
			if (a%b != 0) && ((a < 0) != (b < 0)) {
				q--
			}
			return q, nil
		}
		if asFloat(r) == 0 {
			return nil, fmt.Errorf("float floor division by zero")
		}
		return math.Floor(asFloat(l) / asFloat(r)), nil
	case "%":
		if ints {
			a, b := asInt(l), asInt(r)
			if b == 0 {
				return nil, fmt.Errorf("integer division or modulo by zero")
			}
			m := a % b
			if m != 0 && ((m < 0) != (b < 0)) {
				m += b
			}
			return m, nil
		}
		b := asFloat(r)
		if b == 0 {
			return nil, fmt.Errorf("float modulo")
		}
		m := math.Mod(asFloat(l), b)
		if m != 0 && ((m < 0) != (b < 0)) {
			m += b
		}
		return m, nil
	case "**":
		if ints && asInt(r) >= 0 {
			return intPow(asInt(l), asInt(r))
		}
		return math.Pow(asFloat(l), asFloat(r)), nil
	}
	return nil, fmt.Errorf("unsupported operator %s", op)
}

func intPow(base, exp int64) (int64, error) {
	result := int64(1)
	for ; exp > 0; exp-- {
		hi, lo := bits.Mul64(uint64(abs(result)), uint64(abs(base)))
		if hi != 0 || lo > math.MaxInt64 {
			return 0, fmt.Errorf("integer overflow in **")
		}
		result *= base
	}
	return result, nil
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// pyFormat implements Python's printf-style `format % args` for the common
// conversions: %s %r %d %i %f %e %g %x %o %c and %%, with flags, width and precision.
func pyFormat(format string, r *exec.Value) (string, error) {
	var args []*exec.Value
	if r.IsList() {
		for i := 0; i < r.Len(); i++ {
			args = append(args, r.Index(i))
		}
	} else {
		args = []*exec.Value{r}
	}
	var b strings.Builder
	next := 0
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		j := i + 1
		for j < len(format) && strings.IndexByte("-+ #0123456789.", format[j]) >= 0 {
			j++
		}
		if j >= len(format) {
			return "", fmt.Errorf("incomplete format")
		}
		spec, verb := format[i+1:j], format[j]
		i = j
		if verb == '%' {
			b.WriteByte('%')
			continue
		}
		if next >= len(args) {
			return "", fmt.Errorf("not enough arguments for format string")
		}
		a := args[next]
		next++
		switch verb {
		case 's', 'r':
			s, err := scalarString(a)
			if err != nil {
				s = a.String()
			}
			fmt.Fprintf(&b, "%"+spec+"s", s)
		case 'd', 'i':
			if !isNum(a) {
				return "", fmt.Errorf("%%%c format: a number is required", verb)
			}
			n := asInt(a)
			if !isInt(a) {
				n = int64(asFloat(a)) // Python truncates floats for %d
			}
			fmt.Fprintf(&b, "%"+spec+"d", n)
		case 'f', 'F', 'e', 'E', 'g', 'G':
			if !isNum(a) {
				return "", fmt.Errorf("%%%c format: a number is required", verb)
			}
			if !strings.Contains(spec, ".") && (verb == 'f' || verb == 'F' || verb == 'e' || verb == 'E') {
				spec += ".6"
			}
			fmt.Fprintf(&b, "%"+spec+string(verb), asFloat(a))
		case 'x', 'X', 'o':
			if !isInt(a) {
				return "", fmt.Errorf("%%%c format: an integer is required", verb)
			}
			fmt.Fprintf(&b, "%"+spec+string(verb), asInt(a))
		case 'c':
			if isInt(a) {
				b.WriteRune(rune(asInt(a)))
			} else {
				b.WriteString(a.String())
			}
		default:
			return "", fmt.Errorf("unsupported format character '%c'", verb)
		}
	}
	if next < len(args) {
		return "", fmt.Errorf("not all arguments converted during string formatting")
	}
	return b.String(), nil
}
