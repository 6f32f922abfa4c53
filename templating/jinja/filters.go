package jinja

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// filterDictSort is Jinja's dictsort(value, case_sensitive=false, by='key',
// reverse=false): the mapping's (key, value) pairs, sorted. gonja's returns
// pairs a for loop cannot unpack.
func filterDictSort(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	p, err := methodArgs("dictsort", params, 0, 3, "case_sensitive", "by", "reverse")
	if err != nil {
		return fatal(e, nil, "filter dictsort: "+err.Error())
	}
	m, ok := in.ToGoSimpleType(false).(map[string]interface{})
	if !in.IsDict() || !ok {
		return fatal(e, nil, "filter dictsort expects a mapping, got "+pyType(in))
	}
	caseSensitive := p[0] != nil && p[0].IsTrue()
	byValue := false
	if p[1] != nil {
		switch p[1].String() {
		case "key":
		case "value":
			byValue = true
		default:
			return fatal(e, nil, "filter dictsort: you can only sort by either 'key' or 'value'")
		}
	}
	reverse := p[2] != nil && p[2].IsTrue()
	pairs := make([][2]interface{}, 0, len(m))
	for k, v := range m {
		pairs = append(pairs, [2]interface{}{k, v})
	}
	idx := 0
	if byValue {
		idx = 1
	}
	var cmpErr error
	sort.SliceStable(pairs, func(i, j int) bool {
		c, err := pyCompare(pairs[i][idx], pairs[j][idx], caseSensitive)
		if err != nil && cmpErr == nil {
			cmpErr = err
		}
		if c == 0 && byValue { // equal values: Python keeps insertion order; we use the key
			c, _ = pyCompare(pairs[i][0], pairs[j][0], true)
		}
		if reverse {
			return c > 0
		}
		return c < 0
	})
	if cmpErr != nil {
		return fatal(e, nil, "filter dictsort: "+cmpErr.Error())
	}
	out := make([]interface{}, len(pairs))
	for i, kv := range pairs {
		out[i] = []interface{}{kv[0], kv[1]}
	}
	return exec.AsValue(out)
}

// pyCompare orders two JSON-like scalars as Python's < does (strings
// lower-cased unless caseSensitive); other mixes are an error.
func pyCompare(a, b interface{}, caseSensitive bool) (int, error) {
	va, vb := exec.AsValue(a), exec.AsValue(b)
	switch {
	case va.IsString() && vb.IsString():
		x, y := va.String(), vb.String()
		if !caseSensitive {
			x, y = strings.ToLower(x), strings.ToLower(y)
		}
		return strings.Compare(x, y), nil
	case isNum(va) && isNum(vb):
		if isInt(va) && isInt(vb) {
			x, y := asInt(va), asInt(vb)
			switch {
			case x < y:
				return -1, nil
			case x > y:
				return 1, nil
			}
			return 0, nil
		}
		x, y := asFloat(va), asFloat(vb)
		switch {
		case x < y:
			return -1, nil
		case x > y:
			return 1, nil
		}
		return 0, nil
	}
	return 0, fmt.Errorf("'<' not supported between instances of '%s' and '%s'", pyType(va), pyType(vb))
}

