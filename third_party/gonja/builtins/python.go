package builtins

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/nikolalohinski/gonja/v2/builtins/methods/pystring"
	"github.com/nikolalohinski/gonja/v2/exec"
)

// Python's semantics for Jinja's filters and tests where gonja's differ (PaV).
func init() {
	for name, f := range map[string]exec.FilterFunction{
		"default": filterPyDefault, "d": filterPyDefault, "dictsort": filterPyDictSort, "urlencode": filterPyURLEncode,
		"round": filterPyRound, "string": filterPyString, "format": filterPyFormat,
		"int": filterPyInt(filterInteger), "pprint": filterPyPPrint,
		"wordwrap": filterPyWordwrap, "items": filterPyItems, "float": filterPyFloat,
		"striptags": filterPyStriptags, "wordcount": filterPyWordcount,
		"select": filterSelectChecked("select", filterSelect), "reject": filterSelectChecked("reject", filterReject),
		"selectattr": filterSelectChecked("selectattr", filterSelectAttr), "rejectattr": filterSelectChecked("rejectattr", filterRejectAttr),
	} {
		must(Filters.Replace(name, f))
	}
	for name, t := range map[string]exec.TestFunction{
		"defined": testPyDefined, "undefined": testPyUndefined, "none": testPyNone,
		"sequence": testPySequence, "filter": testPyFilter, "test": testPyTest,
		"true": testPyTrue, "false": testPyFalse, "escaped": testPyEscaped,
		"upper": testPyCase(pystring.IsUpper), "lower": testPyCase(pystring.IsLower),
	} {
		must(Tests.Replace(name, t))
	}
	for name, op := range map[string]string{"lt": "<", "<": "<", "le": "<=", "<=": "<=", "gt": ">", ">": ">", "ge": ">=", ">=": ">=",
		"lessthan": "<", "greaterthan": ">"} {
		if Tests.Exists(name) {
			must(Tests.Replace(name, testOrder(op)))
		}
	}
	boundItemFilters() // last: it wraps the filters above
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// raise fails the rendering (exec.Evaluator.Raise) with msg.
func raise(e *exec.Evaluator, msg string) *exec.Value {
	return e.Raise(errors.New(msg))
}

// filterPyDictSort is Jinja's dictsort(value, case_sensitive=false, by='key',
// reverse=false): the mapping's (key, value) pairs, sorted. gonja's returns
// pairs a for loop cannot unpack.
func filterPyDictSort(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	p, err := exec.MethodArgs("dictsort", params, 0, 3, "case_sensitive", "by", "reverse")
	if err != nil {
		return raise(e, "filter dictsort: "+err.Error())
	}
	pairs, ok := exec.PyPairs(in)
	if !ok {
		return raise(e, "filter dictsort expects a mapping, got "+exec.PyType(in))
	}
	caseSensitive := p[0] != nil && p[0].IsTrue()
	byValue := false
	if p[1] != nil {
		switch p[1].String() {
		case "key":
		case "value":
			byValue = true
		default:
			return raise(e, "filter dictsort: you can only sort by either 'key' or 'value'")
		}
	}
	reverse := p[2] != nil && p[2].IsTrue()
	sortKey := func(p *exec.Pair) any {
		if byValue {
			return p.Value.Interface()
		}
		return p.Key.Interface()
	}
	sorted := slices.Clone(pairs)
	var cmpErr error
	// Python's sorted() is stable, also with reverse=True: equal items keep
	// their order
	sort.SliceStable(sorted, func(i, j int) bool {
		c, err := exec.PyCompare(sortKey(sorted[i]), sortKey(sorted[j]), caseSensitive)
		if err != nil && cmpErr == nil {
			cmpErr = err
		}
		if reverse {
			return c > 0
		}
		return c < 0
	})
	if cmpErr != nil {
		return raise(e, "filter dictsort: "+cmpErr.Error())
	}
	out := make([]interface{}, len(sorted))
	for i, kv := range sorted {
		out[i] = exec.Tuple{kv.Key, kv.Value}
	}
	return exec.AsValue(out)
}

// filterPyURLEncode is Jinja's urlencode: a string (or other scalar) is quoted
// with only "/" left safe; a mapping or a list of pairs becomes a query
// string (mapping keys sorted, as Go maps have no order).
func filterPyURLEncode(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if len(params.Args) > 0 || len(params.KwArgs) > 0 {
		return raise(e, "filter urlencode takes no arguments")
	}
	switch {
	case in.IsDict():
		pairs, ok := exec.PyPairs(in) // Python's order
		if !ok {
			return raise(e, "filter urlencode: unsupported mapping")
		}
		parts := make([]string, len(pairs))
		size := 0
		for i, kv := range pairs {
			parts[i] = urlQuote(exec.PyStr(kv.Key), true) + "=" + urlQuote(exec.PyStr(kv.Value), true)
			size += len(parts[i]) + 1
			if failed := pastStringLimit(e, "urlencode", size); failed != nil {
				return failed
			}
		}
		return exec.AsValue(strings.Join(parts, "&"))
	case in.IsList():
		parts := make([]string, in.Len())
		size := 0
		for i := range parts {
			kv, err := exec.PyUnpack(in.Index(i), 2) // Jinja's `for k, v in value`
			if err != nil {
				return raise(e, "filter urlencode: "+err.Error())
			}
			parts[i] = urlQuote(exec.PyStr(kv[0]), true) + "=" + urlQuote(exec.PyStr(kv[1]), true)
			size += len(parts[i]) + 1
			if failed := pastStringLimit(e, "urlencode", size); failed != nil {
				return failed
			}
		}
		return exec.AsValue(strings.Join(parts, "&"))
	case in.IsUndefined(): // iterable, and empty
		return exec.AsValue("")
	}
	return exec.AsValue(urlQuote(exec.PyStr(in), false)) // str() of anything else: none is "None"
}

// urlQuote is Python's urllib.parse.quote(s, safe="/"), or with safe="" and
// spaces as "+" for query strings.
func urlQuote(s string, forQS bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '_', c == '.', c == '-', c == '~', c == '/' && !forQS:
			b.WriteByte(c)
		case c == ' ' && forQS:
			b.WriteByte('+')
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// filterPyRound is Jinja's round(value, precision=0, method='common'):
// Python's round() (half to even, an int stays an int) or floor/ceil scaled
// by 10**precision (always a float).
func filterPyRound(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	p, err := exec.MethodArgs("round", params, 0, 2, "precision", "method")
	if err != nil {
		return raise(e, "filter round: "+err.Error())
	}
	if !exec.IsNum(in) {
		return raise(e, "filter round expects a number, got "+exec.PyType(in))
	}
	precision := int64(0)
	if p[0] != nil {
		if !exec.IsInt(p[0]) {
			return raise(e, "filter round: precision must be an integer")
		}
		precision = exec.AsInt(p[0])
	}
	if precision > 400 || precision < -400 {
		return raise(e, fmt.Sprintf("filter round: precision %d too large", precision))
	}
	method := "common"
	if p[1] != nil {
		method = p[1].String()
	}
	switch method {
	case "common":
		if exec.IsInt(in) {
			r, ok := roundInt(exec.AsInt(in), precision)
			if !ok {
				return e.Raise(exec.ErrOverflow)
			}
			return exec.AsValue(r)
		}
		return exec.AsValue(roundFloat(in.Float(), precision))
	case "floor", "ceil":
		scale := math.Pow(10, float64(precision))
		f := math.Floor
		if method == "ceil" {
			f = math.Ceil
		}
		r := f(exec.AsFloat(in) * scale)
		if r == 0 {
			r = 0 // Python's math.floor and math.ceil make an int: no -0.0 (PaV)
		}
		return exec.AsValue(r / scale)
	}
	return raise(e, "filter round: method must be common, ceil or floor")
}

// roundFloat is Python's round(x, n) on a float: correctly rounded, ties to even.
func roundFloat(x float64, n int64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return x
	}
	if n >= 0 {
		r, err := strconv.ParseFloat(strconv.FormatFloat(x, 'f', int(n), 64), 64)
		if err != nil {
			return x
		}
		return r
	}
	scale := math.Pow(10, float64(-n))
	return math.RoundToEven(x/scale) * scale
}

// roundInt is Python's round(i, n) on an int: unchanged unless n < 0.
func roundInt(i, n int64) (int64, bool) {
	if n >= 0 {
		return i, true
	}
	if n < -18 {
		return 0, true
	}
	m := int64(1)
	for ; n < 0; n++ {
		m *= 10
	}
	q, r := i/m, i%m
	if r < 0 {
		q, r = q-1, r+m
	}
	if 2*r > m || (2*r == m && q%2 != 0) {
		q++
	}
	if q > math.MaxInt64/m || q < math.MinInt64/m {
		return 0, false
	}
	return q * m, true
}

// filterInt is Jinja's int: as gonja's, except that a boolean is 1 or 0
// (Python's int(True)); gonja's gives the default.
func filterPyInt(f exec.FilterFunction) exec.FilterFunction {
	return func(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
		if in.IsUndefined() { // int(undefined) raises, its default is for TypeError and ValueError
			return e.Raise(errors.New(in.UndefinedReason()))
		}
		if in.IsBool() {
			if in.Bool() {
				return exec.AsValue(int64(1))
			}
			return exec.AsValue(int64(0))
		}
		return f(e, in, params)
	}
}

// filterPySum is Jinja's sum(iterable, attribute=None, start=0): Python's +
// over the items (gonja's adds float64s, skips non-numbers, and turns 1.0
// into 1). A missing attribute is undefined, which cannot be added.
func filterPySum(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	p, err := exec.MethodArgs("sum", params, 0, 2, "attribute", "start")
	if err != nil {
		return raise(e, "filter sum: "+err.Error())
	}
	acc := exec.AsValue(int64(0))
	if p[1] != nil {
		acc = p[1]
	}
	if in.IsUndefined() { // Jinja's Undefined iterates as empty
		return acc
	}
	if !in.IsList() && !in.IsDict() && !in.IsString() {
		return raise(e, fmt.Sprintf("'%s' object is not iterable", exec.PyType(in)))
	}
	getter := newAttributeGetter(p[0], nil)
	var failure string
	var stop *exec.Value
	in.Iterate(func(i, _ int, item, _ *exec.Value) bool {
		if stop = e.Tick(i); stop != nil {
			return false
		}
		item, err := getter.get(item)
		if err == nil && item.IsUndefined() { // Jinja's Undefined refuses +
			err = errors.New(item.UndefinedReason())
		}
		if err != nil {
			failure = err.Error()
			return false
		}
		v, err := exec.PyArith("+", acc, item, false, e.Limits())
		if err != nil {
			failure = err.Error()
			return false
		}
		acc = exec.AsValue(v)
		return true
	}, func() {})
	if failure != "" {
		return raise(e, "filter sum: "+failure)
	}
	if stop != nil {
		return stop
	}
	return acc
}

// filterSelectChecked is gonja's select/reject/selectattr/rejectattr,
// except that an unknown test is an error, as in Jinja (gonja selects
// nothing).
func filterSelectChecked(name string, f exec.FilterFunction) exec.FilterFunction {
	testArg := 0
	if strings.HasSuffix(name, "attr") {
		testArg = 1
	}
	return func(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
		if in.IsError() {
			return in
		}
		if len(params.Args) > testArg {
			test := params.Args[testArg].String()
			if !params.Args[testArg].IsString() || !e.Environment.Tests.Exists(test) {
				return raise(e, fmt.Sprintf("filter %s: no test named '%s'", name, test))
			}
		}
		return f(e, in, params)
	}
}

// selectTest is the test select, reject, selectattr or rejectattr asks of
// an item; its error ends the rendering, as Jinja's exception does (PaV:
// gonja took it for false).
func selectTest(e *exec.Evaluator, name string, item *exec.Value, params *exec.VarArgs) (bool, *exec.Value) {
	out := e.ExecuteTestByName(name, item, params)
	if out.IsError() {
		return false, e.Raise(out)
	}
	return out.IsTrue(), nil
}

// testPySequence is Jinja's sequence test: anything with a length and items,
// so strings and mappings too (gonja's accepts only lists).
func testPySequence(_ *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) (bool, error) {
	if in.IsError() {
		return false, in.Interface().(error)
	}
	// undefined too: Jinja's Undefined has a length (0) and __getitem__
	return in.IsList() || in.IsString() || in.IsDict() || in.IsUndefined(), nil
}

// testPyFilter and testPyTest are Jinja's `filter` and `test` tests: whether a
// filter (test) of that name exists. Jinja looks the value up in a dict, so
// a list or a dict is Python's "unhashable type" (PaV).
func testPyFilter(e *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) (bool, error) {
	if err := hashable(e, in); err != nil {
		return false, err
	}
	return in.IsString() && e.Environment.Filters.Exists(in.String()), nil
}

func testPyTest(e *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) (bool, error) {
	if err := hashable(e, in); err != nil {
		return false, err
	}
	return in.IsString() && e.Environment.Tests.Exists(in.String()), nil
}

func hashable(e *exec.Evaluator, in *exec.Value) error {
	switch {
	case in.IsError():
		return in.Interface().(error)
	case exec.Unhashable(in) != "": // a tuple of hashable items is hashable
		err := fmt.Errorf("unhashable type: '%s'", exec.Unhashable(in))
		e.Raise(err)
		return err
	}
	return nil
}

// testOrder is Jinja's lt/le/gt/ge test: Python's comparison (gonja's
// compares only numbers, and is false for anything else). Its error is
// fatal: select and reject would otherwise take it for false.
func testOrder(op string) exec.TestFunction {
	return func(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) (bool, error) {
		if in.IsError() {
			return false, in.Interface().(error)
		}
		if len(params.Args) != 1 || len(params.KwArgs) != 0 {
			return false, fmt.Errorf("test %s takes exactly one argument", op)
		}
		v, err := exec.PyArith(op, in, params.Args[0], false, exec.Limits{})
		if err != nil {
			e.Raise(err)
			return false, err
		}
		return v.(bool), nil
	}
}

// filterPyString is Jinja's string filter: Python's str(), so that none
// inside a list or dict prints as None (gonja prints nothing).
func filterPyString(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if err := params.Take(); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	return exec.AsValue(softStr(in)) // PaV: undefined is ""
}

// filterPyFormat is Jinja's format filter: Python's `value % args` (or
// `value % kwargs` when keyword arguments are given).
func filterPyFormat(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if in.IsUndefined() { // soft_str(undefined) is ""
		in = exec.AsValue("")
	}
	var limits exec.Limits
	if e.Environment.Hooks != nil {
		limits = e.Environment.Hooks.Limits
	}
	var s string
	var err error
	if len(params.KwArgs) > 0 {
		if len(params.Args) > 0 {
			return raise(e, "format filter: can't handle positional and keyword arguments at the same time")
		}
		m := map[string]interface{}{}
		for k, v := range params.KwArgs {
			m[k] = v // a *Value keeps being Markup
		}
		s, err = exec.PyFormat(exec.PyStr(in), exec.AsValue(m), false, in.Safe, limits)
	} else {
		items := make([]interface{}, len(params.Args))
		for i, a := range params.Args {
			items[i] = a
		}
		s, err = exec.PyFormat(exec.PyStr(in), exec.AsValue(items), true, in.Safe, limits)
	}
	if err != nil {
		return raise(e, "format: "+err.Error())
	}
	if in.Safe { // soft_str keeps Markup, and Markup % args is Markup
		return exec.AsSafeValue(s)
	}
	return exec.AsValue(s)
}

// filterPyDefault is Jinja's default(value, default_value=”, boolean=false):
// it replaces an undefined (with boolean, any falsy) value but, unlike
// gonja's, keeps none and never hides an error.
func filterPyDefault(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	p, err := exec.MethodArgs("default", params, 0, 2, "default_value", "boolean")
	if err != nil {
		return raise(e, "filter default: "+err.Error())
	}
	def := exec.AsValue("")
	if p[0] != nil {
		def = p[0]
	}
	if in.IsUndefined() || (p[1] != nil && p[1].IsTrue() && !in.IsTrue()) {
		return def
	}
	return in
}

// testPyDefined, testPyUndefined and testPyNone tell undefined from none.
func testPyDefined(_ *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) (bool, error) {
	if in.IsError() {
		return false, in.Interface().(error)
	}
	return !in.IsUndefined(), nil
}

func testPyUndefined(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) (bool, error) {
	d, err := testPyDefined(e, in, params)
	return !d, err
}

func testPyNone(_ *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) (bool, error) {
	if in.IsError() {
		return false, in.Interface().(error)
	}
	return in.IsNil() && !in.IsUndefined(), nil
}

// testPyTrue and testPyFalse are Jinja's: the value is the boolean itself
// (gonja's asked whether it was truthy).
func testPyTrue(_ *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) (bool, error) {
	return in.IsBool() && in.Bool(), nil
}

func testPyFalse(_ *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) (bool, error) {
	return in.IsBool() && !in.Bool(), nil
}

// testPyEscaped is Jinja's escaped: the value is markup (safe, or escaped
// by a filter).
func testPyEscaped(_ *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) (bool, error) {
	if in.IsError() {
		return false, in.Interface().(error)
	}
	return in.Safe, nil
}

// filterPyWordwrap is Jinja's wordwrap(width=79, break_long_words=true,
// wrapstring=None, break_on_hyphens=true): each of the string's lines
// (Python's splitlines) wrapped by Python's textwrap.wrap (pyWrap), the
// lines joined by wrapstring. gonja's broke lines only between words and
// dropped all whitespace.
func filterPyWordwrap(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	p, err := exec.MethodArgs("wordwrap", params, 0, 4, "width", "break_long_words", "wrapstring", "break_on_hyphens")
	if err != nil {
		return raise(e, "filter wordwrap: "+err.Error())
	}
	if !in.IsString() {
		return raise(e, fmt.Sprintf("'%s' object has no attribute 'splitlines'", exec.PyType(in)))
	}
	w := textWrapper{width: 79, breakLongWords: p[1] == nil || p[1].IsTrue(), breakOnHyphens: p[3] == nil || p[3].IsTrue()}
	if p[0] != nil {
		if !exec.IsInt(p[0]) {
			return raise(e, "filter wordwrap: width must be an integer, not "+exec.PyType(p[0]))
		}
		w.width = int(max(min(exec.AsInt(p[0]), math.MaxInt32), math.MinInt32))
	}
	wrapstring := "\n"
	if p[2] != nil && !p[2].IsNil() {
		wrapstring = p[2].String()
	}
	var out strings.Builder
	for i, line := range pySplitlines(in.String()) {
		if i > 0 {
			out.WriteString(wrapstring)
		}
		first := true
		err := w.wrap([]rune(line), func(l string) {
			if !first {
				out.WriteString(wrapstring)
			}
			out.WriteString(l)
			first = false
		})
		if err != nil {
			return raise(e, err.Error())
		}
		if stop := e.Tick(i); stop != nil {
			return stop
		}
	}
	return exec.AsValue(out.String())
}

// pySplitlines is Python's str.splitlines().
func pySplitlines(s string) []string {
	var lines []string
	start := 0
	for i, r := range s {
		switch r {
		case '\n', '\r', '\v', '\f', '\x1c', '\x1d', '\x1e', '\u0085', '\u2028', '\u2029':
			if i < start { // the \n of \r\n
				continue
			}
			lines = append(lines, s[start:i])
			start = i + utf8.RuneLen(r)
			if r == '\r' && strings.HasPrefix(s[start:], "\n") {
				start++
			}
		}
	}
	if start < len(s) {
		lines = append(lines, s[start:])
	}
	return lines
}

// textWrapper is Python's textwrap.TextWrapper as Jinja's wordwrap sets it
// up (expand_tabs and replace_whitespace off, drop_whitespace on).
type textWrapper struct {
	width                          int
	breakLongWords, breakOnHyphens bool
}

// wrapSpace is textwrap's whitespace (ASCII only).
func wrapSpace(r rune) bool {
	return r == ' ' || r == '\t' || r == '\n' || r == '\v' || r == '\f' || r == '\r'
}

// pyWordChar is Python's \w; pyLetter its [^\d\W].
func pyWordChar(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) }
func pyLetter(r rune) bool   { return pyWordChar(r) && !unicode.IsDigit(r) }

