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
	var p pprinter
	p.format(in, 0, 0, 0)
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
type pprinter struct{ out strings.Builder }

func (p *pprinter) format(v *exec.Value, indent, allowance, level int) {
	rep := pprintRepr(v)
	if utf8.RuneCountInString(rep) > pprintWidth-indent-allowance {
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
	}
	p.out.WriteString(rep)
}

// items is _format_items: each item on a line of its own.
func (p *pprinter) items(v *exec.Value, indent, allowance, level int) {
	indent++
	for i := 0; i < v.Len(); i++ {
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
	switch {
	case v.IsString() || !v.IsList() && !v.IsDict():
		return exec.PyRepr(v)
	case v.IsList():
		parts := make([]string, v.Len())
		for i := range parts {
			parts[i] = pprintRepr(v.Index(i))
		}
		if !isTuple(v) {
			return "[" + strings.Join(parts, ", ") + "]"
		} else if len(parts) == 1 {
			return "(" + parts[0] + ",)"
		}
		return "(" + strings.Join(parts, ", ") + ")"
	}
	pairs := sortedPairs(v)
	parts := make([]string, len(pairs))
	for i, kv := range pairs {
		parts[i] = pprintRepr(kv.Key) + ": " + pprintRepr(kv.Value)
	}
	return "{" + strings.Join(parts, ", ") + "}"
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
