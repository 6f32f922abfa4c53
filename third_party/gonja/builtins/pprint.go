package builtins

import (
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/nikolalohinski/gonja/v2/builtins/methods/pystring"
	"github.com/nikolalohinski/gonja/v2/exec"
)

// filterPyPPrint is Jinja's pprint: Python's pprint.pformat (PaV; gonja's
// dumped Go structures).
func filterPyPPrint(e *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if err := exec.ReprSizeError(in); err != nil { // PaV: before its many reprs
		return e.Raise(err)
	}
	p := pprinter{e: e}
	p.format(in, 0, 0, 0)
	if p.stop != nil {
		return p.stop
	}
	return exec.AsValue(p.out.String())
}

// pprintWidth is pformat's default width.
const pprintWidth = 80

// pprinter is Python's pprint.PrettyPrinter with pformat's defaults
// (indent 1, width 80, sort_dicts, not compact): a value whose repr does
// not fit in what is left of the line is written item by item, one per
// line, and a str too long for it as adjacent literals, split at line
// ends and then between words (Lib/pprint.py: _format, _pprint_dict,
// _pprint_list, _pprint_tuple, _format_items, _pprint_str).
//
// Each value it formats asks whether its one-line repr fits, as pprint
// does; PaV's stops writing that repr once it cannot (pprintReprWithin),
// or a deeply nested value took time quadratic in its depth, and asks
// e.Tick and the string limit as it goes.
type pprinter struct {
	out   strings.Builder
	e     *exec.Evaluator
	calls int
	stop  *exec.Value
}

func (p *pprinter) format(v *exec.Value, indent, allowance, level int) {
	if p.stop != nil {
		return
	}
	p.calls++
	if p.stop = p.e.Tick(p.calls); p.stop != nil {
		return
	}
	if p.stop = pastStringLimit(p.e, "pprint", p.out.Len()); p.stop != nil { // its indents grow with depth
		return
	}
	rep, fits := pprintReprWithin(v, pprintWidth-indent-allowance)
	if !fits {
		level++
		switch {
		case v.IsDict():
			p.out.WriteString("{")
			p.dictItems(sortedPairs(v), indent, allowance+1, level)
			p.out.WriteString("}")
			return
		case v.IsList() && !isTuple(v):
			p.out.WriteString("[")
			p.items(v, indent, allowance+1, level)
			p.out.WriteString("]")
			return
		case isTuple(v) && !isGroupTuple(v):
			end := ")"
			if v.Len() == 1 {
				end = ",)"
			}
			p.out.WriteString("(")
			p.items(v, indent, allowance+len(end), level)
			p.out.WriteString(end)
			return
		case v.IsString() && !v.Safe: // a Markup's repr is its own: not split
			p.str(v.String(), indent, allowance, level)
			return
		}
		rep = pprintRepr(v) // a value pprint does not split
	}
	p.out.WriteString(rep)
}

// items is _format_items: each item on a line of its own.
func (p *pprinter) items(v *exec.Value, indent, allowance, level int) {
	indent++
	for i := 0; i < v.Len() && p.stop == nil; i++ {
		last := i == v.Len()-1
		if i > 0 {
			p.out.WriteString(",\n" + strings.Repeat(" ", indent))
		}
		p.format(v.Index(i), indent, itemAllowance(last, allowance), level)
	}
}

// dictItems is _format_dict_items: each key and value on a line of its own.
func (p *pprinter) dictItems(pairs []*exec.Pair, indent, allowance, level int) {
	indent++
	for i, kv := range pairs {
		if p.stop != nil {
			return
		}
		last := i == len(pairs)-1
		key := pprintRepr(kv.Key)
		p.out.WriteString(key + ": ")
		p.format(kv.Value, indent+utf8.RuneCountInString(key)+2, itemAllowance(last, allowance), level)
		if !last {
			p.out.WriteString(",\n" + strings.Repeat(" ", indent))
		}
	}
}

// itemAllowance: the last item leaves room for what closes its container,
// the others for the comma after them.
func itemAllowance(last bool, allowance int) int {
	if last {
		return allowance
	}
	return 1
}

// pyWords is Python's re.findall(r'\S*\s*', line) without its final empty
// match: runs of non-blanks, each with the blanks after it.
var pyWords = regexp.MustCompile(`[^\s\x1c-\x1f\x85\xa0\p{Zs}\x{2028}\x{2029}]*[\s\x1c-\x1f\x85\xa0\p{Zs}\x{2028}\x{2029}]*`)