// wordPunct is textwrap's word_punct, [\w!"'&.,?].
func wordPunct(r rune) bool { return pyWordChar(r) || strings.ContainsRune(`!"'&.,?`, r) }

// chunkEnd is the end of the chunk that starts at i, as TextWrapper._split
// splits text: runs of whitespace, and words, which break_on_hyphens also
// splits after the hyphens of hyphenated words and around em-dashes
// (wordsep_re, written out since Go's regexp has no lookaround).
func (w textWrapper) chunkEnd(text []rune, i int) int {
	at := func(i int) rune {
		if i < 0 || i >= len(text) {
			return -1
		}
		return text[i]
	}
	dashesThenWord := func(j int) bool { // -{2,}\w at j
		k := j
		for at(k) == '-' {
			k++
		}
		return k-j >= 2 && k < len(text) && pyWordChar(text[k])
	}
	j := i + 1
	switch {
	case wrapSpace(text[i]):
		for j < len(text) && wrapSpace(text[j]) {
			j++
		}
	case !w.breakOnHyphens:
		for j < len(text) && !wrapSpace(text[j]) {
			j++
		}
	case i > 0 && wordPunct(text[i-1]) && dashesThenWord(i): // an em-dash between words
		for at(j) == '-' {
			j++
		}
	default: // a word, up to a hyphen that breaks it, its end, or an em-dash
		for ; j < len(text) && !wrapSpace(text[j]); j++ {
			if text[j] == '-' && (pyLetter(at(j-2)) && pyLetter(at(j-1)) || pyLetter(at(j-3)) && at(j-2) == '-' && pyLetter(at(j-1))) &&
				pyLetter(at(j+1)) && (pyLetter(at(j+2)) || at(j+2) == '-' && pyLetter(at(j+3))) {
				return j + 1
			}
			if wordPunct(text[j-1]) && dashesThenWord(j) {
				return j
			}
		}
	}
	return j
}

