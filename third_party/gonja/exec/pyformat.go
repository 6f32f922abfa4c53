package exec

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	u "github.com/nikolalohinski/gonja/v2/utils"
)

// Python's format-spec mini-language (PaV): format(value, spec) for str,
// int, bool and float, as str.format, f-strings and format() apply it, and
// the printf-style conversions of % on the same number formatting.

// fmtSpec is a parsed format spec:
// [[fill]align][sign][z][#][0][width][grouping][.precision][type].
type fmtSpec struct {
	fill      rune
	align     byte // 0 when not given
	fillGiven bool
	sign      byte // 0, '+', '-' or ' '
	z, alt    bool
	zero      bool // the '0' flag without an explicit fill
	width     int
	grouping  byte // 0, ',' or '_'
	prec      int  // -1 when not given
	typ       byte // 0 when not given
}

func parseFmtSpec(spec string, typeName string) (fmtSpec, error) {
	f := fmtSpec{fill: ' ', prec: -1}
	s := spec
	if r, n := utf8.DecodeRuneInString(s); n > 0 && len(s) > n && strings.IndexByte("<>=^", s[n]) >= 0 {
		f.fill, f.fillGiven, f.align = r, true, s[n]
		s = s[n+1:]
	} else if len(s) > 0 && strings.IndexByte("<>=^", s[0]) >= 0 {
		f.align = s[0]
		s = s[1:]
	}
	if len(s) > 0 && strings.IndexByte("+- ", s[0]) >= 0 {
		f.sign = s[0]
		s = s[1:]
	}
	if len(s) > 0 && s[0] == 'z' {
		f.z = true
		s = s[1:]
	}
	if len(s) > 0 && s[0] == '#' {
		f.alt = true
		s = s[1:]
	}
	if !f.fillGiven && len(s) > 0 && s[0] == '0' {
		f.fill, f.zero = '0', true
		s = s[1:]
	}
	var err error
	if f.width, s, err = fmtDigits(s); err != nil {
		return f, err
	}
	if len(s) > 0 && (s[0] == ',' || s[0] == '_') {
		f.grouping = s[0]
		s = s[1:]
		if len(s) > 0 && (s[0] == ',' || s[0] == '_') {
			return f, fmt.Errorf("Cannot specify both ',' and '_'.")
		}
	}
	if len(s) > 0 && s[0] == '.' {
		if len(s) == 1 || s[1] < '0' || s[1] > '9' {
			return f, fmt.Errorf("Format specifier missing precision")
		}
		if f.prec, s, err = fmtDigits(s[1:]); err != nil {
			return f, err
		}
	}
	if len(s) > 1 {
		return f, fmt.Errorf("Invalid format specifier '%s' for object of type '%s'", spec, typeName)
	}
	if len(s) == 1 {
		f.typ = s[0]
	}
	if f.grouping != 0 {
		ok := strings.IndexByte("\x00deEfFgG%", f.typ) >= 0 || (f.grouping == '_' && strings.IndexByte("boxX", f.typ) >= 0)
		if !ok {
			return f, fmt.Errorf("Cannot specify '%c' with '%c'.", f.grouping, f.typ)
		}
	}
	return f, nil
}

// fmtDigits reads a decimal number (0 if there is none).
func fmtDigits(s string) (int, string, error) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, s, nil
	}
	n, err := strconv.Atoi(s[:i])
	if err != nil || n > math.MaxInt32 {
		return 0, s, fmt.Errorf("Too many decimal digits in format string")
	}
	return n, s[i:], nil
}

// PyFormatValue is Python's format(v, spec), its width and precision
// bounded by lim.Width.
func PyFormatValue(v *Value, spec string, lim Limits) (string, error) {
	switch {
	case v.IsBool() && spec == "":
		return PyStr(v), nil
	case IsInt(v) || v.IsFloat():
	case v.IsString():
	default:
		if spec != "" {
			return "", fmt.Errorf("unsupported format string passed to %s.__format__", PyType(v))
		}
		if v.IsUndefined() {
			return "", nil
		}
		return PyStr(v), nil
	}
	typeName := "str"
	if v.IsFloat() {
		typeName = "float"
	} else if IsInt(v) {
		typeName = "int"
	}
	f, err := parseFmtSpec(spec, typeName)
	if err != nil {
		return "", err
	}
	if exceeds(int64(f.width), lim.Width) || exceeds(int64(f.prec), lim.Width) {
		return "", fmt.Errorf("format width or precision too large")
	}
	switch typeName {
	case "str":
		return formatStr(v.String(), f)
	case "int":
		return formatIntSpec(AsInt(v), f)
	}
	return formatFloatSpec(v.Float(), f)
}

