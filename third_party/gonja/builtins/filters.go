// Package builtins provides built-in filters, tests, control structures, and global functions.
package builtins

import (
	stdjson "encoding/json"
	"fmt"
	"math"
	"math/big"
	"math/rand"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	json "github.com/json-iterator/go"
	"github.com/pkg/errors"

	"github.com/nikolalohinski/gonja/v2/builtins/methods/pystring"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/utils"
)

// Filters export all builtin filters
var Filters = exec.NewFilterSet(map[string]exec.FilterFunction{
	"abs":            filterAbs,
	"attr":           filterAttr,
	"batch":          filterBatch,
	"capitalize":     filterCapitalize,
	"center":         filterCenter,
	"default":        filterDefault,
	"d":              filterDefault,
	"dictsort":       filterDictSort,
	"e":              filterEscape,
	"escape":         filterEscape,
	"filesizeformat": filterFileSize,
	"first":          filterFirst,
	"float":          filterFloat,
	"forceescape":    filterForceEscape,
	"format":         filterFormat,
	"groupby":        filterGroupBy,
	"indent":         filterIndent,
	"int":            filterInteger,
	"join":           filterJoin,
	"items":          filterItems,
	"last":           filterLast,
	"length":         filterLength,
	"count":          filterLength,
	"list":           filterList,
	"lower":          filterLower,
	"map":            filterMap,
	"max":            filterPyMinMax(true),
	"min":            filterPyMinMax(false),
	"pprint":         filterPPrint,
	"random":         filterRandom,
	"rejectattr":     filterRejectAttr,
	"reject":         filterReject,
	"replace":        filterReplace,
	"reverse":        filterReverse,
	"round":          filterRound,
	"safe":           filterSafe,
	"selectattr":     filterSelectAttr,
	"select":         filterSelect,
	"slice":          filterSlice,
	"sort":           filterSort,
	"string":         filterString,
	"striptags":      filterStriptags,
	"sum":            filterPySum,
	"title":          filterTitle,
	"tojson":         filterToJSON,
	"trim":           filterTrim,
	"truncate":       filterTruncate,
	"unique":         filterUnique,
	"upper":          filterUpper,
	"urlencode":      filterUrlencode,
	"urlize":         filterUrlize,
	"wordcount":      filterWordcount,
	"wordwrap":       filterWordwrap,
	"xmlattr":        filterXMLAttr,
})

func filterAbs(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if err := params.Take(); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	if in.IsInteger() {
		asInt := in.Integer()
		if asInt == math.MinInt64 {
			return e.Raise(exec.ErrOverflow)
		}
		if asInt < 0 {
			return exec.AsValue(-asInt)
		}
		return in
	} else if in.IsFloat() {
		return exec.AsValue(math.Abs(in.Float()))
	} else if in.IsBool() { // PaV: Python's abs(True) is 1
		return exec.AsValue(exec.AsInt(in))
	}
	// PaV: Python's TypeError (upstream: the abs of the value as a float)
	return e.Raise(fmt.Errorf("bad operand type for abs(): '%s'", exec.PyType(in)))
}

func filterAttr(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	var name string
	if err := params.Take(
		exec.PositionalArgument("name", nil, takeStringArgument(&name)),
	); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	if in.IsUndefined() { // PaV: Jinja's undefined fails on any attribute
		return e.Raise(errors.New(in.UndefinedReason()))
	}
	value, found := in.GetAttribute(name)
	if (!found || in.IsDict()) && e.HasMethod(in, name) { // PaV: a method is a value
		return exec.AsValue(exec.NewBoundMethod(e, in, name))
	}
	if !found || in.IsDict() { // PaV: Jinja's attr reads no item of a dict
		return exec.Undefined(fmt.Sprintf("'%s object' has no attribute '%s'", exec.TypeName(in), name))
	}
	return value
}

func filterBatch(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	var (
		lineCount int
		fillWith  *exec.Value
	)
	if err := params.Take(
		exec.PositionalArgument("linecount", nil, takeIntArgument(&lineCount)),
		exec.KeywordArgument("fill_with", exec.AsValue(nil), takeValueArgument(&fillWith)),
	); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	if in = pyIterable(e, in); in.IsError() {
		return in
	}
	out := make([]any, 0)
	var row []any
	in.Iterate(func(idx, count int, key, value *exec.Value) bool {
		if math.Mod(float64(idx), float64(lineCount)) == 0 {
			if row != nil {
				out = append(out, exec.AsValue(row).Interface())
			}
			row = make([]any, 0)
		}
		row = append(row, exec.Item(key))
		return true
	}, func() {})
	if len(row) > 0 {
		if !fillWith.IsNil() {
			for len(row) < lineCount {
				row = append(row, exec.Item(fillWith))
			}
		}
		out = append(out, exec.AsValue(row).Interface())
	}
	return exec.AsValue(out)
}

func filterCapitalize(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if err := params.Take(); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}

	if in.IsUndefined() { // PaV: soft_str(undefined) is ""
		return exec.AsValue("")
	}
	if !in.IsString() { // PaV: Jinja capitalizes str() of anything (upstream: the value)
		in = exec.AsValue(exec.PyStr(in))
	}

	if in.Len() <= 0 {
		return exec.AsValue("")
	}
	return exec.AsValue(pystring.Capitalize(in.String()))
}

func filterCenter(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	var width int
	if err := params.Take(
		exec.PositionalArgument("width", exec.AsValue(80), takeIntArgument(&width)), // PaV: Jinja's default
	); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	if !in.IsString() && !in.IsUndefined() { // PaV: Python's str() of it
		in = exec.AsValue(exec.PyStr(in))
	}
	if width <= in.Len() {
		return in
	}
	return exec.AsValue(exec.PyPad("center", in.String(), width, " "))
}

func sortByKey(in *exec.Value, caseSensitive bool, reverse bool) []tupleValue {
	items := in.Items()
	sort.SliceStable(items, func(i, j int) bool {
		comparison := compareValues(items[i].Key, items[j].Key, caseSensitive)
		if reverse {
			return comparison > 0
		}
		return comparison < 0
	})

	out := make([]tupleValue, 0, len(items))
	for _, item := range items {
		out = append(out, tupleValue{item.Key.Interface(), item.Value.Interface()})
	}
	return out
}