// blank is Python's chunk.strip() == ”.
func blank(chunk []rune) bool {
	for _, r := range chunk {
		if !unicode.IsSpace(r) {
			return false
		}
	}
	return true
}

// wrap is TextWrapper.wrap (_wrap_chunks): the lines of one line of text.
// A line is always a run of text's chunks, so it is kept as text[start:end]
// and the chunks are walked with pos (where the current one starts, after
// _handle_long_word may have cut its head off) and end (where it ends).
func (w textWrapper) wrap(text []rune, line func(string)) error {
	if w.width <= 0 {
		return fmt.Errorf("invalid width %d (must be > 0)", w.width)
	}
	pos, end := 0, 0
	next := func() { // to the next chunk
		pos = end
		if end < len(text) {
			end = w.chunkEnd(text, end)
		}
	}
	next()
	lines := 0
	for pos < len(text) {
		if lines > 0 && blank(text[pos:end]) {
			next()
		}
		start, last, n := pos, pos, 0 // last: where the line's last chunk starts
		for pos < len(text) && n+end-pos <= w.width {
			n += end - pos
			last = pos
			next()
		}
		if pos < len(text) && end-pos > w.width { // _handle_long_word
			spaceLeft := w.width - n
			if w.breakLongWords {
				cut := spaceLeft
				if w.breakOnHyphens && end-pos > spaceLeft {
					// after the last hyphen that has something else before it
					chunk := text[pos : pos+spaceLeft]
					if h := lastIndex(chunk, '-'); h > 0 && slices.ContainsFunc(chunk[:h], func(r rune) bool { return r != '-' }) {
						cut = h + 1
					}
				}
				last, pos = pos, pos+cut
			} else if pos == start {
				last = pos
				next()
			}
		}
		stop := pos
		if stop > start && blank(text[last:stop]) {
			stop = last
		}
		if stop > start {
			line(string(text[start:stop]))
			lines++
		}
	}
	return nil
}