func formatStr(s string, f fmtSpec) (string, error) {
	switch {
	case f.typ != 0 && f.typ != 's':
		return "", fmt.Errorf("Unknown format code '%c' for object of type 'str'", f.typ)
	case f.sign != 0:
		return "", fmt.Errorf("Sign not allowed in string format specifier")
	case f.alt:
		return "", fmt.Errorf("Alternate form (#) not allowed in string format specifier")
	case f.z:
		return "", fmt.Errorf("Negative zero coercion (z) not allowed in string format specifier")
	case f.grouping != 0:
		return "", fmt.Errorf("Cannot specify '%c' with 's'.", f.grouping)
	case f.align == '=':
		return "", fmt.Errorf("'=' alignment not allowed in string format specifier")
	}
	if f.prec >= 0 && utf8.RuneCountInString(s) > f.prec {
		s = string([]rune(s)[:f.prec])
	}
	if f.align == 0 {
		f.align = '<'
	}
	return pad("", s, f), nil
}

func formatIntSpec(n int64, f fmtSpec) (string, error) {
	switch f.typ {
	case 'e', 'E', 'f', 'F', 'g', 'G', '%':
		return formatFloatSpec(float64(n), f)
	case 0, 'd', 'n', 'b', 'o', 'x', 'X', 'c':
	default:
		return "", fmt.Errorf("Unknown format code '%c' for object of type 'int'", f.typ)
	}
	if f.prec >= 0 {
		return "", fmt.Errorf("Precision not allowed in integer format specifier")
	}
	if f.z {
		return "", fmt.Errorf("Negative zero coercion (z) not allowed in integer format specifier")
	}
	if f.align == 0 {
		f.align = '>'
		if f.zero {
			f.align = '='
		}
	}
	if f.typ == 'c' {
		if f.sign != 0 {
			return "", fmt.Errorf("Sign not allowed with integer format specifier 'c'")
		}
		if f.alt {
			return "", fmt.Errorf("Alternate form (#) not allowed with integer format specifier 'c'")
		}
		if n < 0 || n > 0x10ffff {
			return "", fmt.Errorf("%%c arg not in range(0x110000)")
		}
		return pad("", string(rune(n)), f), nil
	}
	sign := signOf(n < 0, f.sign)
	u := uint64(n)
	if n < 0 {
		u = uint64(-n) // -MinInt64 wraps to itself, its magnitude as uint64
	}
	base, prefix, every := 10, "", 3
	switch f.typ {
	case 'b':
		base, prefix, every = 2, "0b", 4
	case 'o':
		base, prefix, every = 8, "0o", 4
	case 'x':
		base, prefix, every = 16, "0x", 4
	case 'X':
		base, prefix, every = 16, "0X", 4
	}
	digits := strconv.FormatUint(u, base)
	if f.typ == 'X' {
		digits = strings.ToUpper(digits)
	}
	if !f.alt {
		prefix = ""
	}
	return padNumber(sign+prefix, digits, "", every, f), nil
}

func signOf(negative bool, sign byte) string {
	switch {
	case negative:
		return "-"
	case sign == '+':
		return "+"
	case sign == ' ':
		return " "
	}
	return ""
}

func formatFloatSpec(x float64, f fmtSpec) (string, error) {
	switch f.typ {
	case 0, 'e', 'E', 'f', 'F', 'g', 'G', 'n', '%':
	default:
		return "", fmt.Errorf("Unknown format code '%c' for object of type 'float'", f.typ)
	}
	if f.align == 0 {
		f.align = '>'
		if f.zero {
			f.align = '='
		}
	}
	body := floatBody(math.Abs(x), f.typ, f.prec, f.alt)
	negative := math.Signbit(x) && !math.IsNaN(x)
	if mant, _, _ := strings.Cut(strings.ToLower(body), "e"); negative && f.z && strings.Trim(mant, "0.%") == "" {
		negative = false
	}
	intPart, rest := body, ""
	if i := strings.IndexFunc(body, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		intPart, rest = body[:i], body[i:]
	}
	if math.IsInf(x, 0) || math.IsNaN(x) {
		intPart, rest = "", body
	}
	return padNumber(signOf(negative, f.sign), intPart, rest, 3, f), nil
}

