package jinja

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// filterArith evaluates `left <op> right` with Python's semantics. Its
// arguments are the operator, the right operand and whether that operand is
// a tuple literal. Errors (division by zero, overflow, bad operands) fail the
// render.
func filterArith(e *exec.Evaluator, left *exec.Value, params *exec.VarArgs) *exec.Value {
	if left.IsError() {
		return left
	}
	if len(params.Args) != 3 {
		return exec.AsValue(fmt.Errorf("internal: arithmetic needs an operator and an operand"))
	}
	op, right, tuple := params.Args[0].String(), params.Args[1], params.Args[2].IsTrue()
	if right.IsError() {
		return right
	}
	v, err := arith(op, left, right, tuple)
	if err != nil {
		return fatal(e, nil, err.Error())
	}
	return exec.AsValue(v)
}

// isInt: Python ints, which include bools.
func isInt(v *exec.Value) bool { return v.IsInteger() || v.IsBool() }
func isNum(v *exec.Value) bool { return v.IsNumber() || v.IsBool() }
func asInt(v *exec.Value) int64 {
	if v.IsBool() {
		if v.Bool() {
			return 1
		}
		return 0
	}
	return toInt64(v.Interface())
}
func asFloat(v *exec.Value) float64 {
	if isInt(v) {
		return float64(asInt(v))
	}
	return v.Float()
}

// pyType names a value's Python type for error messages.
func pyType(v *exec.Value) string {
	switch {
	case v.IsNil():
		return "NoneType (or undefined)"
	case v.IsBool():
		return "bool"
	case v.IsInteger():
		return "int"
	case v.IsFloat():
		return "float"
	case v.IsString():
		return "str"
	case v.IsList():
		return "list"
	case v.IsDict():
		return "dict"
	}
	return otherType(v)
}

// otherType names what is neither none, a number, a string, a list nor a
// mapping, as Python would (never a Go type: templates' authors see it).
func otherType(v *exec.Value) string {
	if v.IsCallable() {
		return "function"
	}
	return "object"
}

var errOverflow = fmt.Errorf("integer overflow (PaV's integers are 64-bit)")

func arith(op string, l, r *exec.Value, tuple bool) (interface{}, error) {
	if op == "%" && l.IsString() {
		return pyFormat(l.String(), r, tuple)
	}
	switch op {
	case "<", "<=", ">", ">=":
		c, err := pyOrder(op, l, r)
		if err != nil {
			return nil, err
		}
		return op == "<" && c < 0 || op == "<=" && c <= 0 || op == ">" && c > 0 || op == ">=" && c >= 0, nil
	case "+":
		switch {
		case l.IsString() && r.IsString():
			if len(l.String())+len(r.String()) > maxOutputBytes {
				return nil, fmt.Errorf("string too long")
			}
			return l.String() + r.String(), nil
		case l.IsList() && r.IsList():
			if l.Len()+r.Len() > maxListItems {
				return nil, fmt.Errorf("list too long (more than %d items)", maxListItems)
			}
			out := make([]interface{}, 0, l.Len()+r.Len())
			for _, v := range []*exec.Value{l, r} {
				for i := 0; i < v.Len(); i++ {
					out = append(out, v.Index(i).Interface())
				}
			}
			return out, nil
		case l.IsString() && !l.IsNil():
			return nil, fmt.Errorf("can only concatenate str (not %q) to str", pyType(r))
		}
	case "*":
		switch {
		case (l.IsString() || l.IsList()) && isInt(r):
			return repeat(l, asInt(r))
		case isInt(l) && (r.IsString() || r.IsList()):
			return repeat(r, asInt(l))
		}
	}
	if !isNum(l) || !isNum(r) {
		return nil, fmt.Errorf("unsupported operand type(s) for %s: '%s' and '%s'", op, pyType(l), pyType(r))
	}
	if isInt(l) && isInt(r) {
		return intArith(op, asInt(l), asInt(r))
	}
	a, b := asFloat(l), asFloat(r)
	switch op {
	case "+":
		return a + b, nil
	case "-":
		return a - b, nil
	case "*":
		return a * b, nil
	case "/":
		if b == 0 {
			return nil, fmt.Errorf("division by zero")
		}
		return a / b, nil
	case "//":
		if b == 0 {
			return nil, fmt.Errorf("float floor division by zero")
		}
		return math.Floor(a / b), nil
	case "%":
		if b == 0 {
			return nil, fmt.Errorf("float modulo")
		}
		m := math.Mod(a, b)
		if m != 0 && ((m < 0) != (b < 0)) {
			m += b
		}
		return m, nil
	case "**":
		if a == 0 && b < 0 {
			return nil, fmt.Errorf("0.0 cannot be raised to a negative power")
		}
		if a < 0 && b != math.Trunc(b) {
			return nil, fmt.Errorf("negative number cannot be raised to a fractional power (the result is complex)")
		}
		res := math.Pow(a, b)
		if math.IsInf(res, 0) {
			return nil, fmt.Errorf("numerical result out of range")
		}
		return res, nil
	}
	return nil, fmt.Errorf("unsupported operator %s", op)
}