func lastIndex(s []rune, r rune) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == r {
			return i
		}
	}
	return -1
}

// filterPyItems is Jinja's items: a mapping's (key, value) pairs in Python's
// order (exec.PyKeys), as pairs a for loop unpacks; nothing for undefined.
func filterPyItems(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if len(params.Args) > 0 || len(params.KwArgs) > 0 {
		return raise(e, "filter items takes no arguments")
	}
	if in.IsUndefined() {
		return exec.AsValue([]any{})
	}
	pairs, ok := exec.PyPairs(in)
	if !ok {
		return raise(e, "Can only get item pairs from a mapping.")
	}
	out := make([]any, len(pairs))
	for i, kv := range pairs {
		out[i] = exec.Tuple{kv.Key, exec.Item(kv.Value)} // Markup stays Markup
	}
	return exec.AsValue(out)
}

// filterPyFloat is Jinja's float: Python's float() of a string, which
// ignores surrounding whitespace, else the default.
func filterPyFloat(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsUndefined() { // as int's
		return e.Raise(errors.New(in.UndefinedReason()))
	}
	if in.IsBool() { // float(True) is 1.0
		if in.IsTrue() {
			return exec.AsValue(1.0)
		}
		return exec.AsValue(0.0)
	}
	if in.IsString() {
		in = exec.AsValue(strings.TrimSpace(in.String()))
	}
	return filterFloat(e, in, params)
}

