package jinja

import (
	"fmt"
	"math/rand"
	"regexp"
	"strings"
)

// The differential tester's generator (differential_test.go): random, valid
// Jinja templates drawn from Jinja's grammar, deterministic from a seed.
// Expressions are generated for a kind (int, str, list, ...) so that most
// templates render; mistyped ones are generated on purpose too, since PaV and
// Jinja must then agree that the render fails.

// diffVars are the variables every generated template is rendered with (by
// PaV and by Jinja, both decoding this JSON): one of every type. Keys are in
// sorted order, the order in which PaV iterates the context's mappings (a
// deliberate divergence: Jinja keeps the JSON's order).
const diffVars = `{
 "n": 3, "neg": -7, "zero": 0, "big": 9007199254740993,
 "f": 2.5, "nf": -0.5, "whole": 4.0, "tiny": 1.5e-05,
 "s": "hello world", "u": "straße ünï", "e": "", "sp": "  padded  ",
 "ml": "line one\nline two\n", "html": "<b>a&amp;b</b> x", "num": "42", "fnum": " 3.5 ",
 "t": true, "no": false, "nil": null,
 "items": [3, 1, 2], "words": ["b", "A", "c", "a"], "mixed": [1, "a", 2.5, null, true],
 "nested": [[1, 2], [3]], "pairs": [["a", 1], ["b", 2]],
 "people": [{"age": 30, "name": "ann"}, {"age": 25, "name": "bob"}, {"age": 30, "name": "cy"}],
 "d": {"a": 2, "b": 1, "c": 3}, "obj": {"labels": {"app": "db", "k": "v"}, "name": "x"},
 "empty": [], "edict": {}
}`

type kind int

const (
	kInt kind = iota
	kFloat
	kStr
	kBool
	kNone
	kList
	kDict
	numKinds
)

// varsOfKind are diffVars' names by kind.
var varsOfKind = map[kind][]string{
	kInt:   {"n", "neg", "zero", "big"},
	kFloat: {"f", "nf", "whole", "tiny"},
	kStr:   {"s", "u", "e", "sp", "ml", "html", "num", "fnum"},
	kBool:  {"t", "no"},
	kNone:  {"nil"},
	kList:  {"items", "words", "mixed", "nested", "pairs", "people", "empty"},
	kDict:  {"d", "obj", "edict"},
}

// Features a template may use, by name. The generator draws only enabled
// ones; a test that finds a class of divergence not fixed yet disables its
// feature (see pendingFeatures) until the fix lands.
const (
	featUnicode = "unicode" // non-ASCII text in strings
	featBigInt  = "bigint"  // integers past 64 bits (PaV's are 64-bit: a deliberate divergence)
	featStress  = "stress"  // constructs that approach or pass PaV's limits
	// a method's repr, which names its object's address (never PaV's), maybe
	// cut short by a filter or a slice: marked used, not drawn
	featAddress = "address"
)

type macroSig struct {
	name   string
	params int // positional parameters, the last ones with defaults
	caller bool
}

type gen struct {
	r        *rand.Rand
	disabled map[string]bool
	used     map[string]bool
	scopes   []map[kind][]string
	loops    int // for loops around the point generated
	macros   []macroSig
	serial   int
	tokens   int // a rough budget of the template's size
	probes   []limitProbe
}

// limitProbe is a stress construct whose printed result tells whether one of
// PaV's limits held: if PaV renders it, the number it prints after marker
// must not exceed max.
type limitProbe struct {
	marker string
	max    int64
	what   string
}

func newGen(seed int64, disabled map[string]bool) *gen {
	return &gen{r: rand.New(rand.NewSource(seed)), disabled: disabled, used: map[string]bool{}, scopes: []map[kind][]string{{}}}
}

// template generates one template.
func (g *gen) template() string {
	var b strings.Builder
	if g.on(featStress) && g.r.Intn(100) == 0 {
		b.WriteString(g.stress())
	}
	for n := 1 + g.r.Intn(4); n > 0 && g.tokens < 400; n-- {
		b.WriteString(g.stmt(3))
	}
	return b.String()
}

func (g *gen) on(feat string) bool { return !g.disabled[feat] }

func (g *gen) pick(xs ...string) string { return xs[g.r.Intn(len(xs))] }

func (g *gen) chance(pct int) bool { return g.r.Intn(100) < pct }

func (g *gen) fresh(prefix string) string {
	g.serial++
	return fmt.Sprintf("%s%d", prefix, g.serial)
}

func (g *gen) push() { g.scopes = append(g.scopes, map[kind][]string{}) }
func (g *gen) pop()  { g.scopes = g.scopes[:len(g.scopes)-1] }

func (g *gen) bind(name string, k kind) {
	s := g.scopes[len(g.scopes)-1]
	s[k] = append(s[k], name)
}

