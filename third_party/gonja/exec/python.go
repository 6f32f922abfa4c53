package exec

import (
	"cmp"
	"fmt"
	"math"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	u "github.com/nikolalohinski/gonja/v2/utils"
)

// Python's semantics for Jinja's operators and the values they print (PaV):
// gonja's differ (float powers, truncating division, +Inf on division by
// zero, silent int64 wrap-around, 'a' + 1 = "a1", undefined + 3 = 3, 1 < 'a'
// and none < 1 true).

// Limits bound what one operation may build (PaV); zero is no bound.
type Limits struct {
	StringBytes int // a string built by +, *, ~ or %
	ListItems   int // a list built by + or *
	Width       int // a width or precision of a % conversion
}

func exceeds(n int64, limit int) bool { return limit > 0 && n > int64(limit) }

// IsInt: Python ints, which include bools.
func IsInt(v *Value) bool { return v.IsInteger() || v.IsBool() }
func IsNum(v *Value) bool { return v.IsNumber() || v.IsBool() }
func AsInt(v *Value) int64 {
	if v.IsBool() {
		if v.Bool() {
			return 1
		}
		return 0
	}
	return toInt64(v.Interface())
}
func AsFloat(v *Value) float64 {
	if IsInt(v) {
		return float64(AsInt(v))
	}
	return v.Float()
}

// PyType names a value's Python type for error messages.
func PyType(v *Value) string {
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
		if _, ok := v.Interface().(PyTuple); ok {
			return "tuple"
		}
		return "list"
	case v.IsDict():
		return "dict"
	}
	return otherType(v)
}

// PyTypeName is Python's name of a value's type where it is known not to
// be undefined (an undefined raised before): none is NoneType.
func PyTypeName(v *Value) string {
	if v.IsNil() {
		return "NoneType"
	}
	return PyType(v)
}

// otherType names what is neither none, a number, a string, a list nor a
// mapping, as Python would (never a Go type: templates' authors see it).
func otherType(v *Value) string {
	if _, ok := v.Interface().(*BoundMethod); ok {
		return "builtin_function_or_method"
	}
	if v.IsCallable() {
		return "function"
	}
	return "object"
}

// ErrOverflow: an integer result outside 64 bits, which Python would
// have (PaV: an error, never a silent wrap-around).
var ErrOverflow = fmt.Errorf("integer overflow (PaV's integers are 64-bit)")

func PyArith(op string, l, r *Value, tuple bool, lim Limits) (interface{}, error) {
	if op == "%" && l.IsString() {
		return PyFormat(l.String(), r, tuple, l.Safe, lim)
	}
	switch op {
	case "<", "<=", ">", ">=":
		return PyRichCompare(op, l, r)
	case "+", "*":
		if v, done, err := seqArith(op, l, r, lim); done {
			return v, err
		}
	}
	if !IsNum(l) || !IsNum(r) {
		return nil, fmt.Errorf("unsupported operand type(s) for %s: '%s' and '%s'", op, PyType(l), PyType(r))
	}
	if IsInt(l) && IsInt(r) {
		return intArith(op, AsInt(l), AsInt(r))
	}
	return floatArith(op, AsFloat(l), AsFloat(r))
}

// seqArith is + and * of strings and lists: joined or repeated; done is
// false for numbers.
func seqArith(op string, l, r *Value, lim Limits) (v interface{}, done bool, err error) {
	switch {
	case op == "*" && (l.IsString() || l.IsList()) && IsInt(r):
		v, err = repeat(l, AsInt(r), lim)
		return v, true, err
	case op == "*" && IsInt(l) && (r.IsString() || r.IsList()):
		v, err = repeat(r, AsInt(l), lim)
		return v, true, err
	case op == "*":
		return nil, false, nil
	case l.IsString() && r.IsString():
		if exceeds(int64(len(l.String())+len(r.String())), lim.StringBytes) {
			return nil, true, fmt.Errorf("string too long")
		}
		return l.String() + r.String(), true, nil
	case l.IsList() && r.IsList() && PyType(l) != PyType(r): // list + tuple, as Python
		return nil, true, fmt.Errorf("can only concatenate %s (not %q) to %s", PyType(l), PyType(r), PyType(l))
	case l.IsList() && r.IsList():
		if exceeds(int64(l.Len()+r.Len()), lim.ListItems) {
			return nil, true, fmt.Errorf("list too long (more than %d items)", lim.ListItems)
		}
		out := make([]interface{}, 0, l.Len()+r.Len())
		for _, v := range []*Value{l, r} {
			for i := 0; i < v.Len(); i++ {
				out = append(out, Item(v.Index(i)))
			}
		}
		if PyType(l) == "tuple" {
			return Tuple(out), true, nil
		}
		return out, true, nil
	case l.IsString() && !l.IsNil():
		return nil, true, fmt.Errorf("can only concatenate str (not %q) to str", PyType(r))
	}
	return nil, false, nil
}