func sortByValue(in *exec.Value, caseSensitive, reverse bool) []tupleValue {
	items := in.Items()
	sort.SliceStable(items, func(i, j int) bool {
		comparison := compareValues(items[i].Value, items[j].Value, caseSensitive)
		if reverse {
			return comparison > 0
		}
		return comparison < 0
	})

	out := make([]tupleValue, 0, len(items))
	for _, item := range items {
		out = append(out, tupleValue{item.Key.Interface(), item.Value.Interface()})
	}
	return out
}

func filterDictSort(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	var (
		caseSensitive bool
		by            string
		reverse       bool
	)
	if err := params.Take(
		exec.KeywordArgument("case_sensitive", exec.AsValue(false), takeBoolArgument(&caseSensitive)),
		exec.KeywordArgument("by", exec.AsValue("key"), takeStringArgument(&by)),
		exec.KeywordArgument("reverse", exec.AsValue(false), takeBoolArgument(&reverse)),
	); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}

	switch by {
	case "key":
		return exec.AsValue(sortByKey(in, caseSensitive, reverse))
	case "value":
		return exec.AsValue(sortByValue(in, caseSensitive, reverse))
	default:
		return exec.AsValue(errors.New(`by should be either 'key' or 'value`))
	}
}

func filterEscape(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if err := params.Take(); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	if in.Safe {
		return in
	}
	return exec.AsSafeValue(escapeFilterValue(in)) // PaV: markupsafe's escape(str(value)), none is "None"
}

var (
	bytesPrefixes  = []string{"kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"}
	binaryPrefixes = []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"}
)

func filterFileSize(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	var binary bool
	if err := params.Take(
		exec.KeywordArgument("binary", exec.AsValue(false), takeBoolArgument(&binary)),
	); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	bytes, err := pyFloat(in) // PaV: Jinja's float(value) (upstream: 0 for anything else)
	if err != nil {
		return e.Raise(err)
	}
	var base float64
	var prefixes []string
	if binary {
		base = 1024.0
		prefixes = binaryPrefixes
	} else {
		base = 1000.0
		prefixes = bytesPrefixes
	}
	if bytes == 1.0 {
		return exec.AsValue("1 Byte")
	} else if bytes < base {
		if math.IsInf(bytes, 0) || math.IsNaN(bytes) { // PaV: Jinja's int(bytes)
			return e.Raise(fmt.Errorf("cannot convert float %s to integer", map[bool]string{true: "NaN", false: "infinity"}[math.IsNaN(bytes)]))
		}
		return exec.AsValue(pyFixed(math.Trunc(bytes)+0, 0) + " Bytes") // +0: int(-0.5) is 0
	} else {
		var i int
		var unit float64
		var prefix string
		for i, prefix = range prefixes {
			unit = math.Pow(base, float64(i+2))
			if bytes < unit {
				return exec.AsValue(pyFixed(base*bytes/unit, 1) + " " + prefix)
			}
		}
		return exec.AsValue(pyFixed(base*bytes/unit, 1) + " " + prefix)
	}
}

func filterFirst(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if err := params.Take(); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	if in.IsBool() || in.IsNumber() || in.IsNil() && !in.IsUndefined() { // PaV: Python's TypeError
		return e.Raise(fmt.Errorf("'%s' object is not iterable", exec.PyTypeName(in)))
	}
	if in.CanSlice() && in.Len() > 0 {
		return in.Index(0)
	}
	if in.IsDict() {
		var first *exec.Value
		in.Iterate(func(idx, count int, key, value *exec.Value) bool {
			first = key
			return false
		}, func() {})
		if first != nil {
			return first
		}
	}
	return exec.Undefined("No first item, sequence was empty.") // PaV: as Jinja
}

func filterFloat(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	var defaultValue *exec.Value
	if err := params.Take(
		exec.KeywordArgument("default", exec.AsValue(0.0), takeValueArgument(&defaultValue)),
	); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	if in.IsNil() {
		return defaultValue
	}
	if in.IsFloat() || in.IsInteger() {
		return exec.AsValue(in.Float())
	}
	if parsed, err := strconv.ParseFloat(in.String(), 64); err == nil {
		return exec.AsValue(parsed)
	}
	return defaultValue
}

func filterForceEscape(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if err := params.Take(); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	return exec.AsSafeValue(utils.Escape(softStr(in))) // PaV: escape(str(value)): 'None' for none, '' for undefined
}

func filterFormat(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	args := []any{}
	for _, arg := range params.Args {
		args = append(args, arg.Interface())
	}
	return exec.AsValue(fmt.Sprintf(in.String(), args...))
}

func filterGroupBy(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	var (
		attribute     *exec.Value
		defaultValue  *exec.Value
		caseSensitive bool
	)
	if err := params.Take(
		exec.PositionalArgument("attribute", nil, takeValueArgument(&attribute)),
		exec.KeywordArgument("default", exec.AsValue(nil), takeValueArgument(&defaultValue)),
		exec.KeywordArgument("case_sensitive", exec.AsValue(false), takeBoolArgument(&caseSensitive)),
	); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}

	// PaV: as Jinja, sorted by the keys, which must order (an undefined
	// does not), and grouped by equal keys; a case-insensitive group's key
	// is its first item's
	type keyed struct{ item, key, output *exec.Value }
	getter := newAttributeGetter(attribute, defaultValue)
	var items []keyed
	var failure error
	in.Iterate(func(idx, count int, item, value *exec.Value) bool {
		key, err := getter.get(item)
		if err != nil {
			failure = err
			return false
		}
		items = append(items, keyed{item, key, key})
		if !caseSensitive {
			items[len(items)-1].key = ignoreCase(key)
		}
		return true
	}, func() {})
	if failure != nil {
		return e.Raise(failure)
	}
	if failed := pySort(e, items, func(x, y keyed) (bool, error) {
		return exec.PyRichCompare("<", x.key, y.key)
	}); failed != nil {
		return failed
	}

	out := make([]groupTupleValue, 0)
	for i, item := range items {
		if i > 0 && pyEqual(items[i-1].key, item.key) {
			last := out[len(out)-1]
			last[1] = append(last[1].([]any), exec.Item(item.item))
			continue
		}
		out = append(out, groupTupleValue{exec.Item(item.output), []any{exec.Item(item.item)}})
	}
	return exec.AsValue(out)
}