// name is a variable of kind k: a template's own or one of diffVars.
func (g *gen) name(k kind) string {
	var own []string
	for _, s := range g.scopes {
		own = append(own, s[k]...)
	}
	if len(own) > 0 && g.chance(50) {
		return own[g.r.Intn(len(own))]
	}
	vs := varsOfKind[k]
	if k == kInt && !g.on(featBigInt) {
		vs = vs[:3]
	}
	if k == kStr && !g.on(featUnicode) {
		vs = []string{"s", "e", "sp", "ml", "html", "num", "fnum"}
	}
	return vs[g.r.Intn(len(vs))]
}

// ---------------------------------------------------------------- statements

// tag wraps a statement's body in {% %} with random whitespace control.
func (g *gen) tag(body string) string {
	l, r := "{%", "%}"
	switch g.r.Intn(8) {
	case 0:
		l = "{%-"
	case 1:
		l = "{%+"
	}
	if g.r.Intn(6) == 0 {
		r = "-%}"
	}
	g.tokens += 3
	return l + " " + body + " " + r
}

func (g *gen) output(expr string) string {
	l, r := "{{", "}}"
	if g.r.Intn(8) == 0 {
		l = "{{-"
	}
	if g.r.Intn(8) == 0 {
		r = "-}}"
	}
	g.tokens += 2
	return l + " " + expr + " " + r
}

func (g *gen) text() string {
	pieces := []string{"a", "b c", " ", "  ", "\n", "\n  ", "\n\t", "x: ", "- ", ",", "}", "#", "%", "'", "\""}
	if g.on(featUnicode) {
		pieces = append(pieces, "é", "ü", "日本", "😀", "ß")
	}
	var b strings.Builder
	for n := 1 + g.r.Intn(4); n > 0; n-- {
		b.WriteString(g.pick(pieces...))
	}
	return b.String()
}

func (g *gen) stmt(d int) string {
	if d <= 0 || g.tokens > 400 {
		switch g.r.Intn(3) {
		case 0:
			return g.text()
		default:
			return g.output(g.scalar(2))
		}
	}
	switch g.r.Intn(20) {
	case 0, 1, 2:
		return g.text()
	case 3, 4, 5, 6:
		return g.output(g.scalar(3))
	case 7, 8:
		return g.ifStmt(d)
	case 9, 10, 11:
		return g.forStmt(d)
	case 12, 13:
		return g.setStmt(d)
	case 14:
		return g.macroStmt(d)
	case 15:
		return g.filterBlock(d)
	case 16:
		return g.withStmt(d)
	case 17:
		return g.pick("{# a comment #}", "{#- trimmed -#}", "{# {{ x }} #}") + g.text()
	case 18:
		return g.nsStmt(d)
	default:
		return g.rawOrMisc(d)
	}
}

func (g *gen) body(d int) string {
	var b strings.Builder
	for n := 1 + g.r.Intn(3); n > 0; n-- {
		b.WriteString(g.stmt(d - 1))
	}
	return b.String()
}

// nl is what separates a tag from its body: nothing, or a line break
// (trim_blocks and lstrip_blocks at work), with indentation.
func (g *gen) nl() string { return g.pick("", "", "\n", "\n  ", " ") }

func (g *gen) ifStmt(d int) string {
	var b strings.Builder
	b.WriteString(g.tag("if " + g.cond(2)))
	b.WriteString(g.nl() + g.scoped(d))
	for g.chance(30) {
		b.WriteString(g.tag("elif " + g.cond(2)))
		b.WriteString(g.nl() + g.scoped(d))
	}
	if g.chance(40) {
		b.WriteString(g.tag("else") + g.nl() + g.scoped(d))
	}
	b.WriteString(g.tag("endif") + g.nl())
	return b.String()
}

func (g *gen) scoped(d int) string {
	g.push()
	defer g.pop()
	return g.body(d)
}

func (g *gen) forStmt(d int) string {
	g.push()
	defer g.pop()
	var head string
	switch g.r.Intn(6) {
	case 0:
		k, v := g.fresh("k"), g.fresh("v")
		head = fmt.Sprintf("%s, %s in %s|%s", k, v, g.name(kDict), g.pick("items", "dictsort"))
		g.bind(k, kStr)
		g.bind(v, kInt)
	case 1:
		a, b := g.fresh("a"), g.fresh("b")
		head = fmt.Sprintf("%s, %s in %s", a, b, g.pick("pairs", "pairs", "d.items()", "d.items()", "[(1, 2), (3, 4)]", "words|batch(2)", "nested"))
		g.bind(a, kStr)
		g.bind(b, kInt)
	case 2:
		x := g.fresh("p")
		head = x + " in people"
		g.bind(x, kDict)
	case 3:
		x := g.fresh("c")
		head = x + " in " + g.expr(kStr, 1)
		g.bind(x, kStr)
	default:
		x := g.fresh("i")
		if g.chance(70) { // a list of numbers, as x is bound
			head = x + " in " + g.intList()
		} else {
			head = x + " in " + g.expr(kList, 2)
		}
		g.bind(x, kInt)
	}
	if g.chance(20) {
		head += " if " + g.cond(1)
	}
	g.loops++
	body := g.body(d)
	g.loops--
	s := g.tag("for "+head) + g.nl() + body
	if g.chance(20) {
		s += g.tag("else") + g.nl() + g.body(d)
	}
	return s + g.tag("endfor") + g.nl()
}