func floatArith(op string, a, b float64) (interface{}, error) {
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
		return pyFloorDiv(a, b), nil
	case "%":
		if b == 0 {
			return nil, fmt.Errorf("float modulo")
		}
		m := math.Mod(a, b)
		if m == 0 {
			// PaV: a zero takes the divisor's sign, as Python's float %
			return math.Copysign(0, b), nil
		}
		if (m < 0) != (b < 0) {
			m += b
		}
		return m, nil
	case "**":
		return floatPow(a, b)
	}
	return nil, fmt.Errorf("unsupported operator %s", op)
}

// pyFloorDiv is Python's float floor division (floatobject.c
// float_floor_div): from fmod, not floor(a / b), whose rounding can differ
// (2.5 // 0.01 is 249.0, floor(2.5 / 0.01) is 250).
func pyFloorDiv(a, b float64) float64 {
	mod := math.Mod(a, b)
	div := (a - mod) / b
	if mod != 0 && (b < 0) != (mod < 0) {
		div -= 1.0
	}
	if div == 0 {
		return math.Copysign(0, a/b)
	}
	floor := math.Floor(div)
	if div-floor > 0.5 {
		floor += 1.0
	}
	return floor
}

func floatPow(a, b float64) (interface{}, error) {
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

func intArith(op string, a, b int64) (interface{}, error) {
	switch op {
	case "+":
		s := a + b
		if (s > a) != (b > 0) {
			return nil, ErrOverflow
		}
		return s, nil
	case "-":
		s := a - b
		if (s < a) != (b > 0) {
			return nil, ErrOverflow
		}
		return s, nil
	case "*":
		return intMul(a, b)
	case "/":
		if b == 0 {
			return nil, fmt.Errorf("division by zero")
		}
		if a > 1<<53 || a < -(1<<53) || b > 1<<53 || b < -(1<<53) {
			// Python's int / int is the exact quotient, rounded once (PaV)
			q, _ := new(big.Rat).SetFrac(big.NewInt(int64(a)), big.NewInt(int64(b))).Float64()
			if a == 0 {
				q = math.Copysign(0, float64(b)) // Python's 0 / -n is -0.0
			}
			return q, nil
		}
		return float64(a) / float64(b), nil
	case "//", "%":
		return intDivMod(op, a, b)
	case "**":
		return intPow(a, b)
	}
	return nil, fmt.Errorf("unsupported operator %s", op)
}

func intMul(a, b int64) (int64, error) {
	if a == 0 || b == 0 {
		return 0, nil
	}
	p := a * b
	if p/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
		return 0, ErrOverflow
	}
	return p, nil
}

// intDivMod is Python's // and %: rounded toward negative infinity.
func intDivMod(op string, a, b int64) (int64, error) {
	if b == 0 {
		return 0, fmt.Errorf("integer division or modulo by zero")
	}
	if op == "%" {
		if b == -1 {
			return 0, nil
		}
		m := a % b
		if m != 0 && ((m < 0) != (b < 0)) {
			m += b
		}
		return m, nil
	}
	if a == math.MinInt64 && b == -1 {
		return 0, ErrOverflow
	}
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q, nil
}

func intPow(a, b int64) (interface{}, error) {
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
		r, err := intMul(result, a)
		if err != nil {
			return nil, err
		}
		result = r
	}
	return result, nil
}