func filterIndent(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	var (
		indent string
		first  bool
		blank  bool
	)
	if err := params.Take(
		exec.KeywordArgument("width", exec.AsValue(4), func(v *exec.Value) error {
			switch {
			case v.IsInteger():
				width := v.Integer()
				if width < 0 {
					indent = ""
				} else {
					indent = strings.Repeat(" ", width)
				}
			case v.IsString():
				indent = v.String()
			default:
				return fmt.Errorf("%s is neither a string nor an integer", v.String())
			}
			return nil
		}),
		exec.KeywordArgument("first", exec.AsValue(false), exec.BoolArgument(&first)),
		exec.KeywordArgument("blank", exec.AsValue(false), exec.BoolArgument(&blank)),
	); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	if !in.IsString() {
		return exec.AsValue(exec.ErrInvalidCall(fmt.Errorf("%s is not a string", in.String())))
	}
	lines := strings.Split(in.String(), "\n")
	for idx, line := range lines {
		if idx == 0 {
			if first {
				lines[idx] = indent + line
			}
			continue
		}
		if line == "" && !blank {
			continue
		}
		lines[idx] = indent + line
	}
	out := strings.Join(lines, "\n")
	if in.Safe {
		return exec.AsSafeValue(out)
	}
	return exec.AsValue(out)
}

func filterInteger(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	var (
		defaultValue *exec.Value
		base         int
	)
	if err := params.Take(
		exec.KeywordArgument("default", exec.AsValue(0), takeValueArgument(&defaultValue)),
		exec.KeywordArgument("base", exec.AsValue(10), takeIntArgument(&base)),
	); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}

	switch {
	case in.IsNil():
		return defaultValue
	case in.IsInteger():
		return exec.AsValue(in.Interface())
	case in.IsFloat():
		return floatToInt(e, in.Float())
	}

	if converted, ok := in.Interface().(interface{ Int() int }); ok {
		return exec.AsValue(converted.Int())
	}

	raw := strings.TrimSpace(in.String())
	if raw == "" {
		return defaultValue
	}

	sign := "" // PaV: Python's int() takes a sign before the base's prefix
	if raw[0] == '-' || raw[0] == '+' {
		sign, raw = raw[:1], raw[1:]
	}
	prefixed := true
	switch {
	case base == 16 && strings.HasPrefix(strings.ToLower(raw), "0x"):
		raw = raw[2:]
	case base == 8 && strings.HasPrefix(strings.ToLower(raw), "0o"):
		raw = raw[2:]
	case base == 2 && strings.HasPrefix(strings.ToLower(raw), "0b"):
		raw = raw[2:]
	default:
		prefixed = false
	}
	// PaV: Python's int() takes single underscores between digits, and one
	// after a base prefix, in any base ('c_d' in base 16); Go's only in base 0
	if base != 0 && strings.Contains(raw, "_") {
		body := raw
		if prefixed {
			body = strings.TrimPrefix(body, "_")
		}
		if body != "" && body[0] != '_' && body[len(body)-1] != '_' && !strings.Contains(body, "__") {
			raw = strings.ReplaceAll(body, "_", "")
		}
	}
	// PaV: Python's base 0 refuses a leading zero ('012'), which Go's reads
	// as octal; Jinja then takes int(float(s))
	leadingZero := base == 0 && len(raw) > 1 && raw[0] == '0' && !strings.ContainsAny(raw[1:2], "xXoObB") && strings.Trim(raw, "0_") != ""
	raw = sign + raw

	if parsed, ok := new(big.Int).SetString(raw, base); ok && !leadingZero {
		if parsed.IsInt64() {
			return exec.AsValue(int(parsed.Int64()))
		}
		return e.Raise(exec.ErrOverflow) // PaV: not a big.Int no operator takes
	}

	if parsed, err := strconv.ParseFloat(raw, 64); err == nil && !math.IsNaN(parsed) {
		return floatToInt(e, parsed)
	}

	return defaultValue
}

func filterJoin(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	var (
		d         *exec.Value
		attribute *exec.Value
	)
	if err := params.Take(
		exec.KeywordArgument("d", exec.AsValue(""), takeValueArgument(&d)),
		exec.KeywordArgument("attribute", exec.AsValue(nil), takeValueArgument(&attribute)),
	); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	if in.IsBool() || in.IsNumber() || in.IsNil() && !in.IsUndefined() {
		// PaV: as Python's str.join (upstream: the value itself)
		return e.Raise(fmt.Errorf("'%s' object is not iterable", exec.PyTypeName(in)))
	}
	if in.IsUndefined() { // PaV: iterated, Jinja's undefined is empty
		return exec.AsValue("")
	}
	if !in.IsIterable() {
		return in
	}
	delimiter := stringifyFilterValue(d)
	if e.Config.AutoEscape && !d.Safe {
		delimiter = escapeFilterValue(d)
	}

	parts := make([]string, 0)
	size := 0
	getter := newAttributeGetter(attribute, nil)
	var failure error
	var tooLong *exec.Value
	in.Iterate(func(idx, count int, key, value *exec.Value) bool {
		item, err := getter.get(key)
		if err != nil {
			failure = err
			return false
		}
		if e.Config.AutoEscape {
			if item.Safe {
				parts = append(parts, stringifyFilterValue(item))
			} else {
				parts = append(parts, escapeFilterValue(item))
			}
		} else {
			parts = append(parts, stringifyFilterValue(item))
		}
		size += len(parts[len(parts)-1]) + len(delimiter)
		tooLong = pastStringLimit(e, "join", size)
		return tooLong == nil
	}, func() {})
	if failure != nil {
		return e.Raise(failure)
	}
	if tooLong != nil {
		return tooLong
	}

	joined := strings.Join(parts, delimiter)
	if e.Config.AutoEscape {
		return exec.AsSafeValue(joined)
	}
	return exec.AsValue(joined)
}