func (g *gen) setStmt(d int) string {
	x := g.fresh("v")
	switch g.r.Intn(5) {
	case 0:
		s := g.tag("set "+x) + g.body(d) + g.tag("endset")
		if g.chance(50) {
			s = g.tag("set "+x+" | "+g.pick("upper", "trim", "replace('a', 'o')", "length", "wordcount", "center(9)", "indent(2)")) + g.body(d) + g.tag("endset")
			g.bind(x, kStr) // text through a filter: a string or, after length, a number
			return s
		}
		g.bind(x, kStr)
		return s
	case 1:
		y := g.fresh("w")
		s := g.tag(fmt.Sprintf("set %s, %s = %s", x, y, g.pick("1, 2", "[3, 7]", "(n, neg)", "items[:2]", "range(2)", "1, 2", "'ab'")))
		g.bind(x, kInt)
		g.bind(y, kInt)
		return s
	default:
		k := kind(g.r.Intn(int(numKinds)))
		s := g.tag(fmt.Sprintf("set %s = %s", x, g.expr(k, 3)))
		g.bind(x, k)
		return s
	}
}

func (g *gen) macroStmt(d int) string {
	name := g.fresh("m")
	params := g.r.Intn(4)
	var ps []string
	g.push()
	defaults := false
	for i := 0; i < params; i++ {
		p := fmt.Sprintf("a%d", i)
		switch {
		case i > 0 && g.chance(30):
			ps = append(ps, p+"="+fmt.Sprintf("a%d", i-1)) // a default that refers to an earlier argument
			defaults = true
		case defaults || i >= params-1 && g.chance(50):
			ps = append(ps, p+"="+g.expr(kInt, 1))
			defaults = true
		default:
			ps = append(ps, p)
		}
		g.bind(p, kInt)
	}
	caller := g.chance(40)
	body := g.body(d)
	if caller {
		body += g.output("caller(" + g.pick("", "", "", "", "", "", "", "1", "'x'") + ")")
	}
	if g.chance(15) {
		body += g.output(g.pick("varargs|length", "kwargs|length", "varargs|join(',')"))
	}
	g.pop()
	s := g.tag(fmt.Sprintf("macro %s(%s)", name, strings.Join(ps, ", "))) + g.nl() + body + g.tag("endmacro") + g.nl()
	for n := 1 + g.r.Intn(2); n > 0; n-- {
		args := g.args(params)
		if caller || g.chance(4) {
			var cparams string
			if g.chance(30) {
				cparams = "(x=1)"
			}
			g.push()
			if cparams != "" {
				g.bind("x", kInt)
			}
			s += g.tag(fmt.Sprintf("call%s %s(%s)", cparams, name, args)) + g.nl() + g.body(d) + g.tag("endcall") + g.nl()
			g.pop()
		} else {
			s += g.output(fmt.Sprintf("%s(%s)", name, args))
		}
	}
	return s
}

func (g *gen) args(params int) string {
	var as []string
	n := params
	if g.chance(20) {
		n = g.r.Intn(params + 2)
	}
	kw := false
	for i := 0; i < n; i++ {
		if kw = kw || g.chance(15); kw {
			as = append(as, fmt.Sprintf("a%d=%s", i, g.expr(kInt, 1)))
			continue
		}
		as = append(as, g.expr(kInt, 1))
	}
	return strings.Join(as, ", ")
}

func (g *gen) filterBlock(d int) string {
	f := g.pick("upper", "lower", "trim", "title", "capitalize", "replace('a', 'b')", "center(20)", "indent(4, true)", "striptags", "e", "truncate(10)", "wordwrap(5)")
	if g.chance(5) {
		f = g.pick("wordcount", "length") // not a string: fails, in both
	}
	return g.tag("filter "+f) + g.nl() + g.scoped(d) + g.tag("endfilter") + g.nl()
}

func (g *gen) withStmt(d int) string {
	g.push()
	defer g.pop()
	x := g.fresh("w")
	k := kind(g.r.Intn(int(numKinds)))
	head := fmt.Sprintf("with %s = %s", x, g.expr(k, 2))
	g.bind(x, k)
	return g.tag(head) + g.nl() + g.body(d) + g.tag("endwith") + g.nl()
}

// nsStmt uses namespace, cycler or joiner across a loop.
func (g *gen) nsStmt(d int) string {
	i := g.fresh("i")
	list := g.expr(kList, 1)
	switch g.r.Intn(3) {
	case 0:
		ns := g.fresh("ns")
		return g.tag(fmt.Sprintf("set %s = namespace(c=0, s='')", ns)) +
			g.tag(fmt.Sprintf("for %s in %s", i, list)) +
			g.tag(fmt.Sprintf("set %s.c = %s.c + 1", ns, ns)) + g.tag(fmt.Sprintf("set %s.s = %s.s ~ %s", ns, ns, i)) +
			g.tag("endfor") + g.output(fmt.Sprintf("%s.c ~ ':' ~ %s.s", ns, ns))
	case 1:
		c := g.fresh("cy")
		s := g.tag(fmt.Sprintf("set %s = cycler(%s)", c, g.pick("'a', 'b'", "1, 2, 3", "'x'"))) +
			g.tag(fmt.Sprintf("for %s in %s", i, list)) + g.output(c+".next()") + g.tag("endfor")
		if g.chance(30) {
			s += g.output(c + ".current")
		}
		if g.chance(30) {
			s += g.output(c+".reset() is none") + g.output(c+".next()")
		}
		return s
	default:
		j := g.fresh("j")
		return g.tag(fmt.Sprintf("set %s = joiner(%s)", j, g.pick("", "', '", "'|'"))) +
			g.tag(fmt.Sprintf("for %s in %s", i, list)) + g.output(j+"()") + g.output(i+"|string") + g.tag("endfor")
	}
}

