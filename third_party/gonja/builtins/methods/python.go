package methods

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/nikolalohinski/gonja/v2/builtins/methods/pystring"
	"github.com/nikolalohinski/gonja/v2/exec"
)

// pyStrMethods replace gonja's versions of Python str methods whose defaults or
// results differ from Python's (replace without count, center/ljust/rjust
// without fillchar, split/rsplit without separator or with maxsplit,
// strip/lstrip/rstrip without chars, index/rindex missing; find/rfind/zfill
// counted bytes, upper/lower mapped single runes).
var pyStrMethods = map[string]exec.Method[string]{
	"replace": func(s string, _ *exec.Value, a *exec.VarArgs) (any, error) {
		p, err := exec.MethodArgs("replace", a, 2, 3, "old", "new", "count")
		if err != nil {
			return nil, err
		}
		count := int64(-1)
		if p[2] != nil {
			if !exec.IsInt(p[2]) {
				return nil, fmt.Errorf("replace(): count must be an integer")
			}
			count = exec.AsInt(p[2])
		}
		if !p[0].IsString() || !p[1].IsString() {
			return nil, fmt.Errorf("replace() arguments must be strings")
		}
		if count < 0 || count > int64(len(s))+1 {
			count = -1
		}
		old, repl := p[0].String(), p[1].String()
		return strings.Replace(s, old, repl, int(count)), nil
	},
	"center": padMethod("center"),
	"ljust":  padMethod("ljust"),
	"rjust":  padMethod("rjust"),
	"split":  splitMethod(false),
	"rsplit": splitMethod(true),
	"strip":  stripMethod("strip"),
	"lstrip": stripMethod("lstrip"),
	"rstrip": stripMethod("rstrip"),
	"index":  findMethod("index", false, true),
	"rindex": findMethod("rindex", true, true),
	"find":   findMethod("find", false, false),
	"rfind":  findMethod("rfind", true, false),
	"zfill":  zfill,
	"upper": func(s string, _ *exec.Value, a *exec.VarArgs) (any, error) {
		if err := a.Take(); err != nil {
			return nil, exec.ErrInvalidCall(err)
		}
		return exec.PyUpper(s), nil
	},
	"capitalize": func(s string, _ *exec.Value, a *exec.VarArgs) (any, error) {
		if err := a.Take(); err != nil {
			return nil, exec.ErrInvalidCall(err)
		}
		return pystring.Capitalize(s), nil
	},
	"lower": func(s string, _ *exec.Value, a *exec.VarArgs) (any, error) {
		if err := a.Take(); err != nil {
			return nil, exec.ErrInvalidCall(err)
		}
		return exec.PyLower(s), nil
	},
	"count":      countMethod,
	"format":     formatMethod,
	"translate":  translateMethod,
	"startswith": affixMethod("startswith", strings.HasPrefix),
	"endswith":   affixMethod("endswith", strings.HasSuffix),
	"expandtabs": func(s string, _ *exec.Value, a *exec.VarArgs) (any, error) {
		p, err := exec.MethodArgs("expandtabs", a, 0, 1, "tabsize")
		if err != nil {
			return nil, err
		}
		size := int64(8)
		if p[0] != nil {
			if !exec.IsInt(p[0]) {
				return nil, fmt.Errorf("expandtabs(): tabsize must be an integer")
			}
			size = exec.AsInt(p[0])
		}
		return expandTabs(s, size), nil
	},
	"format_map": func(s string, self *exec.Value, a *exec.VarArgs) (any, error) {
		if len(a.Args) != 1 || len(a.KwArgs) != 0 || !a.Args[0].IsDict() {
			return nil, fmt.Errorf("format_map() takes exactly one mapping")
		}
		kwargs := map[string]*exec.Value{}
		for _, k := range a.Args[0].Keys() {
			v, _ := a.Args[0].GetItem(k.Interface())
			kwargs[k.String()] = v
		}
		return exec.PyStrFormat(s, nil, kwargs, a.Limits, self.Safe)
	},
}

// expandTabs is Python's str.expandtabs: each tab advances to the next
// multiple of size columns, counted from the last newline.
func expandTabs(s string, size int64) string {
	var b strings.Builder
	col := int64(0)
	for _, r := range s {
		switch r {
		case '\t':
			if size > 0 {
				n := size - col%size
				b.WriteString(strings.Repeat(" ", int(n)))
				col += n
			}
		case '\n', '\r':
			b.WriteRune(r)
			col = 0
		default:
			b.WriteRune(r)
			col++
		}
	}
	return b.String()
}