func filterLast(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if err := params.Take(); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	if in.IsBool() || in.IsNumber() || in.IsNil() && !in.IsUndefined() { // PaV: Python's TypeError
		return e.Raise(fmt.Errorf("'%s' object is not reversible", exec.PyTypeName(in)))
	}
	if in.CanSlice() && in.Len() > 0 {
		last := in.Index(in.Len() - 1)
		if in.Safe && in.IsString() { // PaV: Jinja's reversed() takes Markup's own items, Markup
			return exec.AsSafeValue(last.String())
		}
		return last
	}
	if in.IsDict() {
		var last *exec.Value
		in.Iterate(func(idx, count int, key, value *exec.Value) bool {
			last = key
			return true
		}, func() {})
		if last != nil {
			return last
		}
	}
	return exec.Undefined("No last item, sequence was empty.") // PaV: as Jinja
}

func filterLength(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if err := params.Take(); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	_, method := in.Interface().(*exec.BoundMethod)
	if in.IsBool() || in.IsNumber() || in.IsNil() && !in.IsUndefined() || method {
		// PaV: as Python's len() (upstream counted 0)
		return exec.AsValue(fmt.Errorf("object of type '%s' has no len()", exec.PyTypeName(in)))
	}
	return exec.AsValue(in.Len())
}

// PaV: emptyOrNotIterable is the answer of select, reject, selectattr,
// rejectattr and map for a bool or a number, nil for what they iterate:
// Jinja's filters test the sequence's truth first, so a false one is empty
// and a true one fails as Python's iter() (upstream: iterated as empty).
func emptyOrNotIterable(e *exec.Evaluator, in *exec.Value) *exec.Value {
	if !in.IsBool() && !in.IsNumber() {
		return nil
	}
	if !in.IsTrue() {
		return exec.AsValue([]any{})
	}
	return e.Raise(fmt.Errorf("'%s' object is not iterable", exec.PyTypeName(in)))
}

func filterItems(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if err := params.Take(); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	if in.IsNil() {
		return exec.AsValue([]tupleValue{})
	}
	if in.IsList() {
		return in
	}
	if !in.IsDict() {
		return exec.AsValue(errors.New("items requires a mapping"))
	}
	items := in.Items()
	out := make([]tupleValue, 0, len(items))
	for _, item := range items {
		out = append(out, tupleValue{item.Key.Interface(), item.Value.Interface()})
	}
	return exec.AsValue(out)
}

func filterList(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if err := params.Take(); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	if in.IsString() {
		out := []string{}
		for _, r := range in.String() {
			if stop := e.Tick(len(out)); stop != nil {
				return stop
			}
			out = append(out, string(r))
		}
		return exec.AsValue(out)
	}
	if in.IsBool() || in.IsNumber() || in.IsNil() && !in.IsUndefined() {
		// PaV: as Python's list() (upstream made an empty list)
		return exec.AsValue(fmt.Errorf("'%s' object is not iterable", exec.PyTypeName(in)))
	}
	out := make([]any, 0)
	var stop *exec.Value
	in.Iterate(func(idx, count int, key, value *exec.Value) bool {
		out = append(out, exec.Item(key))
		stop = e.Tick(idx)
		return stop == nil
	}, func() {})
	if stop != nil {
		return stop
	}
	return exec.AsValue(out)
}

func filterLower(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if err := params.Take(); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	return exec.AsValue(exec.PyLower(softStr(in)))
}

func filterMap(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if out := emptyOrNotIterable(e, in); out != nil {
		return out
	}
	if in.IsNil() {
		return exec.AsValue([]any{})
	}

	filterName := ""
	filterArgs := exec.NewVarArgs()
	attribute := exec.AsValue(nil)
	defaultVal := exec.AsValue(nil)

	if len(params.Args) > 0 {
		filterName = params.Args[0].String()
		filterArgs.Args = append(filterArgs.Args, params.Args[1:]...)
		filterArgs.KwArgs = params.KwArgs
	} else {
		if attributeArg, ok := params.KwArgs["attribute"]; ok {
			attribute = attributeArg
		}
		if defaultArg, ok := params.KwArgs["default"]; ok {
			defaultVal = defaultArg
		}
		if len(params.KwArgs) > 2 {
			return exec.AsValue(errors.New("Wrong signature for 'map'"))
		}
	}

	out := make([]any, 0)
	getter := newAttributeGetter(attribute, defaultVal)
	var failure error
	in.Iterate(func(idx, count int, key, value *exec.Value) bool {
		val, err := getter.get(key)
		if err != nil {
			failure = err
			return false
		}
		if filterName != "" {
			val = e.ExecuteFilterByName(filterName, val, filterArgs)
		}
		out = append(out, exec.Item(val))
		return true
	}, func() {})
	if failure != nil {
		return e.Raise(failure)
	}
	return exec.AsValue(out)
}

func filterPPrint(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	var verbose bool
	if err := params.Take(
		exec.KeywordArgument("verbose", exec.AsValue(false), takeBoolArgument(&verbose)),
	); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	b, err := json.MarshalIndent(in.Interface(), "", "  ")
	if err != nil {
		return exec.AsValue(errors.Wrapf(err, `Unable to pretty print '%s'`, in.String()))
	}
	return exec.AsValue(string(b)) // PaV: a str, as Jinja's pprint
}

func filterRandom(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if err := params.Take(); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	if !in.CanSlice() || in.Len() <= 0 {
		return in
	}
	i := rand.Intn(in.Len())
	return in.Index(i)
}

func filterReject(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if out := emptyOrNotIterable(e, in); out != nil {
		return out
	}
	var test func(*exec.Value) (bool, *exec.Value)
	if len(params.Args) == 0 {
		// Reject truthy value
		test = func(in *exec.Value) (bool, *exec.Value) {
			return in.IsTrue(), nil
		}
	} else {
		name := params.First().String()
		testParams := &exec.VarArgs{
			Args:   params.Args[1:],
			KwArgs: params.KwArgs,
		}
		test = func(in *exec.Value) (bool, *exec.Value) {
			return selectTest(e, name, in, testParams)
		}
	}

	out := make([]any, 0)
	var failed *exec.Value
	in.Iterate(func(idx, count int, key, value *exec.Value) bool {
		matched, err := test(key)
		if err != nil {
			failed = err
			return false
		}
		if !matched {
			out = append(out, exec.Item(key))
		}
		return true
	}, func() {})
	if failed != nil {
		return failed
	}
	return exec.AsValue(out)
}