func (g *gen) rawOrMisc(d int) string {
	switch g.r.Intn(3) {
	case 0:
		return g.tag("raw") + g.pick("{{ x }}", "{% if %}", " a ", "\n{{-") + g.tag("endraw")
	case 1:
		return g.tag("autoescape "+g.pick("true", "false")) + g.nl() + g.output(g.pick("html", "'<a>'", "s ~ '&'", "html|safe", "'<'|e")) + g.tag("endautoescape")
	default:
		return g.tag("set yaml = "+g.pick("true", "false", "true", "false", "true", "'x'")) + g.text()
	}
}

// ---------------------------------------------------------------- expressions

// scalar is an expression to print: mostly a string or number, sometimes
// anything (a list or none fails PaV's finalize, and must fail in Jinja too).
func (g *gen) scalar(d int) string {
	switch g.r.Intn(12) {
	case 0:
		return g.expr(kList, d) + "|" + g.pick("tojson", "join(',')", "string", "length", "first", "last", "sum", "max", "min", "pprint", "list|tojson")
	case 1:
		return g.expr(kDict, d) + "|" + g.pick("tojson", "string", "length", "dictsort|tojson", "items|list|string", "xmlattr", "tojson(2)")
	case 2:
		if g.chance(30) { // may fail the finalize, in both
			return g.expr(kind(g.r.Intn(int(numKinds))), d)
		}
		return g.expr(kStr, d)
	case 3:
		return g.expr(kBool, d)
	case 4, 5:
		return g.expr(kInt, d)
	case 6:
		return g.expr(kFloat, d)
	default:
		return g.expr(kStr, d)
	}
}

func (g *gen) cond(d int) string { return g.expr(kBool, d) }

func (g *gen) expr(k kind, d int) string {
	g.tokens += 2
	if d <= 0 || g.tokens > 400 || g.chance(25) {
		return g.atom(k)
	}
	if g.chance(4) {
		return fmt.Sprintf("(%s if %s else %s)", g.expr(k, d-1), g.cond(d-1), g.expr(k, d-1))
	}
	if g.chance(1) {
		// a value of another kind: the render may fail, and must fail alike
		return g.expr(kind(g.r.Intn(int(numKinds))), d-1)
	}
	switch k {
	case kInt:
		return g.intExpr(d)
	case kFloat:
		return g.floatExpr(d)
	case kStr:
		return g.strExpr(d)
	case kBool:
		return g.boolExpr(d)
	case kList:
		return g.listExpr(d)
	case kDict:
		return g.dictExpr(d)
	}
	return g.atom(kNone)
}

// primary is an expression an accessor or call may follow: in parentheses,
// or a filter's name would take it in (`x|f.m()` calls the filter "f.m").
func (g *gen) primary(k kind, d int) string {
	e := g.expr(k, d)
	if regexp.MustCompile(`^[a-z_][a-z0-9_]*$`).MatchString(e) {
		return e
	}
	return "(" + e + ")"
}

func (g *gen) atom(k kind) string {
	if g.chance(40) {
		return g.name(k)
	}
	if g.loops > 0 && g.chance(15) {
		switch k {
		case kInt:
			return "loop." + g.pick("index", "index0", "revindex", "revindex0", "length", "depth", "depth0")
		case kBool:
			return "loop." + g.pick("first", "last")
		case kStr:
			return g.pick("loop.cycle('odd', 'even')", "(loop.previtem|default('-'))|string", "(loop.nextitem|default('-'))|string")
		}
	}
	switch k {
	case kInt:
		lits := []string{"0", "1", "2", "3", "-1", "7", "10", "255", "-3", "1_000", "0x1F", "0o17", "0b101"}
		if g.on(featBigInt) && g.chance(5) { // past 64 bits: mostly a deliberate divergence
			lits = []string{"9223372036854775807", "2**64", "12345678901234567890"}
		}
		return g.pick(lits...)
	case kFloat:
		return g.pick("0.5", "2.0", "-1.25", "1e3", "1.5e-5", "1e16", "0.1", "3.14159", "1_0.5", "-0.0", "1E2")
	case kStr:
		return g.strLit()
	case kBool:
		return g.pick("true", "false", "True", "False")
	case kNone:
		return g.pick("none", "None", "nil", "d.get('zz')", "undefined_name")
	case kList:
		if g.chance(30) { // lists of mixed items: some operations fail, in both
			return g.pick("(1, 'x')", "[1, [2, 3]]", "['x', none]", "[true, 1]")
		}
		return g.pick("[]", "[1, 2, 3]", "['b', 'a', 'B']", "(2,)", "[0.5, 2, -1]", "('a', 'b')", "[3, 1, 2]")
	case kDict:
		return g.pick("{}", "{'a': 1}", "{'z': 'y', 'b': [1]}", "{'k': none}", "{1: 'one', 'x': 2}")
	}
	return "none"
}