func intArith(op string, a, b int64) (interface{}, error) {
	switch op {
	case "+":
		s := a + b
		if (s > a) != (b > 0) {
			return nil, errOverflow
		}
		return s, nil
	case "-":
		s := a - b
		if (s < a) != (b > 0) {
			return nil, errOverflow
		}
		return s, nil
	case "*":
		if a == 0 || b == 0 {
			return int64(0), nil
		}
		p := a * b
		if p/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
			return nil, errOverflow
		}
		return p, nil
	case "/":
		if b == 0 {
			return nil, fmt.Errorf("division by zero")
		}
		return float64(a) / float64(b), nil
	case "//":
		if b == 0 {
			return nil, fmt.Errorf("integer division or modulo by zero")
		}
		if a == math.MinInt64 && b == -1 {
			return nil, errOverflow
		}
		q := a / b
		if (a%b != 0) && ((a < 0) != (b < 0)) {
			q--
		}
		return q, nil
	case "%":
		if b == 0 {
			return nil, fmt.Errorf("integer division or modulo by zero")
		}
		if b == -1 {
			return int64(0), nil
		}
		m := a % b
		if m != 0 && ((m < 0) != (b < 0)) {
			m += b
		}
		return m, nil
	case "**":
		if b < 0 {
			if a == 0 {
				return nil, fmt.Errorf("0.0 cannot be raised to a negative power")
			}
			return math.Pow(float64(a), float64(b)), nil
		}
		switch a {
		case 0, 1:
			if b == 0 {
				return int64(1), nil
			}
			return a, nil
		case -1:
			if b%2 == 0 {
				return int64(1), nil
			}
			return int64(-1), nil
		}
		result := int64(1)
		for ; b > 0; b-- { // |a| >= 2: overflows within 64 steps
			r, err := intArith("*", result, a)
			if err != nil {
				return nil, err
			}
			result = r.(int64)
		}
		return result, nil
	}
	return nil, fmt.Errorf("unsupported operator %s", op)
}

// repeat is Python's sequence * n, bounded by maxOutputBytes.
func repeat(v *exec.Value, n int64) (interface{}, error) {
	if n <= 0 {
		if v.IsString() {
			return "", nil
		}
		return []interface{}{}, nil
	}
	limit := int64(maxOutputBytes)
	if !v.IsString() {
		limit = maxListItems
	}
	if int64(v.Len())*n > limit || n > limit {
		return nil, fmt.Errorf("repetition result too large (more than %d items)", limit)
	}
	if v.IsString() {
		return strings.Repeat(v.String(), int(n)), nil
	}
	out := make([]interface{}, 0, int64(v.Len())*n)
	for k := int64(0); k < n; k++ {
		for i := 0; i < v.Len(); i++ {
			out = append(out, v.Index(i).Interface())
		}
	}
	return out, nil
}