// str is _pprint_str: the lines of s, each split between words where its
// repr does not fit, as adjacent literals (in parentheses at the top).
func (p *pprinter) str(s string, indent, allowance, level int) {
	repr := func(s string) string { return exec.PyRepr(exec.AsValue(s)) }
	width := func(s string) int { return utf8.RuneCountInString(repr(s)) }
	if s == "" {
		p.out.WriteString(repr(s))
		return
	}
	if level == 1 {
		indent++
		allowance++
	}
	maxWidth := pprintWidth - indent
	maxWidth1 := maxWidth
	lines := pystring.SplitLines(s, true)
	var chunks []string
	var rep string
	for i, line := range lines {
		rep = repr(line)
		lastLine := i == len(lines)-1
		if lastLine {
			maxWidth1 -= allowance
		}
		if utf8.RuneCountInString(rep) <= maxWidth1 {
			chunks = append(chunks, rep)
			continue
		}
		parts := pyWords.FindAllString(line, -1)
		parts = slices.DeleteFunc(parts, func(w string) bool { return w == "" })
		maxWidth2 := maxWidth
		current := ""
		for j, part := range parts {
			candidate := current + part
			if j == len(parts)-1 && lastLine {
				maxWidth2 -= allowance
			}
			if width(candidate) > maxWidth2 {
				if current != "" {
					chunks = append(chunks, repr(current))
				}
				current = part
			} else {
				current = candidate
			}
		}
		if current != "" {
			chunks = append(chunks, repr(current))
		}
	}
	if len(chunks) == 1 {
		p.out.WriteString(rep) // as pprint does: the last line's repr
		return
	}
	if level == 1 {
		p.out.WriteString("(")
	}
	for i, c := range chunks {
		if i > 0 {
			p.out.WriteString("\n" + strings.Repeat(" ", indent))
		}
		p.out.WriteString(c)
	}
	if level == 1 {
		p.out.WriteString(")")
	}
}

func isTuple(v *exec.Value) bool {
	_, ok := v.Interface().(exec.PyTuple)
	return ok
}

// isGroupTuple: groupby's items, Jinja's _GroupTuple, whose repr is a
// tuple's but not tuple's own __repr__, which is what pprint splits.
func isGroupTuple(v *exec.Value) bool {
	_, ok := v.Interface().(groupTupleValue)
	return ok
}

// pprintRepr is Python's repr as pprint.pformat writes it on one line: its
// dicts' items sorted by key (sort_dicts), keys Python cannot compare
// ordered by their type's name (pprint's _safe_key).
func pprintRepr(v *exec.Value) string {
	var b strings.Builder
	writePprintRepr(&b, v, -1)
	return b.String()
}

// pprintReprWithin is pprintRepr(v) if it is at most width characters;
// fits is false, and the repr cut short, once it cannot be.
func pprintReprWithin(v *exec.Value, width int) (rep string, fits bool) {
	if width < 0 {
		return "", false
	}
	var b strings.Builder
	if !writePprintRepr(&b, v, utf8.UTFMax*width) {
		return "", false
	}
	rep = b.String()
	return rep, utf8.RuneCountInString(rep) <= width
}

// writePprintRepr writes pprintRepr(v) to b, each container's items in
// place, and stops, false, once b holds more than limit bytes (-1: none).
func writePprintRepr(b *strings.Builder, v *exec.Value, limit int) bool {
	within := func() bool { return limit < 0 || b.Len() <= limit }
	switch {
	case v.IsString() || !v.IsList() && !v.IsDict():
		b.WriteString(exec.PyRepr(v))
	case v.IsList():
		open, end := "[", "]"
		if isTuple(v) {
			open, end = "(", ")"
			if v.Len() == 1 {
				end = ",)"
			}
		}
		b.WriteString(open)
		for i := 0; i < v.Len() && within(); i++ {
			if i > 0 {
				b.WriteString(", ")
			}
			writePprintRepr(b, v.Index(i), limit)
		}
		b.WriteString(end)
	default:
		b.WriteString("{")
		for i, kv := range sortedPairs(v) {
			if !within() {
				break
			}
			if i > 0 {
				b.WriteString(", ")
			}
			writePprintRepr(b, kv.Key, limit)
			b.WriteString(": ")
			writePprintRepr(b, kv.Value, limit)
		}
		b.WriteString("}")
	}
	return within()
}

// sortedPairs are a mapping's items sorted by key as pprint sorts them.
func sortedPairs(v *exec.Value) []*exec.Pair {
	pairs, _ := exec.PyPairs(v)
	pairs = slices.Clone(pairs)
	sort.SliceStable(pairs, func(i, j int) bool {
		a, b := pairs[i].Key, pairs[j].Key
		if c, err := exec.PyCompare(a.Interface(), b.Interface(), true); err == nil {
			return c < 0
		}
		return exec.PyType(a) < exec.PyType(b)
	})
	return pairs
}