func filterRejectAttr(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if out := emptyOrNotIterable(e, in); out != nil {
		return out
	}
	if len(params.Args) < 1 {
		return exec.AsValue(errors.New("Wrong signature for 'rejectattr', expect at least an attribute name as argument"))
	}
	attribute := params.First()
	name := ""
	testArgs := []*exec.Value{}
	if len(params.Args) > 2 {
		testArgs = params.Args[2:]
	}
	testParams := &exec.VarArgs{Args: testArgs, KwArgs: params.KwArgs}
	if len(params.Args) > 1 {
		name = params.Args[1].String()
	}

	out := make([]any, 0)
	getter := newAttributeGetter(attribute, nil)
	var failed *exec.Value
	in.Iterate(func(idx, count int, key, value *exec.Value) bool {
		item := key
		if value != nil {
			item = value
		}
		attr, err := getter.get(item)
		if err != nil {
			failed = e.Raise(err)
			return false
		}
		matched := attr.IsTrue()
		if name != "" {
			var err *exec.Value
			if matched, err = selectTest(e, name, attr, testParams); err != nil {
				failed = err
				return false
			}
		}
		if !matched {
			out = append(out, exec.Item(item))
		}
		return true
	}, func() {})
	if failed != nil {
		return failed
	}
	return exec.AsValue(out)
}

func filterReplace(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	var (
		oldV, newV *exec.Value
		count      *exec.Value
	)
	if err := params.Take(
		exec.PositionalArgument("old", nil, takeValueArgument(&oldV)),
		exec.PositionalArgument("new", nil, takeValueArgument(&newV)),
		exec.KeywordArgument("count", exec.AsValue(nil), takeValueArgument(&count)),
	); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	// PaV: Jinja's do_replace: str() of the value and of both arguments
	// (none is "None"). With autoescape it replaces in Markup (escaping the
	// arguments, as Markup.replace does) when the value is Markup, or when
	// an argument is and the value is escaped first.
	s, old, new := stringifyFilterValue(in), stringifyFilterValue(oldV), stringifyFilterValue(newV)
	markup := false
	if e.Config.AutoEscape {
		if oldV.Safe || newV.Safe && !in.Safe {
			s, markup = escapedString(in, s), true
		} else {
			markup = in.Safe
		}
		if markup {
			old, new = escapedString(oldV, old), escapedString(newV, new)
		}
	}
	args := []*exec.Value{exec.AsValue(old), exec.AsValue(new)}
	if !count.IsNil() {
		args = append(args, count)
	}
	// PaV: str.replace of the environment, which may bound its result.
	replace, ok := e.Environment.Methods.Str.Get("replace")
	if !ok {
		return e.Raise(fmt.Errorf("str has no replace method"))
	}
	out, err := replace(s, in, &exec.VarArgs{Args: args, KwArgs: map[string]*exec.Value{}})
	if err != nil {
		return e.Raise(err)
	}
	if markup {
		return exec.AsSafeValue(out)
	}
	return exec.AsValue(out)
}

// escapedString is markupsafe's escape of v, whose str() is s: s as it is
// if v is Markup, else escaped (PaV).
func escapedString(v *exec.Value, s string) string {
	if v.Safe {
		return s
	}
	return utils.Escape(s)
}

func filterReverse(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if err := params.Take(); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	if in.IsNumber() || in.IsBool() || in.IsNil() && !in.IsUndefined() { // PaV: Jinja's FilterArgumentError
		return exec.AsValue(fmt.Errorf("reverse of a %s (argument must be iterable)", exec.TypeName(in)))
	}
	if in.IsString() {
		var out strings.Builder
		in.IterateOrder(func(idx, count int, key, value *exec.Value) bool {
			out.WriteString(key.String())
			return true
		}, func() {}, true, false, false)
		return exec.AsValue(out.String())
	}
	if in.IsList() { // PaV: item by item, interruptible
		out := make([]any, 0, in.Len())
		for i := in.Len() - 1; i >= 0; i-- {
			if stop := e.Tick(i); stop != nil {
				return stop
			}
			out = append(out, exec.Item(in.Index(i)))
		}
		return exec.AsValue(out)
	}
	out := make([]any, 0)
	// PaV: a list is reversed as it is (upstream sorted it first), and so
	// are a mapping's keys, as Python's reversed(dict)
	in.IterateOrder(func(idx, count int, key, value *exec.Value) bool {
		out = append(out, exec.Item(key))
		return true
	}, func() {}, true, false, false)
	return exec.AsValue(out)
}

func filterRound(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	var (
		precision int
		method    string
	)
	if err := params.Take(
		exec.KeywordArgument("precision", exec.AsValue(0), takeIntArgument(&precision)),
		exec.KeywordArgument("method", exec.AsValue("common"), takeStringArgument(&method)),
	); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	var op func(float64) float64
	switch method {
	case "common":
		op = math.Round
	case "floor":
		op = math.Floor
	case "ceil":
		op = math.Ceil
	default:
		return exec.AsValue(errors.Errorf(`Unknown method '%s', mush be one of 'common, 'floor', 'ceil`, method))
	}
	value := in.Float()
	factor := math.Pow(10, float64(precision))
	value = op(value*factor) / factor
	return exec.AsValue(value)
}

func filterSafe(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if err := params.Take(); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	if !in.IsString() { // PaV: Markup(value) is the string of any value
		return exec.AsSafeValue(softStr(in))
	}
	in.Safe = true
	return in // nothing to do here, just to keep track of the safe application
}

func filterSelect(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if out := emptyOrNotIterable(e, in); out != nil {
		return out
	}
	var test func(*exec.Value) (bool, *exec.Value)
	if len(params.Args) == 0 {
		// Reject truthy value
		test = func(in *exec.Value) (bool, *exec.Value) {
			return in.IsTrue(), nil
		}
	} else {
		name := params.First().String()
		testParams := &exec.VarArgs{
			Args:   params.Args[1:],
			KwArgs: params.KwArgs,
		}
		test = func(in *exec.Value) (bool, *exec.Value) {
			return selectTest(e, name, in, testParams)
		}
	}

	out := make([]any, 0)
	var failed *exec.Value
	in.Iterate(func(idx, count int, key, value *exec.Value) bool {
		matched, err := test(key)
		if err != nil {
			failed = err
			return false
		}
		if matched {
			out = append(out, exec.Item(key))
		}
		return true
	}, func() {})
	if failed != nil {
		return failed
	}
	return exec.AsValue(out)
}