// pyIterable is in as a list, as Python's list() makes it (a mapping's
// keys, a string's characters, nothing for undefined), or the error of a
// value that does not iterate; a list is returned as it is.
func pyIterable(e *exec.Evaluator, in *exec.Value) *exec.Value {
	if in.IsList() {
		return in
	}
	return filterList(e, in, exec.NewVarArgs())
}

// filterPyStriptags is Jinja's striptags: comments and tags removed,
// whitespace collapsed, and then HTML entities unescaped.
func filterPyStriptags(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	out := filterStriptags(e, in, params)
	if !out.IsString() {
		return out
	}
	return exec.AsValue(pyHTMLUnescape(out.String()))
}

// pyWord is Python's \w+ (Unicode letters, digits, underscore).
var pyWord = regexp.MustCompile(`[\p{L}\p{N}_]+`)

// filterPyWordcount is Jinja's wordcount: the matches of \w+.
func filterPyWordcount(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if err := params.Take(); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	if in.IsUndefined() { // soft_str(Undefined) is ""
		return exec.AsValue(0)
	}
	return exec.AsValue(len(pyWord.FindAllStringIndex(exec.PyStr(in), -1)))
}

// filterPyMinMax is Jinja's min and max: the first smallest or largest
// item (compared by attribute, when given, but the item is returned),
// undefined for an empty sequence.
func filterPyMinMax(isMax bool) exec.FilterFunction {
	return func(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
		if in.IsError() {
			return in
		}
		p, err := exec.MethodArgs("min/max", params, 0, 2, "case_sensitive", "attribute")
		if err != nil {
			return raise(e, "filter min/max: "+err.Error())
		}
		caseSensitive := p[0] != nil && p[0].IsTrue()
		if in = pyIterable(e, in); in.IsError() { // PaV: max(5) is Python's TypeError
			return in
		}
		getter := newAttributeGetter(p[1], nil)
		var best, bestKey *exec.Value
		var failure error
		in.Iterate(func(_, _ int, item, _ *exec.Value) bool {
			key, err := getter.get(item)
			if err != nil {
				failure = err
				return false
			}
			if best == nil {
				best, bestKey = item, key
				return true
			}
			if _, err := exec.PyRichCompare("<", key, bestKey); err != nil { // an undefined key
				failure = err
				return false
			}
			c, err := exec.PyCompare(key.Interface(), bestKey.Interface(), caseSensitive)
			if err != nil {
				failure = err
				return false
			}
			if (isMax && c > 0) || (!isMax && c < 0) {
				best, bestKey = item, key
			}
			return true
		}, func() {})
		switch {
		case failure != nil:
			return raise(e, failure.Error())
		case best == nil:
			return exec.Undefined("No aggregated item, sequence was empty.")
		}
		return best
	}
}

// testPyCase is Jinja's `lower` or `upper` test: Python's str.islower or
// isupper (is) of str(value), for any value (PaV).
func testPyCase(is func(string) bool) exec.TestFunction {
	return func(_ *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) (bool, error) {
		return is(softStr(in)), nil
	}
}