// repeat is Python's sequence * n, bounded by lim.
func repeat(v *Value, n int64, lim Limits) (interface{}, error) {
	if n <= 0 || v.Len() == 0 { // PaV: an empty sequence repeated any number of times is empty
		if v.IsString() {
			return "", nil
		}
		if PyType(v) == "tuple" {
			return Tuple{}, nil
		}
		return []interface{}{}, nil
	}
	limit := lim.StringBytes
	if !v.IsString() {
		limit = lim.ListItems
	}
	if exceeds(int64(v.Len())*n, limit) || exceeds(n, limit) {
		return nil, fmt.Errorf("repetition result too large (more than %d items)", limit)
	}
	if v.IsString() {
		return strings.Repeat(v.String(), int(n)), nil
	}
	out := make([]interface{}, 0, int64(v.Len())*n)
	for k := int64(0); k < n; k++ {
		for i := 0; i < v.Len(); i++ {
			out = append(out, Item(v.Index(i)))
		}
	}
	if PyType(v) == "tuple" {
		return Tuple(out), nil
	}
	return out, nil
}

// PyFormat implements Python's printf-style `format % args` for the common
// conversions: %s %r %d %i %u %f %F %e %E %g %G %x %X %o %c and %%, with
// flags, width, precision and %(name)s keys. args is a tuple's items when
// tuple is set (or r is a list, for the format filter), a mapping for keyed
// conversions, else the single argument. A markup format is a Markup
// string's (PaV): as markupsafe's, each argument goes through escape (%s
// of Markup stays, %r's repr is escaped), and %c, %x, %X and %o refuse it.
func PyFormat(format string, r *Value, tuple, markup bool, lim Limits) (string, error) {
	var args []*Value
	if tuple {
		for i := 0; i < r.Len(); i++ {
			args = append(args, r.Index(i))
		}
	} else {
		args = []*Value{r}
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
		j, a, spec, err := formatSpec(format, i, r)
		if err != nil {
			return "", err
		}
		keyed = keyed || a != nil
		verb := format[j]
		i = j
		if verb == '%' {
			b.WriteByte('%')
			continue
		}
		if err := checkSpecWidth(spec, lim.Width); err != nil {
			return "", err
		}
		if a == nil {
			if next >= len(args) {
				return "", fmt.Errorf("not enough arguments for format string")
			}
			a = args[next]
			next++
		}
		if err := formatOne(&b, spec, verb, a, markup); err != nil {
			return "", err
		}
		if exceeds(int64(b.Len()), lim.StringBytes) {
			return "", fmt.Errorf("string too long")
		}
	}
	if !keyed && next < len(args) {
		return "", fmt.Errorf("not all arguments converted during string formatting")
	}
	return b.String(), nil
}

// formatSpec reads the conversion starting at format[i] ('%'): the index
// of its verb, its keyed argument (nil for a positional one) and its flags,
// width and precision.
func formatSpec(format string, i int, r *Value) (verbAt int, keyed *Value, spec string, err error) {
	j := i + 1
	if j < len(format) && format[j] == '(' {
		end := strings.IndexByte(format[j:], ')')
		if end < 0 {
			return 0, nil, "", fmt.Errorf("incomplete format key")
		}
		key := format[j+1 : j+end]
		if !r.IsDict() {
			return 0, nil, "", fmt.Errorf("format requires a mapping")
		}
		v, ok := r.GetItem(key)
		if !ok {
			return 0, nil, "", fmt.Errorf("format key %q not found", key)
		}
		keyed = v
		j += end + 1
	}
	for j < len(format) && strings.IndexByte("-+ #0123456789.", format[j]) >= 0 {
		j++
	}
	for j < len(format) && strings.IndexByte("hlL", format[j]) >= 0 {
		j++ // length modifiers, which Python ignores
	}
	if j >= len(format) {
		return 0, nil, "", fmt.Errorf("incomplete format")
	}
	spec = format[i+1 : j]
	if k := strings.IndexByte(spec, ')'); k >= 0 {
		spec = spec[k+1:]
	}
	if strings.Contains(spec, "*") {
		return 0, nil, "", fmt.Errorf("* width is not supported")
	}
	return j, keyed, spec, nil
}

// markupEscapeHelper is the type markupsafe wraps a Markup format's
// arguments in, as Python's errors name it.
const markupEscapeHelper = "_MarkupEscapeHelper"