func (g *gen) strLit() string {
	lits := []string{"''", "'a'", "'hello'", `"dq"`, `'it''s'`, `'a\nb'`, `"tab\there"`, `'  x  '`, `'Mixed Case'`, `'a,b,,c'`, `'<p>x</p>'`, `'%s'`, `'{}-{}'`, `'42'`, `'-0x1a'`, `'3.5e1'`, `'a-b c_d'`, `'\\'`, `'{{ x }}'`, `'UPPER'`, `'x y z w'`}
	if g.on(featUnicode) {
		g.used[featUnicode] = true
		lits = append(lits, `'é'`, `'straße'`, `'日本語'`, `'😀x'`, `'İ'`, `'ǅ'`, `'ﬁ'`, `'Ä b'`, `'\u00e9'`, `'naïve café'`)
	}
	return g.pick(lits...)
}

func (g *gen) intExpr(d int) string {
	a := func() string { return g.expr(kInt, d-1) }
	switch g.r.Intn(20) {
	case 0, 1:
		return fmt.Sprintf("(%s %s %s)", a(), g.pick("+", "-", "*", "//", "%"), a())
	case 2:
		return fmt.Sprintf("(%s ** %s)", a(), g.pick("0", "1", "2", "3", "-1"))
	case 3:
		return g.pick("-", "+") + a()
	case 4:
		return g.expr(kStr, d-1) + "|" + g.pick("length", "count", "wordcount")
	case 5:
		l := g.intList()
		if g.chance(20) {
			l = g.expr(kList, d-1)
		}
		return l + "|" + g.pick("length", "sum", "first", "last", "max", "min", "sum(start=1)")
	case 6:
		return g.expr(kind(g.r.Intn(3)), d-1) + "|" + g.pick("int", "abs", "int(7)", "round|int")
	case 7:
		return g.expr(kStr, d-1) + "|int" + g.pick("", "(-1)", "(base=16)", "(0, 8)", "(base=2)")
	case 8:
		return g.primary(kStr, d-1) + "." + g.pick("count('l')", "find('o')", "rfind('l')", "index('l')", "count('')")
	case 9:
		return g.primary(kList, d-1) + "." + g.pick("count(1)", "index(1)", "index('a')")
	case 10:
		return fmt.Sprintf("range(%s)|%s", g.rangeArgs(), g.pick("length", "sum", "last", "first"))
	case 11:
		return fmt.Sprintf("%s[%s]", g.pick("items", "nested[0]", "[4, 5, 6]", "range(10)"), g.pick("0", "-1", "1", "n", "5"))
	case 12:
		if g.chance(10) {
			return fmt.Sprintf("%s.%s", g.pick("d", "people[0]", "obj"), g.pick("a", "age", "b", "c"))
		}
		return g.pick("d.a", "d.b", "d['c']", "people[0].age", "people[-1].age", "(people|last).age")
	case 13:
		return g.pick("people|map(attribute='age')|sum", "people|sum(attribute='age')", "(people|max(attribute='age')).age", "(people|min(attribute='age')).age", "d|length", "d.values()|sum")
	case 14:
		return g.expr(kBool, d-1) + g.pick(" + 1", "|int", " * 3")
	default:
		return fmt.Sprintf("(%s %s %s)", a(), g.pick("+", "-", "*"), a())
	}
}

// intList is a list of integers, never empty.
func (g *gen) intList() string {
	return g.pick("items", "[1, 2, 3]", "range(1, 5)|list", "d.values()|list", "[0, -1, 7]", "(4, 2)", "range(n)")
}

func (g *gen) rangeArgs() string {
	return g.pick("3", "0", "-2", "1, 5", "5, 1", "10, 0, -3", "0, 10, 4", "n", "n, 0, -1", "2, 2")
}

func (g *gen) floatExpr(d int) string {
	a := func() string { return g.expr(kFloat, d-1) }
	i := func() string { return g.expr(kInt, d-1) }
	switch g.r.Intn(10) {
	case 0, 1:
		return fmt.Sprintf("(%s %s %s)", a(), g.pick("+", "-", "*", "/", "//", "%"), g.pick(a(), i()))
	case 2:
		return fmt.Sprintf("(%s / %s)", i(), i())
	case 3:
		return a() + "|round" + g.pick("", "(1)", "(2, 'floor')", "(0, 'ceil')", "(1, 'common')")
	case 4:
		return g.expr(kind(g.r.Intn(3)), d-1) + "|float" + g.pick("", "(1.5)")
	case 5:
		return a() + "|abs"
	case 6:
		return fmt.Sprintf("(%s ** %s)", a(), g.pick("2", "0.5", "-1", "0"))
	default:
		return fmt.Sprintf("(%s %s %s)", a(), g.pick("+", "-", "*"), a())
	}
}