func filterSlice(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	var (
		slices   int
		fillWith any
	)
	if err := params.Take(
		exec.PositionalArgument("slices", nil, exec.IntArgument(&slices)),
		exec.KeywordArgument("fill_with", exec.AsValue(nil), exec.AnyArgument(&fillWith)),
	); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	if slices < 1 {
		return exec.AsValue(exec.ErrInvalidCall(fmt.Errorf("slices argument %d must be > 0", slices)))
	}
	if in = pyIterable(e, in); in.IsError() { // PaV: list(value), as Jinja
		return in
	}
	seq := make([]any, 0, in.Len())
	in.Iterate(func(index, _ int, value, _ *exec.Value) bool {
		seq = append(seq, exec.Item(value))
		return true
	}, func() {})

	itemsPerSlice := len(seq) / slices
	slicesWithExtra := len(seq) % slices
	offset := 0
	output := make([]any, 0, slices)
	for sliceNumber := 0; sliceNumber < slices; sliceNumber++ {
		start := offset + sliceNumber*itemsPerSlice
		if sliceNumber < slicesWithExtra {
			offset++
		}
		end := offset + (sliceNumber+1)*itemsPerSlice
		column := append([]any{}, seq[start:end]...)
		if fillWith != nil && sliceNumber >= slicesWithExtra {
			column = append(column, fillWith)
		}
		output = append(output, column)
	}
	return exec.AsValue(output)
}

// filterSort is Jinja's sort (PaV): Python's sorted() of the items by
// their keys, a list of one attribute per comma-separated path (the item
// itself without one), strings lowercased unless case_sensitive; it fails
// where Python compares two keys it cannot order (upstream ordered them
// somehow).
func filterSort(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	var (
		reverse       bool
		caseSensitive bool
		attribute     *exec.Value
	)
	if err := params.Take(
		exec.KeywordArgument("reverse", exec.AsValue(false), takeBoolArgument(&reverse)),
		exec.KeywordArgument("case_sensitive", exec.AsValue(false), takeBoolArgument(&caseSensitive)),
		exec.KeywordArgument("attribute", exec.AsValue(nil), takeValueArgument(&attribute)),
	); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	if in.IsBool() || in.IsNumber() || in.IsNil() && !in.IsUndefined() { // Python's sorted()
		return raise(e, fmt.Sprintf("'%s' object is not iterable", exec.PyTypeName(in)))
	}

	type keyed struct {
		item *exec.Value
		keys []*exec.Value
	}
	getters := attributeGetters(attribute)
	var items []keyed
	var failure error
	in.Iterate(func(idx, count int, item, value *exec.Value) bool {
		keys := make([]*exec.Value, len(getters))
		for i, getter := range getters {
			key, err := getter.get(item)
			if err != nil {
				failure = err
				return false
			}
			if !caseSensitive {
				key = ignoreCase(key)
			}
			keys[i] = key
		}
		items = append(items, keyed{item, keys})
		return true
	}, func() {})
	if failure != nil {
		return e.Raise(failure)
	}
	if reverse { // CPython sorts a reversed list forward, for stability
		slices.Reverse(items)
	}
	if failed := pySort(e, items, func(x, y keyed) (bool, error) {
		return keysLess(x.keys, y.keys)
	}); failed != nil {
		return failed
	}
	if reverse {
		slices.Reverse(items)
	}

	out := make([]any, 0, len(items))
	for _, item := range items {
		out = append(out, exec.Item(item.item))
	}
	return exec.AsValue(out)
}

func filterString(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if err := params.Take(); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	return exec.AsValue(in.String())
}

var (
	reStripComments = regexp.MustCompile(`(?s)<!--.*?-->`)
	reStriptags     = regexp.MustCompile("<[^>]*?>")
)

func filterStriptags(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if err := params.Take(); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	s := softStr(in) // PaV: str(value), 'None' for none
	// PaV: a comment or a tag is removed, not made a space, as markupsafe's
	// striptags does ('0<p>x</p>[1' is '0x[1').
	s = reStripComments.ReplaceAllString(s, "")

	// Strip all tags
	s = reStriptags.ReplaceAllString(s, "")

	return exec.AsValue(strings.Join(strings.Fields(s), " "))
}

func filterTitle(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if err := params.Take(); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	if in.IsUndefined() {
		return exec.AsValue("")
	}
	return exec.AsValue(jinjaTitle(exec.PyStr(in)))
}

// jinjaTitle is Jinja's do_title (PaV): a word begins after a run of
// blanks, '-', '(', '{', '[' or '<' (not after ',' or '.'), its first
// character upper-cased as Python does ('ß' is 'SS'), the rest lowered.
func jinjaTitle(s string) string {
	boundary := func(r rune) bool {
		return unicode.IsSpace(r) || r >= 0x1c && r <= 0x1f || strings.ContainsRune("-({[<", r)
	}
	var b strings.Builder
	word := true // at the start of an item of Jinja's split
	start := 0
	flush := func(end int) {
		if start < end {
			item := s[start:end]
			_, size := utf8.DecodeRuneInString(item)
			b.WriteString(exec.PyUpper(item[:size]) + exec.PyLower(item[size:]))
		}
		start = end
	}
	for i, r := range s {
		if boundary(r) != !word {
			// the split alternates words and separators
			flush(i)
			word = !boundary(r)
		}
	}
	flush(len(s))
	return b.String()
}

func filterTrim(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	var chars *exec.Value
	if err := params.Take(
		exec.KeywordArgument("chars", exec.AsValue(nil), takeValueArgument(&chars)),
	); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	s := softStr(in) // PaV: Jinja trims str() of any value
	if chars.IsNil() {
		return exec.AsValue(strings.TrimSpace(s))
	}
	return exec.AsValue(strings.Trim(s, chars.String()))
}