// formatOne writes one printf-style conversion of a, on the number
// formatting of format specs (pyformat.go); markup: of a Markup format.
func formatOne(b *strings.Builder, spec string, verb byte, a *Value, markup bool) error {
	f := fmtSpec{fill: ' ', align: '>', prec: -1}
	i := 0
	for i < len(spec) && strings.IndexByte("-+ #0", spec[i]) >= 0 {
		i++
	}
	flags, nums := spec[:i], strings.TrimRight(spec[i:], "hlL")
	for _, c := range []byte(flags) {
		switch c {
		case '-':
			f.align = '<'
		case '+':
			f.sign = '+'
		case ' ':
			if f.sign == 0 {
				f.sign = ' '
			}
		case '#':
			f.alt = true
		case '0':
			f.zero = true
		}
	}
	w, p, hasPrec := strings.Cut(nums, ".")
	f.width, _ = strconv.Atoi(w)
	if hasPrec {
		f.prec, _ = strconv.Atoi(p)
	}
	switch verb {
	case 's', 'r', 'a':
		s := PyStr(a)
		if verb != 's' {
			s = PyRepr(a)
		}
		if verb == 'a' {
			s = PyASCII(s)
		}
		if markup && (verb != 's' || !a.Safe) {
			s = u.Escape(s)
		}
		if f.prec >= 0 && utf8.RuneCountInString(s) > f.prec {
			s = string([]rune(s)[:f.prec])
		}
		b.WriteString(pad("", s, f))
		return nil
	case 'c':
		switch {
		case markup:
			return fmt.Errorf("%%c requires an int or a unicode character, not %s", markupEscapeHelper)
		case IsInt(a) && AsInt(a) >= 0 && AsInt(a) <= 0x10ffff:
			b.WriteString(pad("", string(rune(AsInt(a))), f))
		case a.IsString() && utf8.RuneCountInString(a.String()) == 1:
			b.WriteString(pad("", a.String(), f))
		default:
			return fmt.Errorf("%%c requires an int or a unicode character")
		}
		return nil
	}
	if f.zero && f.align != '<' {
		f.fill, f.align = '0', '='
	}
	switch verb {
	case 'd', 'i', 'u', 'x', 'X', 'o':
		var n int64
		if verb == 'x' || verb == 'X' || verb == 'o' {
			if markup {
				return fmt.Errorf("%%%c format: an integer is required, not %s", verb, markupEscapeHelper)
			}
			if !IsInt(a) {
				return fmt.Errorf("%%%c format: an integer is required, not %s", verb, PyType(a))
			}
			n = AsInt(a)
		} else {
			var err error
			if n, err = formatInt(verb, a); err != nil {
				return err
			}
		}
		u := uint64(n)
		if n < 0 {
			u = uint64(-n)
		}
		base, prefix := 10, ""
		switch verb {
		case 'x':
			base, prefix = 16, "0x"
		case 'X':
			base, prefix = 16, "0X"
		case 'o':
			base, prefix = 8, "0o"
		}
		digits := strconv.FormatUint(u, base)
		if verb == 'X' {
			digits = strings.ToUpper(digits)
		}
		if len(digits) < f.prec {
			digits = strings.Repeat("0", f.prec-len(digits)) + digits
		}
		if !f.alt {
			prefix = ""
		}
		b.WriteString(pad(signOf(n < 0, f.sign)+prefix, digits, f))
	case 'f', 'F', 'e', 'E', 'g', 'G':
		if !IsNum(a) {
			return fmt.Errorf("%%%c format: a real number is required, not %s", verb, PyType(a))
		}
		x := AsFloat(a)
		if f.prec < 0 {
			f.prec = 6
		}
		body := floatBody(math.Abs(x), verb, f.prec, f.alt)
		b.WriteString(pad(signOf(math.Signbit(x) && !math.IsNaN(x), f.sign), body, f))
	default:
		return fmt.Errorf("unsupported format character '%c'", verb)
	}
	return nil
}

// formatInt is the integer of a %d conversion: Python truncates floats.
func formatInt(verb byte, a *Value) (int64, error) {
	if !IsNum(a) {
		return 0, fmt.Errorf("%%%c format: a real number is required, not %s", verb, PyType(a))
	}
	if IsInt(a) {
		return AsInt(a), nil
	}
	f := AsFloat(a)
	if math.Abs(f) >= 1<<63 && !math.IsInf(f, 0) {
		return 0, fmt.Errorf("integer overflow: %s does not fit in 64 bits", PyFloatString(f))
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("cannot convert float %s to integer", PyFloatString(f))
	}
	return int64(f), nil
}