// floatBody formats a non-negative x (no sign) for a float presentation type.
func floatBody(x float64, typ byte, prec int, alt bool) string {
	upper := typ == 'E' || typ == 'F' || typ == 'G'
	if math.IsInf(x, 0) || math.IsNaN(x) {
		s := "inf"
		if math.IsNaN(x) {
			s = "nan"
		}
		if upper {
			s = strings.ToUpper(s)
		}
		if typ == '%' {
			s += "%"
		}
		return s
	}
	var s string
	switch typ {
	case 0:
		if prec < 0 {
			s = PyFloatString(x)
			if alt && !strings.ContainsAny(s, ".") {
				// 1e+16 with '#': the point stays
				if i := strings.IndexByte(s, 'e'); i >= 0 {
					s = s[:i] + "." + s[i:]
				}
			}
			return s
		}
		s = formatG(x, prec, alt, true)
	case 'e', 'E':
		if prec < 0 {
			prec = 6
		}
		s = strconv.FormatFloat(x, 'e', prec, 64)
		if alt && prec == 0 {
			s = strings.Replace(s, "e", ".e", 1)
		}
	case 'f', 'F', '%':
		if prec < 0 {
			prec = 6
		}
		if typ == '%' {
			x *= 100
		}
		s = strconv.FormatFloat(x, 'f', prec, 64)
		if alt && prec == 0 {
			s += "."
		}
		if typ == '%' {
			s += "%"
		}
	case 'g', 'G', 'n':
		if prec < 0 {
			prec = 6
		}
		s = formatG(x, prec, alt, false)
	}
	if upper {
		s = strings.ToUpper(s)
	}
	return s
}

// formatG is Python's 'g' presentation: scientific notation when the
// exponent is below -4 or not below the precision, trailing zeros removed
// unless alt; dot0 is the presentation without a type, which keeps one
// digit after the point and switches to exponents one digit earlier.
func formatG(x float64, prec int, alt, dot0 bool) string {
	if prec == 0 {
		prec = 1
	}
	e := strconv.FormatFloat(x, 'e', prec-1, 64)
	exp, _ := strconv.Atoi(e[strings.IndexByte(e, 'e')+1:])
	limit := prec
	if dot0 {
		limit = prec - 1
	}
	var s string
	if exp < -4 || exp >= limit {
		s = e
	} else {
		s = strconv.FormatFloat(x, 'f', prec-1-exp, 64)
	}
	if !alt {
		mant, expo, hasExp := strings.Cut(s, "e")
		if strings.Contains(mant, ".") {
			mant = strings.TrimRight(strings.TrimRight(mant, "0"), ".")
		}
		s = mant
		if hasExp {
			s += "e" + expo
		}
	} else if !strings.Contains(s, ".") {
		if i := strings.IndexByte(s, 'e'); i >= 0 {
			s = s[:i] + "." + s[i:]
		} else {
			s += "."
		}
	}
	if dot0 && !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	return s
}

// padNumber assembles prefix (sign and base prefix), the integer digits
// grouped every so many, and rest (fraction, exponent, %), padded to the
// width; zeros padding a grouped number after its sign are grouped too.
func padNumber(prefix, digits, rest string, every int, f fmtSpec) string {
	sep := ""
	if f.grouping != 0 {
		sep = string(f.grouping)
	}
	grouped := group(digits, sep, every)
	if f.align == '=' && f.fill == '0' && sep != "" && digits != "" {
		for len(prefix)+len(grouped)+len(rest) < f.width {
			digits = "0" + digits
			grouped = group(digits, sep, every)
		}
	}
	return pad(prefix, grouped+rest, f)
}

func group(digits, sep string, every int) string {
	if sep == "" || len(digits) <= every {
		return digits
	}
	var b strings.Builder
	first := len(digits) % every
	if first == 0 {
		first = every
	}
	b.WriteString(digits[:first])
	for i := first; i < len(digits); i += every {
		b.WriteString(sep)
		b.WriteString(digits[i : i+every])
	}
	return b.String()
}

// pad aligns prefix+body in the spec's width with its fill; '=' puts the
// fill between them.
func pad(prefix, body string, f fmtSpec) string {
	n := f.width - utf8.RuneCountInString(prefix) - utf8.RuneCountInString(body)
	if n <= 0 {
		return prefix + body
	}
	fill := func(k int) string { return strings.Repeat(string(f.fill), k) }
	switch f.align {
	case '<':
		return prefix + body + fill(n)
	case '^':
		return fill(n/2) + prefix + body + fill(n-n/2)
	case '=':
		return prefix + fill(n) + body
	}
	return fill(n) + prefix + body
}