func (g *gen) strExpr(d int) string {
	s := func() string { return g.expr(kStr, d-1) }
	i := func() string { return g.expr(kInt, d-1) }
	switch g.r.Intn(32) {
	case 0, 1:
		return fmt.Sprintf("(%s ~ %s)", s(), g.expr(kind(g.r.Intn(5)), d-1))
	case 2:
		return fmt.Sprintf("(%s + %s)", s(), s())
	case 3:
		return fmt.Sprintf("(%s * %s)", s(), g.pick("0", "2", "3", "-1", i()))
	case 4, 5, 6:
		return s() + "|" + g.pick("upper", "lower", "capitalize", "title", "trim", "striptags", "e", "forceescape", "string", "reverse|join", "urlencode", "urlize", "trim('x')", "safe", "escape")
	case 7:
		return s() + "|" + g.pick("center", "center(9)", "center(10)", "center(3)", "indent", "indent(2)", "indent(2, true)", "indent(first=true, blank=true)", "indent('> ')")
	case 8:
		return s() + "|truncate(" + g.pick("5", "9", "3, true", "5, false, '..'", "4, leeway=0", "6, true, '', 0", "255") + ")"
	case 9:
		return s() + "|wordwrap(" + g.pick("5", "3", "10, false", "4, true, '|'", "2, break_on_hyphens=false", "6, wrapstring='/'") + ")"
	case 10:
		return s() + "|replace(" + g.pick("'l', 'L'", "'', '-'", "'o', '0', 1", "' ', ''", "'a', 'aa'") + ")"
	case 11:
		return g.expr(kList, d-1) + "|join" + g.pick("", "(', ')", "('-')", "(attribute='name')", "('')")
	case 12:
		return fmt.Sprintf("%s[%s]", g.primary(kStr, d-1), g.pick("0", "-1", "1", "n", "10"))
	case 13:
		return fmt.Sprintf("%s[%s]", g.primary(kStr, d-1), g.pick(":2", "1:", "::-1", "::2", "-3:", "1:-1", "n:", ":-n", "5:1:-1"))
	case 14:
		return g.primary(kStr, d-1) + "." + g.pick("upper()", "lower()", "strip()", "title()", "capitalize()", "swapcase()", "lstrip('h')", "rstrip()", "zfill(6)", "ljust(8, '*')", "rjust(7)", "center(9, '-')", "replace('l', '', 1)", "casefold()", "expandtabs(4)", "removeprefix('he')", "removesuffix('ld')", "strip(' hd')")
	case 15:
		return fmt.Sprintf("%s.format(%s)", g.pick("'{}-{}'", "'{0}{0}'", "'{:>6}'", "'{:05d}'", "'{!r}'", "'{:.2f}'", "'{:,}'", "'{a}'", "'{:^7}'", "'{!s:>4}'", "'{0:x}'", "'{:+}'", "'{:e}'", "'{:%}'"), g.pick("1, 2", "s", "n", "f", "1234567", "a=1", "'x', 'y'", "u", "3.14159", "-5"))
	case 16:
		return fmt.Sprintf("(%s %% %s)", g.pick("'%s'", "'%d'", "'%s-%s'", "'%5.2f'", "'%x'", "'%r'", "'%(a)s'", "'%-4s|'", "'%05d'", "'%c'"), g.pick("n", "s", "(1, 2)", "('a', 'b')", "f", "{'a': 1}", "255", "(s,)", "65"))
	case 17:
		return g.expr(kind(g.r.Intn(int(numKinds))), d-1) + "|" + g.pick("tojson", "string", "pprint", "tojson(indent=2)")
	case 18:
		return g.expr(kind(g.r.Intn(3)), d-1) + "|tobash"
	case 19:
		return fmt.Sprintf("%s|default(%s%s)", g.expr(kind(g.r.Intn(int(numKinds))), d-1), s(), g.pick("", ", true", ", boolean=true"))
	case 20:
		return g.expr(kInt, d-1) + "|filesizeformat" + g.pick("", "(true)", "(binary=true)")
	case 21:
		return g.expr(kList, d-1) + "|" + g.pick("first", "last", "min", "max", "join", "sort|first", "string", "unique|join(',')", "map('string')|join", "map('upper')|join('+')")
	case 22:
		return fmt.Sprintf("%s|format(%s)", g.pick("'%s=%s'", "'%d'", "'%.3f'", "'%s'"), g.pick("s, n", "n", "f", "'x', 1", "[1]"))
	case 23:
		return g.pick("obj.name", "obj['name']", "obj.labels.app", "obj.labels['k']", "people[0].name", "(people|first).name", "obj.labels|dictsort|first|first", "d|first", "d|list|join", "d|max", "obj.get('name')", "obj.get('zz', 'dflt')", "pairs|first|first")
	case 24:
		return g.expr(kDict, d-1) + "|xmlattr" + g.pick("", "(false)")
	case 25:
		l := g.pick("words", "['b', 'a']", "s.split()", "(s ~ 'x')|list", "obj.labels|list")
		if g.chance(20) {
			l = g.expr(kList, d-1) // maybe not strings: an error
		}
		return fmt.Sprintf("%s.join(%s)", g.pick("','", "''", "' - '", "'é'"), l)
	case 26:
		return fmt.Sprintf("%s|wordcount|string", s())
	case 27:
		g.used[featAddress] = true
		return fmt.Sprintf("%s|attr(%s)|string", g.expr(kind(g.r.Intn(int(numKinds))), d-1), g.pick("'name'", "'upper'", "'a'", "'zz'"))
	case 28:
		return fmt.Sprintf("(%s|%s|list|join('/'))", g.expr(kList, d-1), g.pick("batch(2)|map('join')", "slice(2)|map('join')", "batch(2, 'x')|map('join')", "reverse", "unique", "sort(reverse=true)", "sort(case_sensitive=true)", "map('lower')", "select|map('string')", "reject('none')|map('string')", "select('odd')|map('string')", "select('string')", "reject('number')|map('string')", "select('ge', 2)|map('string')", "map('int')|map('string')"))
	case 29:
		src := g.pick(`people|groupby(%s)`, `pairs|groupby(%s)`, `[{'a': 1}, {'a': 2}, {'a': 1}]|groupby(%s)`)
		attr := map[string]string{`people|groupby(%s)`: g.pick("'age'", "'name'"), `pairs|groupby(%s)`: g.pick("0", "1"), `[{'a': 1}, {'a': 2}, {'a': 1}]|groupby(%s)`: "'a'"}[src]
		if g.chance(10) {
			attr = g.pick("'age'", "0", "'name'", "'a'") // maybe one the items lack: an error
		}
		return "(" + fmt.Sprintf(src, attr) + "|map('first')|map('string')|join(','))"
	case 30:
		return fmt.Sprintf("(%s|%s|map(attribute='name')|join(','))", "people", g.pick("selectattr('age', 'gt', 26)", "rejectattr('age', 'eq', 30)", "selectattr('name')", "sort(attribute='age')", "sort(attribute='age,name', reverse=true)", "unique(attribute='age')", "selectattr('age', 'in', [25])"))
	default:
		return s() + "|" + g.pick("lower", "upper", "length|string", "list|join('.')", "first", "last", "list|last")
	}
}