// filterURLEncode is Jinja's urlencode: a string (or other scalar) is quoted
// with only "/" left safe; a mapping or a list of pairs becomes a query
// string (mapping keys sorted, as Go maps have no order).
func filterURLEncode(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if len(params.Args) > 0 || len(params.KwArgs) > 0 {
		return fatal(e, nil, "filter urlencode takes no arguments")
	}
	switch {
	case in.IsDict():
		m, ok := in.ToGoSimpleType(false).(map[string]interface{})
		if !ok {
			return fatal(e, nil, "filter urlencode: unsupported mapping")
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = urlQuote(k, true) + "=" + urlQuote(pyStr(exec.AsValue(m[k])), true)
		}
		return exec.AsValue(strings.Join(parts, "&"))
	case in.IsList():
		parts := make([]string, in.Len())
		for i := range parts {
			kv := in.Index(i)
			if !kv.IsList() || kv.Len() != 2 {
				return fatal(e, nil, "filter urlencode: a list must hold (key, value) pairs")
			}
			parts[i] = urlQuote(pyStr(kv.Index(0)), true) + "=" + urlQuote(pyStr(kv.Index(1)), true)
		}
		return exec.AsValue(strings.Join(parts, "&"))
	case in.IsNil():
		return fatal(e, nil, "filter urlencode: value is undefined or none")
	}
	s, err := scalarString(in)
	if err != nil {
		return fatal(e, nil, "filter urlencode: value "+err.Error())
	}
	return exec.AsValue(urlQuote(s, false))
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

// filterRound is Jinja's round(value, precision=0, method='common'):
// Python's round() (half to even, an int stays an int) or floor/ceil scaled
// by 10**precision (always a float).
func filterRound(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	p, err := methodArgs("round", params, 0, 2, "precision", "method")
	if err != nil {
		return fatal(e, nil, "filter round: "+err.Error())
	}
	if !isNum(in) {
		return fatal(e, nil, "filter round expects a number, got "+pyType(in))
	}
	precision := int64(0)
	if p[0] != nil {
		if !isInt(p[0]) {
			return fatal(e, nil, "filter round: precision must be an integer")
		}
		precision = asInt(p[0])
	}
	if precision > 400 || precision < -400 {
		return fatal(e, nil, fmt.Sprintf("filter round: precision %d too large", precision))
	}
	method := "common"
	if p[1] != nil {
		method = p[1].String()
	}
	switch method {
	case "common":
		if isInt(in) {
			return exec.AsValue(roundInt(asInt(in), precision))
		}
		return exec.AsValue(roundFloat(in.Float(), precision))
	case "floor", "ceil":
		scale := math.Pow(10, float64(precision))
		f := math.Floor
		if method == "ceil" {
			f = math.Ceil
		}
		return exec.AsValue(f(asFloat(in)*scale) / scale)
	}
	return fatal(e, nil, "filter round: method must be common, ceil or floor")
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
func roundInt(i, n int64) int64 {
	if n >= 0 {
		return i
	}
	if n < -18 {
		return 0
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
	return q * m
}

// gonjaFilter returns gonja's own filter name, which a correction wraps.
func gonjaFilter(fs *exec.FilterSet, name string) exec.FilterFunction {
	f, ok := fs.Get(name)
	if !ok {
		panic("gonja lacks filter " + name)
	}
	return f
}

// filterInt is Jinja's int: as gonja's, except that a boolean is 1 or 0
// (Python's int(True)); gonja's gives the default.
func filterInt(fs *exec.FilterSet) exec.FilterFunction {
	f := gonjaFilter(fs, "int")
	return func(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
		if in.IsBool() {
			if in.Bool() {
				return exec.AsValue(int64(1))
			}
			return exec.AsValue(int64(0))
		}
		return f(e, in, params)
	}
}

// filterSum is Jinja's sum(iterable, attribute=None, start=0): Python's +
// over the items (gonja's adds float64s, skips non-numbers, and turns 1.0
// into 1). A missing attribute is undefined, which cannot be added.
func filterSum(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	p, err := methodArgs("sum", params, 0, 2, "attribute", "start")
	if err != nil {
		return fatal(e, nil, "filter sum: "+err.Error())
	}
	if !in.IsList() && !in.IsDict() && !in.IsString() {
		return fatal(e, nil, fmt.Sprintf("'%s' object is not iterable", pyType(in)))
	}
	acc := exec.AsValue(int64(0))
	if p[1] != nil {
		acc = p[1]
	}
	var failure string
	in.Iterate(func(_, _ int, item, _ *exec.Value) bool {
		if p[0] != nil && !p[0].IsNil() {
			for _, part := range strings.Split(p[0].String(), ".") {
				v, found := exec.AsValue(nil), false
				if item.IsDict() {
					v, found = item.Get(part)
				} else if i, err := strconv.Atoi(part); err == nil && item.IsList() && i >= 0 && i < item.Len() {
					v, found = item.Index(i), true
				}
				if !found {
					failure = fmt.Sprintf("'%s object' has no attribute '%s'", typeName(item), part)
					return false
				}
				item = v
			}
		}
		v, err := arith("+", acc, item, false)
		if err != nil {
			failure = err.Error()
			return false
		}
		acc = exec.AsValue(v)
		return true
	}, func() {})
	if failure != "" {
		return fatal(e, nil, "filter sum: "+failure)
	}
	return acc
}

// filterSortChecked is gonja's sort, except that sorting strings together
// with numbers is an error, as in Python (gonja orders them somehow).
func filterSortChecked(fs *exec.FilterSet) exec.FilterFunction {
	f := gonjaFilter(fs, "sort")
	return func(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
		if in.IsError() {
			return in
		}
		if _, hasAttr := params.KwArgs["attribute"]; !hasAttr && in.IsList() {
			var str, num *exec.Value
			for i := 0; i < in.Len(); i++ {
				switch v := in.Index(i); {
				case v.IsString():
					str = v
				case isNum(v):
					num = v
				}
			}
			if str != nil && num != nil {
				return fatal(e, nil, fmt.Sprintf("filter sort: '<' not supported between instances of 'str' and '%s'", pyType(num)))
			}
		}
		return f(e, in, params)
	}
}

// filterSelectChecked is gonja's select/reject/selectattr/rejectattr,
// except that an unknown test is an error, as in Jinja (gonja selects
// nothing).
func filterSelectChecked(name string, fs *exec.FilterSet) exec.FilterFunction {
	f := gonjaFilter(fs, name)
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
			if !params.Args[testArg].IsString() || strings.HasPrefix(test, "__pav") || !e.Environment.Tests.Exists(test) {
				return fatal(e, nil, fmt.Sprintf("filter %s: no test named '%s'", name, test))
			}
		}
		return f(e, in, params)
	}
}

// testSequence is Jinja's sequence test: anything with a length and items,
// so strings and mappings too (gonja's accepts only lists).
func testSequence(_ *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) (bool, error) {
	if in.IsError() {
		return false, in.Interface().(error)
	}
	return in.IsList() || in.IsString() || in.IsDict(), nil
}

// testFilter and testTest are Jinja's `filter` and `test` tests: whether a
// filter (test) of that name exists. PaV's internal ones do not count.
func testFilter(e *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) (bool, error) {
	if in.IsError() {
		return false, in.Interface().(error)
	}
	return in.IsString() && !internalFilters[in.String()] && e.Environment.Filters.Exists(in.String()), nil
}

func testTest(e *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) (bool, error) {
	if in.IsError() {
		return false, in.Interface().(error)
	}
	return in.IsString() && !strings.HasPrefix(in.String(), "__pav") && e.Environment.Tests.Exists(in.String()), nil
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
		v, err := arith(op, in, params.Args[0], false)
		if err != nil {
			fatal(e, nil, err.Error())
			return false, err
		}
		return v.(bool), nil
	}
}