// checkSpecWidth bounds the width and precision of a conversion.
func checkSpecWidth(spec string, width int) error {
	for _, part := range strings.FieldsFunc(spec, func(r rune) bool { return r < '0' || r > '9' }) {
		if n, err := strconv.Atoi(part); err != nil || exceeds(int64(n), width) {
			return fmt.Errorf("format width or precision too large")
		}
	}
	return nil
}

// Item is v as an item of a list a filter builds: a Markup string stays
// Markup (its repr is Markup('...')) and an undefined undefined (its repr
// is Undefined, not None); anything else is its Go value.
func Item(v *Value) any {
	if v.Safe && v.IsString() || v.IsUndefined() {
		return v
	}
	return v.Interface()
}

// pyStrRepr is Python's repr of a str: in single quotes unless it holds
// one and no double quote; backslash, the quote, tab, newline and carriage
// return escaped, and every other character Python does not print as
// \xhh, \uhhhh or \Uhhhhhhhh (ASCII controls, and beyond ASCII what is not a
// letter, mark, number, punctuation or symbol: separators but the space,
// format and private-use characters).
func pyStrRepr(s string) string {
	q := '\''
	if strings.ContainsRune(s, '\'') && !strings.ContainsRune(s, '"') {
		q = '"'
	}
	var b strings.Builder
	b.WriteRune(q)
	for _, r := range s {
		switch {
		case r == '\\' || r == q:
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < ' ' || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r < 0x7f || unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S):
			b.WriteRune(r)
		case r <= 0xff:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
	}
	b.WriteRune(q)
	return b.String()
}

// PyStr is Python's str() of a JSON-like value.
func PyStr(v *Value) string {
	if v.IsString() {
		return v.String()
	}
	return PyRepr(v)
}

// Tuple is a Python tuple that Jinja's filters and methods make (the pairs
// of items and dictsort): a list to templates, but its repr has parentheses.
type Tuple []any

// PyTuple is the items of a value Python would print as a tuple.
type PyTuple interface{ TupleItems() []any }

func (t Tuple) TupleItems() []any { return t }

func (t Tuple) String() string { return PyRepr(AsValue(t)) }

// ValueItems bounds the items one walk over a value visits (PaV): an
// equality, a hash, a conversion. A value may hold one list many times at
// every level: one built in 40 steps holds 2**40 items, which no walk
// ends. Past it, a walk fails with a *ValueTooLarge (an equality, which
// has no error, panics with it, and the embedder's render recovers it);
// 0 is no bound.
var ValueItems int

// ValueTooLarge is the error of a walk past ValueItems.
type ValueTooLarge struct{ Limit int }

func (e *ValueTooLarge) Error() string {
	return fmt.Sprintf("a value holds more than %d items, counting a shared one each time it appears", e.Limit)
}

// WalkBudget is what one walk has left of ValueItems.
type WalkBudget struct{ left int }

// NewWalkBudget is a new walk's budget.
func NewWalkBudget() *WalkBudget { return &WalkBudget{left: ValueItems} }

// Spend counts one item, and fails once past ValueItems.
func (b *WalkBudget) Spend() error {
	if ValueItems <= 0 {
		return nil
	}
	if b.left--; b.left < 0 {
		return &ValueTooLarge{ValueItems}
	}
	return nil
}

func (b *WalkBudget) spendOrPanic() {
	if err := b.Spend(); err != nil {
		panic(err)
	}
}

// ReprBytes bounds the text PyRepr and PyStr make of a container (PaV):
// items are shared, so a list of a thousand 4 MiB strings, cheap to build,
// prints as 4 GB. Past it they panic with a *ReprTooLong, which the
// embedder's render recovers as its error; 0 is no bound.
var ReprBytes int

// ReprTooLong is the panic of a repr longer than ReprBytes.
type ReprTooLong struct{ Limit int }

func (e *ReprTooLong) Error() string {
	return fmt.Sprintf("a value printed as text would be longer than %d bytes", e.Limit)
}

// ReprSizeError is a *ReprTooLong if v's repr passes ReprBytes, else nil.
func ReprSizeError(v *Value) error {
	if ReprBytes > 0 && reprLongerThan(v, int64(ReprBytes)) {
		return &ReprTooLong{ReprBytes}
	}
	return nil
}