func (g *gen) boolExpr(d int) string {
	any := func() string {
		if g.chance(80) { // mostly scalars: fewer templates that fail in both
			return g.expr(kind(g.r.Intn(int(kBool)+1)), d-1)
		}
		return g.expr(kind(g.r.Intn(int(numKinds))), d-1)
	}
	switch g.r.Intn(14) {
	case 0, 1:
		k := kind(g.r.Intn(3))
		return fmt.Sprintf("(%s %s %s)", g.expr(k, d-1), g.pick("==", "!=", "<", "<=", ">", ">="), g.expr(k, d-1))
	case 2:
		return fmt.Sprintf("(%s %s %s %s %s)", g.expr(kInt, d-1), g.pick("<", "<=", "=="), g.expr(kInt, d-1), g.pick("<", ">", "!="), g.expr(kInt, d-1))
	case 3:
		return fmt.Sprintf("(%s %s %s)", any(), g.pick("==", "!="), any())
	case 4, 5:
		t := g.pick("defined", "undefined", "none", "number", "integer", "float", "string", "mapping", "sequence", "iterable", "callable", "boolean", "true", "false", "odd", "even", "divisibleby(3)", "lower", "upper", "eq 3", "ne(1)", "lt(2)", "gt 0", "ge(1)", "le(5)", "in([1, 'a'])", "sameas(true)", "escaped", "filter", "test")
		return fmt.Sprintf("(%s is %s%s)", any(), g.pick("", "not "), t)
	case 6:
		return fmt.Sprintf("(%s %s %s)", g.expr(kInt, d-1), g.pick("in", "not in"), g.expr(kList, d-1))
	case 7:
		return fmt.Sprintf("(%s %s %s)", g.expr(kStr, d-1), g.pick("in", "not in"), g.pick(g.expr(kStr, d-1), g.expr(kDict, d-1), g.expr(kList, d-1)))
	case 8:
		return g.pick("not ", "not not ") + any()
	case 9:
		return fmt.Sprintf("(%s %s %s)", any(), g.pick("and", "or"), any())
	case 10:
		return g.primary(kStr, d-1) + "." + g.pick("startswith('h')", "endswith('d')", "startswith(('x', 'he'))", "endswith(('z',))", "isupper()", "islower()", "isdigit()", "isalpha()", "isspace()", "istitle()", "isalnum()", "isnumeric()")
	case 11:
		return g.expr(kStr, d-1) + "|" + g.pick("length", "string", "list") + " == " + any()
	case 12:
		return fmt.Sprintf("(%s %s %s)", any(), g.pick("is", "is not"), g.pick("true", "false", "none", "number", "defined"))
	default:
		return fmt.Sprintf("(%s or %s)", any(), g.pick("42", "'dflt'", "0", "[]"))
	}
}