// countMethod is Python's str.count(sub[, start[, end]]): non-overlapping
// occurrences in s[start:end] (gonja's counts only up to the first match).
func countMethod(s string, _ *exec.Value, a *exec.VarArgs) (any, error) {
	p, err := exec.MethodArgs("count", a, 1, 3, "sub", "start", "end")
	if err != nil {
		return nil, err
	}
	if !p[0].IsString() {
		return nil, fmt.Errorf("count() argument must be str, not %s", exec.PyType(p[0]))
	}
	r := []rune(s)
	start, end, err := sliceBounds(int64(len(r)), p[1], p[2])
	if err != nil {
		return nil, err
	}
	if end < start {
		return int64(0), nil
	}
	// Like Python, an empty sub occurs once more than there are characters.
	return int64(strings.Count(string(r[start:end]), p[0].String())), nil
}

func padMethod(name string) exec.Method[string] {
	return func(s string, _ *exec.Value, a *exec.VarArgs) (any, error) {
		p, err := exec.MethodArgs(name, a, 1, 2, "width", "fillchar")
		if err != nil {
			return nil, err
		}
		if !exec.IsInt(p[0]) {
			return nil, fmt.Errorf("%s(): width must be an integer", name)
		}
		fill := " "
		if p[1] != nil {
			if !p[1].IsString() || utf8.RuneCountInString(p[1].String()) != 1 {
				return nil, fmt.Errorf("%s(): the fill character must be exactly one character long", name)
			}
			fill = p[1].String()
		}
		return exec.PyPad(name, s, int(exec.AsInt(p[0])), fill), nil
	}
}

func splitMethod(right bool) exec.Method[string] {
	name := "split"
	if right {
		name = "rsplit"
	}
	return func(s string, _ *exec.Value, a *exec.VarArgs) (any, error) {
		p, err := exec.MethodArgs(name, a, 0, 2, "sep", "maxsplit")
		if err != nil {
			return nil, err
		}
		max := int64(-1)
		if p[1] != nil {
			if !exec.IsInt(p[1]) {
				return nil, fmt.Errorf("%s(): maxsplit must be an integer", name)
			}
			max = exec.AsInt(p[1])
		}
		var parts []string
		if p[0] == nil || p[0].IsNil() {
			parts = splitWhitespace(s, max, right)
		} else {
			if !p[0].IsString() {
				return nil, fmt.Errorf("%s(): separator must be a string or None", name)
			}
			sep := p[0].String()
			if sep == "" {
				return nil, fmt.Errorf("empty separator")
			}
			switch {
			case max < 0 || max >= int64(len(s)):
				parts = strings.Split(s, sep)
			case !right:
				parts = strings.SplitN(s, sep, int(max)+1)
			default:
				for ; max > 0; max-- {
					i := strings.LastIndex(s, sep)
					if i < 0 {
						break
					}
					parts = append(parts, s[i+len(sep):])
					s = s[:i]
				}
				parts = append(parts, s)
				reverse(parts)
			}
		}
		out := make([]interface{}, len(parts))
		for i, x := range parts {
			out[i] = x
		}
		return out, nil
	}
}

// splitWhitespace is Python's str.split()/rsplit() without a separator.
func splitWhitespace(s string, max int64, right bool) []string {
	if max < 0 {
		return strings.Fields(s)
	}
	var parts []string
	if !right {
		for s = strings.TrimLeftFunc(s, unicode.IsSpace); s != "" && max > 0; max-- {
			i := strings.IndexFunc(s, unicode.IsSpace)
			if i < 0 {
				break
			}
			parts = append(parts, s[:i])
			s = strings.TrimLeftFunc(s[i:], unicode.IsSpace)
		}
		if s != "" {
			parts = append(parts, s)
		}
		return parts
	}
	for s = strings.TrimRightFunc(s, unicode.IsSpace); s != "" && max > 0; max-- {
		i := strings.LastIndexFunc(s, unicode.IsSpace)
		if i < 0 {
			break
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		parts = append(parts, s[i+size:])
		s = strings.TrimRightFunc(s[:i], unicode.IsSpace)
	}
	if s != "" {
		parts = append(parts, s)
	}
	reverse(parts)
	return parts
}

func reverse(s []string) {
	for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
		s[i], s[j] = s[j], s[i]
	}
}