// reprLongerThan reports whether v's repr is longer than limit, from a
// lower bound of its length: each item counts at least 2 bytes (its
// separator), so the walk ends after limit/2 items, however deep the
// sharing.
func reprLongerThan(v *Value, limit int64) bool {
	n := int64(0)
	var over func(v *Value) bool
	over = func(v *Value) bool {
		switch t, isTuple := v.Interface().(PyTuple); {
		case isTuple:
			n += 2
			for _, item := range t.TupleItems() {
				if n += 2; over(ToValue(item)) {
					return true
				}
			}
		case v.IsString():
			n += int64(len(v.String())) + 2
		case v.IsList() || v.IsDict():
			n += 2
			v.Iterate(func(_, _ int, key, value *Value) bool {
				n += 2
				if over(key) {
					return false
				}
				if v.IsDict() && value != nil {
					n += 2
					over(value)
				}
				return n <= limit
			}, func() {})
		default:
			n++
		}
		return n > limit
	}
	return over(v)
}

// PyRepr is Python's repr() of a JSON-like value, bounded by ReprBytes.
func PyRepr(v *Value) string {
	if err := ReprSizeError(v); err != nil {
		panic(err)
	}
	return pyRepr(v)
}

func pyRepr(v *Value) string {
	var b strings.Builder
	writeRepr(&b, v)
	return b.String()
}

// writeRepr writes v's repr to b, each container's items in place: a
// nested one is not made and then copied, which is quadratic in its depth.
func writeRepr(b *strings.Builder, v *Value) {
	if t, ok := v.Interface().(PyTuple); ok {
		items := t.TupleItems()
		b.WriteByte('(')
		for i, item := range items {
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, ToValue(item))
		}
		if len(items) == 1 {
			b.WriteByte(',')
		}
		b.WriteByte(')')
		return
	}
	switch {
	case v.IsUndefined(): // PaV: an undefined item of a container, as Jinja's Undefined repr
		b.WriteString("Undefined")
	case v.IsNil():
		b.WriteString("None")
	case v.IsBool():
		if v.Bool() {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case v.IsInteger():
		b.WriteString(strconv.FormatInt(AsInt(v), 10))
	case v.IsFloat():
		b.WriteString(PyFloatString(v.Float()))
	case v.IsString():
		if v.Safe {
			b.WriteString("Markup(" + pyStrRepr(v.String()) + ")") // markupsafe's repr
		} else {
			b.WriteString(pyStrRepr(v.String()))
		}
	case v.IsList():
		b.WriteByte('[')
		for i := 0; i < v.Len(); i++ {
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, v.Index(i))
		}
		b.WriteByte(']')
	case v.IsDict():
		var keys []string
		values := map[string]*Value{}
		if d, ok := dictLiteral(v); ok {
			// A repeated key keeps its first place and takes its last value.
			for _, p := range d.Pairs {
				k := pyRepr(p.Key)
				if _, seen := values[k]; !seen {
					keys = append(keys, k)
				}
				values[k] = p.Value
			}
		} else if m, ok := v.Interface().(map[string]interface{}); ok {
			for _, k := range PyKeys(m, v) {
				key := pyRepr(AsValue(k))
				keys = append(keys, key)
				values[key] = AsValue(m[k])
			}
		} else {
			b.WriteString(v.String())
			return
		}
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(k + ": ")
			writeRepr(b, values[k])
		}
		b.WriteByte('}')
	default:
		b.WriteString(v.String())
	}
}

// PyUnpack is Python's unpacking of value into n targets (a, b = value):
// the items of any iterable, a string's characters and a mapping's keys
// included, exactly n of them (PaV: one rule for set, for and the filters
// that unpack pairs).
func PyUnpack(value *Value, n int) ([]*Value, error) {
	var items []*Value
	switch {
	case value.IsDict():
		pairs, _ := PyPairs(value)
		for _, kv := range pairs {
			if items = append(items, kv.Key); len(items) > n {
				break
			}
		}
	case value.IsString():
		for _, r := range value.String() {
			if items = append(items, AsValue(string(r))); len(items) > n {
				break
			}
		}
	case value.IsList():
		for i := 0; i < value.Len() && len(items) <= n; i++ {
			items = append(items, value.Index(i))
		}
	case value.IsUndefined(): // Jinja's Undefined iterates as empty
	default:
		return nil, fmt.Errorf("cannot unpack non-iterable %s object", PyType(value))
	}
	switch {
	case len(items) < n:
		return nil, fmt.Errorf("not enough values to unpack (expected %d, got %d)", n, len(items))
	case len(items) > n:
		return nil, fmt.Errorf("too many values to unpack (expected %d)", n)
	}
	return items, nil
}