// PyStrFormat is Python's str.format as Jinja's sandbox runs it: fields by
// position (automatic or explicit) or keyword, then attributes and items
// looked up as Jinja does (missing ones are undefined, names starting with
// '_' unsafe), conversions !s !r !a, and format specs with nested fields.
// escape makes it markupsafe's Markup.format: each field escaped once
// formatted, a Markup field as it is (and refusing a spec).
func PyStrFormat(format string, args []*Value, kwargs map[string]*Value, lim Limits, escape bool) (string, error) {
	f := strFormatter{args: args, kwargs: kwargs, lim: lim, escape: escape}
	return f.format(format, 2)
}

type strFormatter struct {
	args   []*Value
	kwargs map[string]*Value
	lim    Limits
	escape bool
	auto   int // next automatic index, -1 once a field was numbered
}

func (f *strFormatter) format(format string, depth int) (string, error) {
	if depth < 0 {
		return "", fmt.Errorf("Max string recursion exceeded")
	}
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c == '}' {
			if i+1 < len(format) && format[i+1] == '}' {
				b.WriteByte('}')
				i++
				continue
			}
			return "", fmt.Errorf("Single '}' encountered in format string")
		}
		if c != '{' {
			b.WriteByte(c)
			continue
		}
		if i+1 < len(format) && format[i+1] == '{' {
			b.WriteByte('{')
			i++
			continue
		}
		end, err := fieldEnd(format, i+1)
		if err != nil {
			return "", err
		}
		s, err := f.field(format[i+1:end], depth)
		if err != nil {
			return "", err
		}
		if exceeds(int64(b.Len()+len(s)), f.lim.StringBytes) {
			return "", fmt.Errorf("string too long")
		}
		b.WriteString(s)
		i = end
	}
	return b.String(), nil
}

// fieldEnd is the index of the '}' closing the field that starts at i,
// skipping nested fields and brackets in the field name.
func fieldEnd(format string, i int) (int, error) {
	level, inName, inBracket := 1, true, false
	for ; i < len(format); i++ {
		c := format[i]
		switch {
		case inBracket:
			inBracket = c != ']'
		case inName && c == '[':
			inBracket = true
		case inName && (c == '!' || c == ':'):
			inName = false
		case c == '{':
			level++
		case c == '}':
			level--
			if level == 0 {
				return i, nil
			}
		}
	}
	if inBracket {
		return 0, fmt.Errorf("expected '}' before end of string")
	}
	return 0, fmt.Errorf("expected '}' before end of string")
}

func (f *strFormatter) field(field string, depth int) (string, error) {
	name, conv, spec := field, "", ""
	// the name ends at the first '!' or ':' outside brackets
	for j, inBracket := 0, false; j < len(field); j++ {
		c := field[j]
		if inBracket {
			inBracket = c != ']'
			continue
		}
		if c == '[' {
			inBracket = true
			continue
		}
		if c == '!' || c == ':' {
			name, spec = field[:j], field[j:]
			if c == '!' {
				if len(spec) < 2 || (len(spec) > 2 && spec[2] != ':') {
					return "", fmt.Errorf("expected ':' after conversion specifier")
				}
				conv, spec = spec[1:2], spec[2:]
			}
			spec = strings.TrimPrefix(spec, ":")
			break
		}
	}
	v, err := fieldValue(name, f.args, f.kwargs, &f.auto)
	if err != nil {
		return "", err
	}
	switch conv {
	case "":
	case "s":
		if v.IsUndefined() {
			v = AsValue("")
		} else {
			v = AsValue(PyStr(v))
		}
	case "r", "a":
		r := PyRepr(v)
		if v.IsUndefined() {
			r = "Undefined"
		}
		if conv == "a" {
			r = PyASCII(r)
		}
		v = AsValue(r)
	default:
		return "", fmt.Errorf("Unknown conversion specifier %s", conv)
	}
	if strings.Contains(spec, "{") {
		if spec, err = f.format(spec, depth-1); err != nil {
			return "", err
		}
	}
	if f.escape && v.Safe && v.IsString() { // Markup's __html_format__
		if spec != "" {
			return "", fmt.Errorf("Unsupported format specification for Markup.")
		}
		return v.String(), nil
	}
	s, err := PyFormatValue(v, spec, f.lim)
	if err != nil || !f.escape {
		return s, err
	}
	return u.Escape(s), nil
}