func stripMethod(name string) exec.Method[string] {
	return func(s string, _ *exec.Value, a *exec.VarArgs) (any, error) {
		p, err := exec.MethodArgs(name, a, 0, 1, "chars")
		if err != nil {
			return nil, err
		}
		cut := unicode.IsSpace
		if p[0] != nil && !p[0].IsNil() {
			if !p[0].IsString() {
				return nil, fmt.Errorf("%s arg must be None or str", name)
			}
			chars := p[0].String()
			cut = func(r rune) bool { return strings.ContainsRune(chars, r) }
		}
		switch name {
		case "lstrip":
			return strings.TrimLeftFunc(s, cut), nil
		case "rstrip":
			return strings.TrimRightFunc(s, cut), nil
		}
		return strings.TrimFunc(s, cut), nil
	}
}

// findMethod is str.find/rfind/index/rindex(sub[, start[, end]]): the
// character index of sub in s[start:end], -1 or an error (index) when absent.
func findMethod(name string, right, raise bool) exec.Method[string] {
	return func(s string, _ *exec.Value, a *exec.VarArgs) (any, error) {
		p, err := exec.MethodArgs(name, a, 1, 3, "sub", "start", "end")
		if err != nil {
			return nil, err
		}
		if !p[0].IsString() {
			return nil, fmt.Errorf("must be str, not %s", exec.PyType(p[0]))
		}
		r := []rune(s)
		start, end, err := sliceBounds(int64(len(r)), p[1], p[2])
		if err != nil {
			return nil, err
		}
		i := int64(-1)
		if start <= end {
			in, sub := string(r[start:end]), p[0].String()
			j := strings.Index(in, sub)
			if right {
				j = strings.LastIndex(in, sub)
			}
			if j >= 0 {
				i = start + int64(utf8.RuneCountInString(in[:j]))
			}
		}
		if i < 0 && raise {
			return nil, fmt.Errorf("substring not found")
		}
		return i, nil
	}
}

// sliceBounds are Python's start and end of s[start:end] for a sequence of
// n items (none is the default; negative counts from the end); start may
// exceed n (then nothing is found there, not even "").
func sliceBounds(n int64, start, end *exec.Value) (int64, int64, error) {
	bound := func(v *exec.Value, dflt int64) (int64, error) {
		if v == nil || v.IsNil() {
			return dflt, nil
		}
		if !exec.IsInt(v) {
			return 0, fmt.Errorf("slice indices must be integers or None")
		}
		i := exec.AsInt(v)
		if i < 0 {
			i = max(0, i+n)
		}
		return i, nil
	}
	s, err := bound(start, 0)
	if err != nil {
		return 0, 0, err
	}
	e, err := bound(end, n)
	return s, min(e, n), err
}

// zfill is Python's str.zfill: zeros after the sign up to width characters.
func zfill(s string, _ *exec.Value, a *exec.VarArgs) (any, error) {
	p, err := exec.MethodArgs("zfill", a, 1, 1, "width")
	if err != nil {
		return nil, err
	}
	if !exec.IsInt(p[0]) {
		return nil, fmt.Errorf("zfill(): width must be an integer")
	}
	marg := exec.AsInt(p[0]) - int64(utf8.RuneCountInString(s))
	if marg <= 0 {
		return s, nil
	}
	sign := ""
	if s != "" && (s[0] == '+' || s[0] == '-') {
		sign, s = s[:1], s[1:]
	}
	return sign + strings.Repeat("0", int(marg)) + s, nil
}

// pyDictMethods keep Python's order of keys (gonja's sort them) and a dict
// literal's keys as they are (1, True, None...): see exec.PyPairs.
var pyDictMethods = map[string]exec.Method[map[string]any]{
	"keys":   dictView(func(kv *exec.Pair) any { return kv.Key }),
	"values": dictView(func(kv *exec.Pair) any { return kv.Value }),
	"items":  dictView(func(kv *exec.Pair) any { return exec.Tuple{kv.Key, kv.Value} }),
	"get": func(_ map[string]any, v *exec.Value, args *exec.VarArgs) (any, error) {
		p, err := exec.MethodArgs("get", args, 1, 2, "key", "default")
		if err != nil {
			return nil, exec.ErrInvalidCall(err)
		}
		pairs, _ := exec.PyPairs(v)
		for _, kv := range pairs {
			if kv.Key.EqualValueTo(p[0]) { // Python: 1, 1.0 and True are one key
				return kv.Value.Interface(), nil
			}
		}
		if p[1] != nil {
			return p[1].Interface(), nil
		}
		return nil, nil
	},
}