func (g *gen) listExpr(d int) string {
	switch g.r.Intn(14) {
	case 0, 1:
		var items []string
		for n := g.r.Intn(4); n > 0; n-- {
			items = append(items, g.expr(kind(g.r.Intn(4)), d-1))
		}
		if len(items) == 0 && g.chance(25) {
			return "()"
		}
		if len(items) > 0 && g.chance(25) {
			return "(" + strings.Join(items, ", ") + ",)"
		}
		return "[" + strings.Join(items, ", ") + "]"
	case 2:
		return fmt.Sprintf("(%s + %s)", g.expr(kList, d-1), g.expr(kList, d-1))
	case 3:
		return fmt.Sprintf("(%s * %s)", g.expr(kList, d-1), g.pick("0", "2", "-1"))
	case 4:
		// PaV's range() is a list (a deliberate divergence, the range object's own operators aside)
		return "range(" + g.rangeArgs() + ")|list"
	case 5:
		return g.expr(kStr, d-1) + "|list"
	case 6:
		return g.expr(kList, d-1) + "|" + g.pick("sort", "sort(reverse=true)", "unique|list", "reverse|list", "list", "select|list", "reject('odd')|list", "map('abs')|list", "batch(2)|list", "slice(2)|list", "select('number')|list")
	case 7:
		return g.primary(kStr, d-1) + "." + g.pick("split()", "split(',')", "split(' ', 1)", "rsplit(' ', 1)", "splitlines()", "partition(' ')", "rpartition('l')", "split('l')")
	case 8:
		return g.expr(kDict, d-1) + "|" + g.pick("items|list", "dictsort", "dictsort(by='value')", "dictsort(reverse=true)", "list", "sort")
	case 9:
		return g.primary(kDict, d-1) + "." + g.pick("keys()|list", "values()|list", "items()|list")
	case 10:
		return fmt.Sprintf("%s[%s]", g.primary(kList, d-1), g.pick(":2", "1:", "::-1", "::2", "-2:", "1:-1"))
	default:
		return g.name(kList)
	}
}

func (g *gen) dictExpr(d int) string {
	switch g.r.Intn(6) {
	case 0, 1:
		var items []string
		for n := g.r.Intn(4); n > 0; n-- {
			items = append(items, fmt.Sprintf("%s: %s", g.pick("'a'", "'b'", "'k'", "'zz'", "'é'"), g.expr(kind(g.r.Intn(4)), d-1)))
		}
		return "{" + strings.Join(items, ", ") + "}"
	case 2:
		return fmt.Sprintf("dict(%s)", g.pick("", "a=1", "b=n, a=s", "x=[1], y=none"))
	case 3:
		return g.pick("obj.labels", "people[0]", "people|first", "people|last", "d.copy()", "obj")
	default:
		return g.name(kDict)
	}
}

// ---------------------------------------------------------------- stress

// stress is a construct that approaches or passes one of PaV's limits,
// printing a number that tells whether the limit held (see limitProbe).
func (g *gen) stress() string {
	g.used[featStress] = true
	marker := g.fresh("probe")
	probe := func(max int64, what, body string) string {
		g.probes = append(g.probes, limitProbe{marker: marker + "=", max: max, what: what})
		return marker + "=" + body + ";"
	}
	pickN := func(ns ...int64) int64 { return ns[g.r.Intn(len(ns))] }
	switch g.r.Intn(6) {
	case 0:
		n := pickN(1000, 262144, 262145, 300000)
		return probe(maxListItems, "list items", fmt.Sprintf("{{ ([0] * %d)|length }}", n))
	case 1:
		n := pickN(1000, 262144, 262145, 300000)
		return probe(maxListItems, "list items", fmt.Sprintf("{{ (range(%d)|list + range(%d)|list)|length }}", n/2, n-n/2))
	case 2:
		n := pickN(1000, 1<<22, 1<<22+1, 5<<20)
		return probe(maxOutputBytes, "string bytes", fmt.Sprintf("{{ ('ab' * %d)|length }}", n/2+n%2))
	case 3:
		a, b := pickN(10, 1000, 1001), pickN(100, 999, 1000, 1001)
		return probe(maxSteps, "loop iterations", fmt.Sprintf("{%% set ns = namespace(n=0) %%}{%% for i in range(%d) %%}{%% for j in range(%d) %%}{%% set ns.n = ns.n + 1 %%}{%% endfor %%}{%% endfor %%}{{ ns.n + %d }}", a, b, a))
	case 4:
		n := pickN(10, 98, 99, 100, 101, 140)
		return probe(maxDepth, "nesting of macro calls", fmt.Sprintf("{%% macro r(k) %%}{%% if k > 0 %%}{{ r(k - 1) }}{%% else %%}{{ 0 }}{%% endif %%}{%% endmacro %%}{{ r(%d) and %d + 1 }}", n, n))
	default:
		n := int(pickN(10, 99, 100, 101, 130))
		return probe(maxNesting, "nesting of brackets", fmt.Sprintf("{{ %s1%s and %d }}", strings.Repeat("(", n), strings.Repeat(")", n), n))
	}
}