func filterToJSON(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}

	var (
		indent      *exec.Value
		ensureASCII bool
	)
	if err := params.Take(
		exec.KeywordArgument("indent", exec.AsValue(nil), takeValueArgument(&indent)),
		exec.KeywordArgument("ensure_ascii", exec.AsValue(true), takeBoolArgument(&ensureASCII)),
	); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	_ = ensureASCII // Accepted for compatibility, ignored (Go handles unicode differently than Python)

	marshalJSON := func(value any) (string, error) {
		if indent.IsNil() {
			b, err := stdjson.Marshal(value)
			if err != nil {
				return "", err
			}
			return strings.ReplaceAll(string(b), "'", `\u0027`), nil
		}
		if !indent.IsInteger() {
			return "", errors.Errorf("Expected an integer for 'indent', got %s", indent.String())
		}
		b, err := stdjson.MarshalIndent(value, "", strings.Repeat(" ", indent.Integer()))
		if err != nil {
			return "", err
		}
		return strings.ReplaceAll(string(b), "'", `\u0027`), nil
	}

	out, err := marshalJSON(normalizeJSONValue(in.Interface()))
	if err != nil {
		casted := in.ToGoSimpleType(false)
		if castErr, ok := casted.(error); ok {
			return exec.AsValue(castErr)
		}
		out, err = marshalJSON(casted)
		if err != nil {
			return exec.AsValue(errors.Wrap(err, "Unable to marhsall to json"))
		}
	}
	return exec.AsSafeValue(out)
}

func filterTruncate(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	var (
		length    int
		killWords bool
		endV      *exec.Value
		leeway    int
	)
	if err := params.Take(
		exec.KeywordArgument("length", exec.AsValue(255), takeIntArgument(&length)),
		exec.KeywordArgument("killwords", exec.AsValue(false), takeBoolArgument(&killWords)),
		exec.KeywordArgument("end", exec.AsValue("..."), takeValueArgument(&endV)),
		exec.KeywordArgument("leeway", exec.AsValue(5), takeIntArgument(&leeway)),
	); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}

	if in.IsUndefined() {
		return in
	}
	if !in.IsString() { // PaV: Jinja takes len(value) and cuts it as a str (upstream: str of anything)
		if in.IsList() || in.IsDict() {
			if in.Len() <= length+leeway {
				return in
			}
			return e.Raise(fmt.Errorf("'%s' object has no attribute 'rsplit'", exec.PyType(in)))
		}
		return e.Raise(fmt.Errorf("object of type '%s' has no len()", exec.PyType(in)))
	}
	source, end := in.String(), endV.String()
	rEnd := []rune(end)
	fullLength := length + leeway
	runes := []rune(source)

	if length < len(rEnd) {
		return exec.AsValue(errors.Errorf(`expected length >= %d, got %d`, len(rEnd), length))
	}
	if leeway < 0 {
		return e.Raise(fmt.Errorf("expected leeway >= 0, got %d", leeway))
	}

	if len(runes) <= fullLength {
		return in // PaV: as it is, Markup too
	}

	atLength := string(runes[:length-len(rEnd)])
	if !killWords {
		// PaV: Jinja's rsplit(" ", 1)[0], which neither cuts at other
		// whitespace nor trims (upstream did both)
		if split := strings.LastIndex(atLength, " "); split >= 0 {
			atLength = atLength[:split]
		}
	}
	// PaV: the cut + end is Python's +: Markup if either is, the other
	// escaped (a cut of Markup is Markup).
	if in.Safe || endV.Safe {
		return exec.AsSafeValue(escapedString(in, atLength) + escapedString(endV, end))
	}
	return exec.AsValue(atLength + end)
}

func filterUnique(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	var (
		caseSensitive bool
		attribute     *exec.Value
	)
	if err := params.Take(
		exec.KeywordArgument("case_sensitive", exec.AsValue(false), takeBoolArgument(&caseSensitive)),
		exec.KeywordArgument("attribute", exec.AsValue(nil), takeValueArgument(&attribute)),
	); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	if (!in.IsIterable() || in.IsNil()) && !in.IsUndefined() { // PaV: Python's TypeError
		return exec.AsValue(fmt.Errorf("%s is not iterable", exec.TypeName(in)))
	}

	out := make([]any, 0)
	tracker := map[any]bool{}
	var keys hashKeys
	getter := newAttributeGetter(attribute, nil)
	var err error
	var stop *exec.Value

	in.Iterate(func(idx, count int, key, value *exec.Value) bool {
		if stop = e.Tick(idx); stop != nil {
			return false
		}
		var val *exec.Value
		if val, err = getter.get(key); err != nil {
			return false
		}
		var tracked any
		if tracked, err = keys.key(val, !caseSensitive); err != nil {
			return false
		}
		if _, contains := tracker[tracked]; !contains {
			tracker[tracked] = true
			out = append(out, exec.Item(key))
		}
		return true
	}, func() {})

	if err != nil {
		return e.Raise(err)
	}
	if stop != nil {
		return stop
	}

	return exec.AsValue(out)
}

func filterUpper(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if err := params.Take(); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	return exec.AsValue(exec.PyUpper(softStr(in)))
}

func filterUrlencode(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if err := params.Take(); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	switch {
	case in.IsString():
		return exec.AsValue(strings.ReplaceAll(url.PathEscape(in.String()), "%2F", "/"))
	case in.IsDict():
		pairs := make([]string, 0)
		in.IterateOrder(func(idx, count int, key, value *exec.Value) bool {
			pairs = append(pairs, fmt.Sprintf(
				"%s=%s",
				url.QueryEscape(stringifyFilterValue(key)),
				url.QueryEscape(stringifyFilterValue(value)),
			))
			return true
		}, func() {}, false, true, true)
		return exec.AsValue(strings.Join(pairs, "&"))
	case in.IsList():
		pairs := make([]string, 0)
		in.Iterate(func(idx, count int, key, value *exec.Value) bool {
			first, second, ok := urlEncodePair(key)
			if !ok {
				return true
			}
			pairs = append(pairs, fmt.Sprintf(
				"%s=%s",
				url.QueryEscape(stringifyFilterValue(first)),
				url.QueryEscape(stringifyFilterValue(second)),
			))
			return true
		}, func() {})
		return exec.AsValue(strings.Join(pairs, "&"))
	default:
		return exec.AsValue(strings.ReplaceAll(url.PathEscape(stringifyFilterValue(in)), "%2F", "/"))
	}
}