// PyRichCompare is Python's l op r for op <, <=, > or >=: numbers with
// numbers (bools count, an int and a float by their exact values, NaN
// ordered with nothing), strings with strings, lists by their first items
// that differ (compared with op), then by their lengths; anything else,
// none included, is an error (gonja compares them somehow); undefined is
// the error its reason says, as Jinja's Undefined raises.
func PyRichCompare(op string, l, r *Value) (bool, error) {
	holds := func(c int) bool {
		return op == "<" && c < 0 || op == "<=" && c <= 0 || op == ">" && c > 0 || op == ">=" && c >= 0
	}
	switch {
	case l.IsUndefined(): // Jinja's Undefined refuses to be ordered
		return false, fmt.Errorf("%s", l.UndefinedReason())
	case r.IsUndefined():
		return false, fmt.Errorf("%s", r.UndefinedReason())
	case l.IsList() && r.IsList():
		for i := 0; i < l.Len() && i < r.Len(); i++ {
			if a, b := l.Index(i), r.Index(i); !a.EqualValueTo(b) {
				return PyRichCompare(op, a, b)
			}
		}
		return holds(cmp.Compare(l.Len(), r.Len())), nil
	case IsNum(l) && IsNum(r):
		c, ordered := NumOrder(l, r)
		return ordered && holds(c), nil
	case l.IsString() && r.IsString():
		return holds(strings.Compare(l.String(), r.String())), nil
	}
	return false, fmt.Errorf("'%s' not supported between instances of '%s' and '%s'", op, PyType(l), PyType(r))
}

// NumOrder orders two numbers (bools count) as Python does: an int and a
// float by their exact values, not by the int rounded to a float (PaV:
// 2**63-1 == 2.0**63 was true). ordered is false when one is NaN.
func NumOrder(a, b *Value) (c int, ordered bool) {
	switch {
	case IsInt(a) && IsInt(b):
		return cmp.Compare(AsInt(a), AsInt(b)), true
	case IsInt(a):
		return intFloatOrder(AsInt(a), AsFloat(b))
	case IsInt(b):
		c, ordered := intFloatOrder(AsInt(b), AsFloat(a))
		return -c, ordered
	}
	x, y := AsFloat(a), AsFloat(b)
	if math.IsNaN(x) || math.IsNaN(y) {
		return 0, false
	}
	return cmp.Compare(x, y), true
}

// intFloatOrder orders i and f exactly.
func intFloatOrder(i int64, f float64) (int, bool) {
	switch {
	case math.IsNaN(f):
		return 0, false
	case f >= 0x1p63: // +Inf too
		return -1, true
	case f < -0x1p63:
		return 1, true
	}
	t := int64(f) // exact: f truncated toward zero, within int64
	if c := cmp.Compare(i, t); c != 0 {
		return c, true
	}
	return cmp.Compare(float64(t), f), true // i is f's integral part: f's fraction decides
}