// dictView is a dict method returning one element per pair, in Python's
// order.
func dictView(elem func(kv *exec.Pair) any) exec.Method[map[string]any] {
	return func(_ map[string]any, v *exec.Value, args *exec.VarArgs) (any, error) {
		if err := args.Take(); err != nil {
			return nil, exec.ErrInvalidCall(err)
		}
		pairs, _ := exec.PyPairs(v)
		out := make([]any, len(pairs))
		for i, kv := range pairs {
			out[i] = elem(kv)
		}
		return out, nil
	}
}

// affixMethod is str.startswith/endswith(affix[, start[, end]]): affix is
// a string or a tuple (list) of strings, any of which may match
// s[start:end] (gonja's endswith took no tuple, startswith no tuple literal).
func affixMethod(name string, has func(s, affix string) bool) exec.Method[string] {
	return func(s string, _ *exec.Value, a *exec.VarArgs) (any, error) {
		p, err := exec.MethodArgs(name, a, 1, 3, "affix", "start", "end")
		if err != nil {
			return nil, err
		}
		var affixes []*exec.Value
		switch {
		case p[0].IsString():
			affixes = []*exec.Value{p[0]}
		case p[0].IsList():
			for i := 0; i < p[0].Len(); i++ {
				affixes = append(affixes, p[0].Index(i))
			}
		default:
			return nil, fmt.Errorf("%s first arg must be str or a tuple of str, not %s", name, exec.PyType(p[0]))
		}
		r := []rune(s)
		start, end, err := sliceBounds(int64(len(r)), p[1], p[2])
		if err != nil {
			return nil, err
		}
		in := ""
		if start <= end {
			in = string(r[start:end])
		}
		// Python checks each item's type as it comes to it: ('a', 1) matches 'a'
		for _, affix := range affixes {
			if !affix.IsString() {
				return nil, fmt.Errorf("tuple for %s must only contain str, not %s", name, exec.PyType(affix))
			}
			if start <= end && has(in, affix.String()) {
				return true, nil
			}
		}
		return false, nil
	}
}

// pyListMethods are Python's list methods gonja lacks: index and count.
var pyListMethods = map[string]exec.Method[[]any]{
	"count": func(self []any, _ *exec.Value, a *exec.VarArgs) (any, error) {
		p, err := exec.MethodArgs("count", a, 1, 1, "value")
		if err != nil {
			return nil, err
		}
		n := int64(0)
		for _, item := range self {
			if exec.AsValue(item).EqualValueTo(p[0]) {
				n++
			}
		}
		return n, nil
	},
	"index": func(self []any, _ *exec.Value, a *exec.VarArgs) (any, error) {
		p, err := exec.MethodArgs("index", a, 1, 3, "value", "start", "end")
		if err != nil {
			return nil, err
		}
		start, end, err := sliceBounds(int64(len(self)), p[1], p[2])
		if err != nil {
			return nil, err
		}
		for i := start; i < end; i++ {
			if exec.AsValue(self[i]).EqualValueTo(p[0]) {
				return i, nil
			}
		}
		return nil, fmt.Errorf("%s is not in list", exec.PyRepr(p[0]))
	},
}

// translateMethod is Python's str.translate(table): each character's
// ordinal looked up in table, a mapping or a sequence (table[ord(c)]), and
// made the str found, the character of the int found, or nothing for none;
// kept where table has no such item. Its result is bounded by the render's
// string limit.
func translateMethod(s string, _ *exec.Value, a *exec.VarArgs) (any, error) {
	if len(a.KwArgs) > 0 {
		return nil, fmt.Errorf("str.translate() takes no keyword arguments")
	}
	p, err := exec.MethodArgs("translate", a, 1, 1, "table")
	if err != nil {
		return nil, err
	}
	table := p[0]
	if !table.IsDict() && !table.IsList() && !table.IsString() {
		return nil, fmt.Errorf("'%s' object is not subscriptable", exec.PyType(table))
	}
	var b strings.Builder
	for _, r := range s {
		mapped := exec.Subscript(table, exec.AsValue(int(r)))
		switch {
		case mapped.IsUndefined(): // Python's LookupError: kept
			b.WriteRune(r)
		case mapped.IsNil():
		case mapped.IsString():
			b.WriteString(mapped.String())
		case exec.IsInt(mapped):
			n := exec.AsInt(mapped)
			if n < 0 || n > unicode.MaxRune {
				return nil, fmt.Errorf("character mapping must be in range(0x110000)")
			}
			b.WriteRune(rune(n))
		default:
			return nil, fmt.Errorf("character mapping must return integer, None or str")
		}
		if a.Limits.StringBytes > 0 && b.Len() > a.Limits.StringBytes {
			return nil, fmt.Errorf("translate(): result too large")
		}
	}
	return b.String(), nil
}