func filterUrlize(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	var (
		trimURLLimit *exec.Value
		nofollow     bool
		target       *exec.Value
		rel          *exec.Value
		extraSchemes *exec.Value
	)
	if err := params.Take(
		exec.KeywordArgument("trim_url_limit", exec.AsValue(nil), takeValueArgument(&trimURLLimit)),
		exec.KeywordArgument("nofollow", exec.AsValue(false), takeBoolArgument(&nofollow)),
		exec.KeywordArgument("target", exec.AsValue(nil), takeValueArgument(&target)),
		exec.KeywordArgument("rel", exec.AsValue(nil), takeValueArgument(&rel)),
		exec.KeywordArgument("extra_schemes", exec.AsValue(nil), takeValueArgument(&extraSchemes)),
	); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	opts, err := urlizeOptions(trimURLLimit, nofollow, target, rel, extraSchemes)
	if err != nil {
		return exec.AsValue(err)
	}
	text := softStr(in)
	if !in.Safe {
		text = utils.Escape(text)
	}
	s := jinjaUrlize(text, opts)
	if e.Config.AutoEscape {
		return exec.AsSafeValue(s)
	}
	return exec.AsValue(s)
}

func filterWordcount(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if err := params.Take(); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	return exec.AsValue(len(strings.Fields(in.String())))
}

func filterWordwrap(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	var width int
	if err := params.Take(exec.PositionalArgument("width", exec.AsValue(79), takeIntArgument(&width))); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	if width <= 0 {
		return in
	}

	lines := make([]string, 0)
	for _, paragraph := range strings.Split(in.String(), "\n") {
		words := strings.Fields(paragraph)
		if len(words) == 0 {
			lines = append(lines, "")
			continue
		}
		// One builder per line and rune counts kept (PaV): appending to a
		// string and counting its runes per word was quadratic in the width.
		var current strings.Builder
		current.WriteString(words[0])
		currentLen := utf8.RuneCountInString(words[0])
		for _, word := range words[1:] {
			wordLen := utf8.RuneCountInString(word)
			if currentLen+1+wordLen <= width {
				current.WriteByte(' ')
				current.WriteString(word)
				currentLen += 1 + wordLen
				continue
			}
			lines = append(lines, current.String())
			current.Reset()
			current.WriteString(word)
			currentLen = wordLen
		}
		lines = append(lines, current.String())
	}
	return exec.AsValue(strings.Join(lines, "\n"))
}

func filterXMLAttr(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	var autospace bool
	if err := params.Take(
		exec.KeywordArgument("autospace", exec.AsValue(true), takeBoolArgument(&autospace)),
	); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	// PaV: as Jinja's do_xmlattr, a mapping's items but none and undefined,
	// no space before nothing, and no key with blanks, '/', '>' or '='.
	if !in.IsDict() {
		return exec.AsValue(fmt.Errorf("xmlattr takes a mapping, not a %s", exec.TypeName(in)))
	}
	kvs := []string{}
	size := 0
	var bad error
	in.Iterate(func(idx, count int, key, value *exec.Value) bool {
		if value.IsNil() {
			return true
		}
		if !key.IsString() { // Jinja's regular expression of a key 1 or None
			bad = fmt.Errorf("expected string or bytes-like object, got '%s'", exec.PyType(key))
			return false
		}
		if strings.ContainsAny(key.String(), " \t\n\r\f\v/>=") {
			bad = fmt.Errorf("invalid character in attribute name %s", exec.PyRepr(key))
			return false
		}
		// markupsafe's escape: a Markup value (tojson's) as it is
		kv := fmt.Sprintf(`%s="%s"`, exec.Escape(key).String(), exec.Escape(value).String())
		kvs = append(kvs, kv)
		size += len(kv) + 1
		return pastStringLimit(e, "xmlattr", size) == nil
	}, func() {})
	if bad != nil {
		return exec.AsValue(bad)
	}
	if failed := pastStringLimit(e, "xmlattr", size); failed != nil {
		return failed
	}
	out := strings.Join(kvs, " ")
	if autospace && out != "" {
		out = " " + out
	}
	return exec.AsValue(out)
}

func filterDefault(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	var (
		defaultValue *exec.Value
		boolean      bool
	)
	if err := params.Take(
		exec.PositionalArgument("default", nil, takeValueArgument(&defaultValue)),
		exec.KeywordArgument("boolean", exec.AsValue(false), exec.BoolArgument(&boolean)),
	); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	if in.IsError() || in.IsNil() {
		return defaultValue
	}
	if boolean && !in.IsTrue() {
		return defaultValue
	}
	return in
}

func filterSelectAttr(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if out := emptyOrNotIterable(e, in); out != nil {
		return out
	}
	if len(params.Args) < 1 {
		return exec.AsValue(errors.New("Wrong signature for 'selectattr', expect at least an attribute name as argument"))
	}
	attribute := params.First()
	name := ""
	testArgs := []*exec.Value{}
	if len(params.Args) > 2 {
		testArgs = params.Args[2:]
	}
	testParams := &exec.VarArgs{Args: testArgs, KwArgs: params.KwArgs}
	if len(params.Args) > 1 {
		name = params.Args[1].String()
	}

	out := make([]any, 0)
	getter := newAttributeGetter(attribute, nil)
	var failed *exec.Value
	in.Iterate(func(idx, count int, key, value *exec.Value) bool {
		item := key
		if value != nil {
			item = value
		}
		attr, err := getter.get(item)
		if err != nil {
			failed = e.Raise(err)
			return false
		}
		matched := attr.IsTrue()
		if name != "" {
			var err *exec.Value
			if matched, err = selectTest(e, name, attr, testParams); err != nil {
				failed = err
				return false
			}
		}
		if matched {
			out = append(out, exec.Item(item))
		}
		return true
	}, func() {})
	if failed != nil {
		return failed
	}
	return exec.AsValue(out)
}

// floatToInt is Python's int() of a float, an overflow error outside 64
// bits (PaV: Go's conversion gave the smallest int64).
func floatToInt(e *exec.Evaluator, f float64) *exec.Value {
	if math.IsInf(f, 0) || f >= math.MaxInt64 || f < math.MinInt64 {
		return e.Raise(exec.ErrOverflow)
	}
	return exec.AsValue(int(f))
}

// softStr is Jinja's soft_str (PaV): Python's str() of a value, "" for
// undefined ('None' for none: `none|upper` is 'NONE').
func softStr(in *exec.Value) string {
	if in.IsUndefined() {
		return ""
	}
	return exec.PyStr(in)
}