// pyFormat implements Python's printf-style `format % args` for the common
// conversions: %s %r %d %i %u %f %F %e %E %g %G %x %X %o %c and %%, with
// flags, width, precision and %(name)s keys. args is a tuple's items when
// tuple is set (or r is a list, for the format filter), a mapping for keyed
// conversions, else the single argument.
func pyFormat(format string, r *exec.Value, tuple bool) (string, error) {
	var args []*exec.Value
	if tuple {
		for i := 0; i < r.Len(); i++ {
			args = append(args, r.Index(i))
		}
	} else {
		args = []*exec.Value{r}
	}
	var b strings.Builder
	next := 0
	keyed := false
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		j := i + 1
		var a *exec.Value
		if j < len(format) && format[j] == '(' {
			end := strings.IndexByte(format[j:], ')')
			if end < 0 {
				return "", fmt.Errorf("incomplete format key")
			}
			key := format[j+1 : j+end]
			if !r.IsDict() {
				return "", fmt.Errorf("format requires a mapping")
			}
			v, ok := r.GetItem(key)
			if !ok {
				return "", fmt.Errorf("format key %q not found", key)
			}
			a, keyed = v, true
			j += end + 1
		}
		for j < len(format) && strings.IndexByte("-+ #0123456789.", format[j]) >= 0 {
			j++
		}
		if j >= len(format) {
			return "", fmt.Errorf("incomplete format")
		}
		spec, verb := format[i+1:j], format[j]
		if k := strings.IndexByte(spec, ')'); k >= 0 {
			spec = spec[k+1:]
		}
		if strings.Contains(spec, "*") {
			return "", fmt.Errorf("* width is not supported")
		}
		i = j
		if verb == '%' {
			b.WriteByte('%')
			continue
		}
		if err := checkSpecWidth(spec); err != nil {
			return "", err
		}
		if a == nil {
			if next >= len(args) {
				return "", fmt.Errorf("not enough arguments for format string")
			}
			a = args[next]
			next++
		}
		switch verb {
		case 's', 'r', 'a':
			s := pyStr(a)
			if verb != 's' {
				s = pyRepr(a)
			}
			fmt.Fprintf(&b, "%"+spec+"s", s)
		case 'd', 'i', 'u':
			if !isNum(a) {
				return "", fmt.Errorf("%%%c format: a real number is required, not %s", verb, pyType(a))
			}
			var n int64
			if isInt(a) {
				n = asInt(a)
			} else {
				f := asFloat(a)
				if math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) >= 1<<63 {
					return "", fmt.Errorf("cannot convert float %s to integer", pythonFloat(f))
				}
				n = int64(f) // Python truncates floats for %d
			}
			fmt.Fprintf(&b, "%"+spec+"d", n)
		case 'f', 'F', 'e', 'E', 'g', 'G':
			if !isNum(a) {
				return "", fmt.Errorf("%%%c format: a real number is required, not %s", verb, pyType(a))
			}
			if !strings.Contains(spec, ".") {
				spec += ".6"
			}
			v := verb
			if v == 'F' {
				v = 'f'
			}
			fmt.Fprintf(&b, "%"+spec+string(v), asFloat(a))
		case 'x', 'X', 'o':
			if !isInt(a) {
				return "", fmt.Errorf("%%%c format: an integer is required, not %s", verb, pyType(a))
			}
			if strings.Contains(spec, "#") && verb == 'o' {
				spec = strings.ReplaceAll(spec, "#", "")
				fmt.Fprintf(&b, "0o%"+spec+"o", asInt(a))
				continue
			}
			fmt.Fprintf(&b, "%"+spec+string(verb), asInt(a))
		case 'c':
			switch {
			case isInt(a) && asInt(a) >= 0 && asInt(a) <= 0x10ffff:
				b.WriteRune(rune(asInt(a)))
			case a.IsString() && len([]rune(a.String())) == 1:
				b.WriteString(a.String())
			default:
				return "", fmt.Errorf("%%c requires an int or a unicode character")
			}
		default:
			return "", fmt.Errorf("unsupported format character '%c'", verb)
		}
	}
	if !keyed && next < len(args) {
		return "", fmt.Errorf("not all arguments converted during string formatting")
	}
	return b.String(), nil
}