// fieldValue looks up a field name: an argument, then .attributes and
// [items].
func fieldValue(name string, args []*Value, kwargs map[string]*Value, auto *int) (*Value, error) {
	first := name
	if i := strings.IndexAny(name, ".["); i >= 0 {
		first = name[:i]
	}
	rest := name[len(first):]
	var v *Value
	if first == "" {
		if *auto < 0 {
			return nil, fmt.Errorf("cannot switch from manual field specification to automatic field numbering")
		}
		first = strconv.Itoa(*auto)
		*auto++
	} else if IsDigits(first) {
		if *auto > 0 {
			return nil, fmt.Errorf("cannot switch from automatic field numbering to manual field specification")
		}
		*auto = -1
	}
	if IsDigits(first) {
		n, err := strconv.Atoi(first)
		if err != nil || n >= len(args) {
			return nil, fmt.Errorf("Replacement index %s out of range for positional args tuple", first)
		}
		v = args[n]
	} else {
		var ok bool
		if v, ok = kwargs[first]; !ok {
			return nil, fmt.Errorf("KeyError: '%s'", first)
		}
	}
	for rest != "" {
		var key string
		isAttr := rest[0] == '.'
		if isAttr {
			rest = rest[1:]
			j := strings.IndexAny(rest, ".[")
			if j < 0 {
				j = len(rest)
			}
			key, rest = rest[:j], rest[j:]
			if key == "" {
				return nil, fmt.Errorf("Empty attribute in format string")
			}
		} else {
			j := strings.IndexByte(rest, ']')
			if j < 0 {
				return nil, fmt.Errorf("Missing ']' in format string")
			}
			key, rest = rest[1:j], rest[j+1:]
			if key == "" {
				return nil, fmt.Errorf("Empty attribute in format string")
			}
			if rest != "" && rest[0] != '.' && rest[0] != '[' {
				return nil, fmt.Errorf("Only '.' or '[' may follow ']' in format field specifier")
			}
		}
		if v.IsUndefined() {
			return nil, fmt.Errorf("%s", v.UndefinedReason())
		}
		var item any = key
		if !isAttr && IsDigits(key) {
			n, _ := strconv.Atoi(key)
			item = n
		}
		if isAttr && (v.IsDict() && dictAttributes[key] || !v.IsDict() && pyAttributes[key]) {
			// Python would print the bound method or the number's part
			return nil, fmt.Errorf("format: the attribute '%s' of '%s' is not supported", key, PyType(v))
		}
		if isAttr && !v.IsDict() {
			item = nil // no other attributes: undefined
		}
		next, ok := (*Value)(nil), false
		if item != nil {
			next, ok = v.GetItem(item)
		}
		if !ok || next == nil {
			next = Undefined(fmt.Sprintf("'%s object' has no attribute '%s'", PyType(v), key))
		}
		v = next
	}
	return v, nil
}

// IsDigits is Python's str.isdigit for ASCII: a field name's index, an
// attribute path's (PaV).
func IsDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// PyASCII is Python's ascii() of a repr: non-ASCII characters escaped.
func PyASCII(repr string) string {
	var b strings.Builder
	for _, r := range repr {
		switch {
		case r < 0x80:
			b.WriteRune(r)
		case r <= 0xff:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
	}
	return b.String()
}

// dictAttributes are a dict's attributes, which Jinja's getattr finds
// before its items; pyAttributes those of the other types.
var dictAttributes = setOf("clear copy fromkeys get items keys pop popitem setdefault update values")

var pyAttributes = setOf("append as_integer_ratio bit_count bit_length capitalize casefold center clear " +
	"conjugate copy count denominator encode endswith expandtabs extend find format format_map from_bytes " +
	"fromhex fromkeys get hex imag index insert is_integer isalnum isalpha isascii isdecimal isdigit " +
	"isidentifier islower isnumeric isprintable isspace istitle isupper items join keys ljust lower lstrip " +
	"maketrans numerator partition pop popitem real remove removeprefix removesuffix replace reverse rfind " +
	"rindex rjust rpartition rsplit rstrip setdefault sort split splitlines startswith strip swapcase title " +
	"to_bytes translate update upper values zfill")

func setOf(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}