// TypeName names a value's type as Jinja's messages do.
func TypeName(v *Value) string {
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

// PyCompare orders two JSON-like scalars as Python's < does (strings
// lower-cased unless caseSensitive); other mixes are an error.
func PyCompare(a, b interface{}, caseSensitive bool) (int, error) {
	va, vb := AsValue(a), AsValue(b)
	switch {
	case va.IsList() && vb.IsList(): // by the first items that differ, then the shorter first (PaV)
		for i := 0; i < va.Len() && i < vb.Len(); i++ {
			if va.Index(i).EqualValueTo(vb.Index(i)) { // equal items are never ordered: two equal dicts pass
				continue
			}
			// Jinja lowercases only a string key, never a list's items
			return PyCompare(va.Index(i).Interface(), vb.Index(i).Interface(), true)
		}
		return PyCompare(va.Len(), vb.Len(), true)
	case va.IsString() && vb.IsString():
		x, y := va.String(), vb.String()
		if !caseSensitive {
			x, y = strings.ToLower(x), strings.ToLower(y)
		}
		return strings.Compare(x, y), nil
	case IsNum(va) && IsNum(vb):
		c, _ := NumOrder(va, vb) // NaN: neither before nor after
		return c, nil
	}
	return 0, fmt.Errorf("'<' not supported between instances of '%s' and '%s'", PyType(va), PyType(vb))
}

// PyFloatString prints f as Python's repr/str does: the shortest digits that
// round-trip, scientific notation when the exponent is < -4 or >= 16, and a
// ".0" on integral values.
func PyFloatString(f float64) string {
	if math.IsInf(f, 1) {
		return "inf"
	}
	if math.IsInf(f, -1) {
		return "-inf"
	}
	if math.IsNaN(f) {
		return "nan"
	}
	if f == 0 {
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	mant, expPart, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expPart)
	if exp < -4 || exp >= 16 {
		sign := "+"
		if exp < 0 {
			sign, exp = "-", -exp
		}
		return fmt.Sprintf("%se%s%02d", mant, sign, exp)
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return s
}

// MethodArgs binds positional and keyword arguments to names, Python-style;
// missing optional ones are nil.
func MethodArgs(method string, a *VarArgs, min, max int, names ...string) ([]*Value, error) {
	out := make([]*Value, len(names))
	if len(a.Args) > max {
		return nil, fmt.Errorf("%s() takes at most %d arguments (%d given)", method, max, len(a.Args))
	}
	copy(out, a.Args)
	for k, v := range a.KwArgs {
		found := false
		for i, n := range names {
			if n == k && i < max {
				if out[i] != nil {
					return nil, fmt.Errorf("%s() got multiple values for argument '%s'", method, k)
				}
				out[i], found = v, true
			}
		}
		if !found {
			return nil, fmt.Errorf("%s() got an unexpected keyword argument '%s'", method, k)
		}
	}
	for i := 0; i < min; i++ {
		if out[i] == nil {
			return nil, fmt.Errorf("%s() missing required argument '%s'", method, names[i])
		}
	}
	return out, nil
}

// PyKeys lists a dict's keys in the order Python would: insertion order for a
// dict built by the template (a literal), sorted for the objects PaV passes
// in, whose maps the API server serializes with sorted keys.
func PyKeys(self map[string]any, v *Value) []string {
	d, ok := dictLiteral(v)
	if !ok {
		keys := make([]string, 0, len(self))
		for k := range self {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return keys
	}
	seen := map[string]bool{}
	keys := make([]string, 0, len(d.Pairs))
	for _, p := range d.Pairs {
		if k := p.Key.String(); !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	return keys
}

// PyPairs are a mapping's (key, value) pairs in Python's order (PyKeys):
// a dict the template built keeps its keys as they are (1, True, None, a
// tuple: Python's keys need not be strings) and its values as Values; false
// when v is no mapping.
func PyPairs(v *Value) ([]*Pair, bool) {
	if d, ok := dictLiteral(v); ok {
		return d.Pairs, true
	}
	m, ok := v.ToGoSimpleType(false).(map[string]any)
	if !v.IsDict() || !ok {
		return nil, false
	}
	keys := PyKeys(m, v)
	pairs := make([]*Pair, len(keys))
	for i, k := range keys {
		pairs[i] = &Pair{Key: AsValue(k), Value: ToValue(m[k])}
	}
	return pairs, true
}

// dictLiteral returns the ordered pairs of a dict a template built.
func dictLiteral(v *Value) (*Dict, bool) {
	switch x := v.Interface().(type) {
	case Dict:
		return &x, true
	case *Dict:
		return x, x != nil
	}
	return nil, false
}

func toInt64(v interface{}) int64 {
	switch n := v.(type) {
	case int:
		return int64(n)
	case int8:
		return int64(n)
	case int16:
		return int64(n)
	case int32:
		return int64(n)
	case int64:
		return n
	case uint:
		return int64(n)
	case uint8:
		return int64(n)
	case uint16:
		return int64(n)
	case uint32:
		return int64(n)
	case uint64:
		return int64(n)
	}
	return 0
}

// Unhashable names the type of a list or dict in v, itself or in a tuple,
// which Python refuses to hash ("unhashable type: 'list'"); "" when v has
// none.
func Unhashable(v *Value) string {
	if t, ok := v.Interface().(PyTuple); ok {
		for _, item := range t.TupleItems() {
			if name := Unhashable(ToValue(item)); name != "" {
				return name
			}
		}
		return ""
	}
	if v.IsList() || v.IsDict() {
		return PyType(v)
	}
	return ""
}