// checkSpecWidth bounds the width and precision of a conversion.
func checkSpecWidth(spec string) error {
	for _, part := range strings.FieldsFunc(spec, func(r rune) bool { return r < '0' || r > '9' }) {
		if n, err := strconv.Atoi(part); err != nil || n > maxWidth {
			return fmt.Errorf("format width or precision too large")
		}
	}
	return nil
}

// filterString is Jinja's string filter: Python's str(), so that none
// inside a list or dict prints as None (gonja prints nothing).
func filterString(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if err := params.Take(); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	return exec.AsValue(pyStr(in))
}

// pyStr is Python's str() of a JSON-like value.
func pyStr(v *exec.Value) string {
	if v.IsString() {
		return v.String()
	}
	return pyRepr(v)
}

// pyRepr is Python's repr() of a JSON-like value.
func pyRepr(v *exec.Value) string {
	switch {
	case v.IsNil():
		return "None"
	case v.IsBool():
		if v.Bool() {
			return "True"
		}
		return "False"
	case v.IsInteger():
		return strconv.FormatInt(asInt(v), 10)
	case v.IsFloat():
		return pythonFloat(v.Float())
	case v.IsString():
		s := v.String()
		q := "'"
		if strings.Contains(s, "'") && !strings.Contains(s, `"`) {
			q = `"`
		}
		r := strings.NewReplacer(`\`, `\\`, "\n", `\n`, "\r", `\r`, "\t", `\t`, q, `\`+q)
		return q + r.Replace(s) + q
	case v.IsList():
		parts := make([]string, v.Len())
		for i := range parts {
			parts[i] = pyRepr(v.Index(i))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case v.IsDict():
		if d, ok := dictLiteral(v); ok {
			// A repeated key keeps its first place and takes its last value.
			var keys []string
			values := map[string]string{}
			for _, p := range d.Pairs {
				k := pyRepr(p.Key)
				if _, seen := values[k]; !seen {
					keys = append(keys, k)
				}
				values[k] = pyRepr(p.Value)
			}
			parts := make([]string, len(keys))
			for i, k := range keys {
				parts[i] = k + ": " + values[k]
			}
			return "{" + strings.Join(parts, ", ") + "}"
		}
		m, ok := v.Interface().(map[string]interface{})
		if !ok {
			return v.String()
		}
		keys := pyKeys(m, v)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = pyRepr(exec.AsValue(k)) + ": " + pyRepr(exec.AsValue(m[k]))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return v.String()
}

// filterFormat is Jinja's format filter: Python's `value % args` (or
// `value % kwargs` when keyword arguments are given).
func filterFormat(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	var s string
	var err error
	if len(params.KwArgs) > 0 {
		if len(params.Args) > 0 {
			return fatal(e, nil, "format filter: can't handle positional and keyword arguments at the same time")
		}
		m := map[string]interface{}{}
		for k, v := range params.KwArgs {
			m[k] = v.Interface()
		}
		s, err = pyFormat(pyStr(in), exec.AsValue(m), false)
	} else {
		items := make([]interface{}, len(params.Args))
		for i, a := range params.Args {
			items[i] = a.Interface()
		}
		s, err = pyFormat(pyStr(in), exec.AsValue(items), true)
	}
	if err != nil {
		return fatal(e, nil, "format: "+err.Error())
	}
	return exec.AsValue(s)
}

// pyOrder orders l and r as Python's comparison operators do: numbers with
// numbers (bools count), strings with strings, lists lexicographically;
// anything else, none and undefined included, is an error (gonja compares
// them somehow).
func pyOrder(op string, l, r *exec.Value) (int, error) {
	if l.IsList() && r.IsList() {
		for i := 0; i < l.Len() && i < r.Len(); i++ {
			a, b := l.Index(i), r.Index(i)
			if a.EqualValueTo(b) {
				continue
			}
			return pyOrder(op, a, b)
		}
		return l.Len() - r.Len(), nil
	}
	if (l.IsString() && r.IsString()) || (isNum(l) && isNum(r)) {
		return pyCompare(l.Interface(), r.Interface(), true)
	}
	return 0, fmt.Errorf("'%s' not supported between instances of '%s' and '%s'", op, pyType(l), pyType(r))
}
