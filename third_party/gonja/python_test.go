package gonja_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/nikolalohinski/gonja/v2"
	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

var pyVars = map[string]any{"x": 1, "d": map[string]any{"k": "v"}, "n": nil}

// Undefined is not none: Jinja tells them apart in tests, default, ==, ~,
// for loops and attribute access.
func TestUndefinedIsNotNone(t *testing.T) {
	checkJinja(t, map[string]string{
		"{{ x is defined }}|{{ missing is defined }}|{{ n is none }}|{{ missing is none }}|{{ missing is undefined }}":          "True|False|True|False|True",
		"{{ missing == n }}|{{ missing == missing2 }}|{{ n == n }}|{{ missing != n }}":                                          "False|True|True|True",
		"{{ missing ~ 'a' }}|{{ n ~ 'a' }}|{{ 'a' ~ missing ~ 'b' }}":                                                           "a|Nonea|ab",
		"{{ missing | default('d') }}|{{ n | default('d') is none }}|{{ '' | default('d', true) }}|{{ d.nope | default('e') }}": "d|True|d|e",
		"{% for i in missing %}{{ i }}{% else %}empty{% endfor %}":                                                              "empty",
		"{{ n.a is defined }}|{{ d.k.a is defined }}":                                                                           "False|False",
		"{% for i in [1, 2] %}{{ loop.previtem is defined }}{{ loop.nextitem is defined }} {% endfor %}":                        "FalseTrue TrueFalse ",
	}, pyVars)
	checkPythonFails(t, map[string]string{
		"{% for i in n %}{{ i }}{% endfor %}": "'NoneType' object is not iterable",
		"{{ missing.a }}":                     "'missing' is undefined",
		"{{ missing[0] }}":                    "'missing' is undefined",
	})
}

// Operators have Python's semantics.
func TestPythonArithmetic(t *testing.T) {
	checkJinja(t, map[string]string{
		"{{ 7 // -2 }}|{{ 7 % -3 }}|{{ 2 ** 10 }}|{{ 1 / 2 }}|{{ 2 ** -1 }}|{{ -7.5 // 2 }}|{{ True + 1 }}":                  "-4|-2|1024|0.5|0.5|-4.0|2",
		"{{ '%s-%03d' % ('a', 7) }}|{{ '%(k)s' % d }}|{{ '%.2f' % 1.005 }}|{{ 'ab' * 2 }}|{{ ([1] * 2 + [2]) | join(',') }}": "a-007|v|1.00|abab|1,1,2",
	}, pyVars)
	checkPythonFails(t, map[string]string{
		"{{ 'a' + 1 }}":    `can only concatenate str (not "int") to str`,
		"{{ 1 < 'a' }}":    "'<' not supported between instances of 'int' and 'str'",
		"{{ n < 1 }}":      "'<' not supported between instances of 'NoneType",
		"{{ 1 / 0 }}":      "division by zero",
		"{{ 1 // 0 }}":     "integer division or modulo by zero",
		"{{ '%d' % 'a' }}": "%d format: a real number is required, not str",
		// an error inside a list is not lost (Hooks record it)
		"{{ [1 + 'a'] | length }}":      "unsupported operand type(s) for +",
		"{{ 9223372036854775807 + 1 }}": "integer overflow",
		// Limits
		"{{ 'ab' * 6 }}":            "repetition result too large",
		"{{ 'abcdef' ~ 'abcdef' }}": "string too long",
		"{{ '%20s' % 'a' }}":        "format width or precision too large",
	})
}

// Filters and tests have Python's semantics.
func TestPythonFiltersAndTests(t *testing.T) {
	checkJinja(t, map[string]string{
		"{{ {'b': 1, 'a': 2} | dictsort | first | first }}|{{ {'a': 1, 'b': 0} | dictsort(by='value') | first | first }}":                           "a|b",
		"{{ {'a b': 'c/d'} | urlencode }}|{{ 'a b/c' | urlencode }}":                                                                                "a+b=c%2Fd|a%20b/c",
		"{{ 2.5 | round }}|{{ 3.5 | round }}|{{ 1.25 | round(1) }}|{{ 12345 | round(-2) }}|{{ 2.1 | round(0, 'ceil') }}":                            "2.0|4.0|1.2|12300|3.0",
		"{{ [1, n, 'a'] | string }}|{{ '%s=%s' | format('a', 1) }}|{{ [1, 2.5] | sum }}|{{ [[1], [2]] | sum(start=[]) | length }}|{{ True | int }}": "[1, None, 'a']|a=1|3.5|2|1",
		"{{ 'ab' is sequence }}|{{ {} is sequence }}|{{ 'upper' is filter }}|{{ 'odd' is test }}|{{ 1 is lt 2 }}|{{ 'a' is gt 'b' }}":               "True|True|True|True|True|False",
	}, pyVars)
	checkPythonFails(t, map[string]string{
		"{{ [2, 'a'] | sort }}":                  "'<' not supported between instances of 'str' and 'int'",
		"{{ [1, 2] | select('nosuch') | list }}": "no test named 'nosuch'",
		"{{ 1 is lt 'a' }}":                      "'<' not supported between instances of 'int' and 'str'",
	})
}

// str and dict methods have Python's defaults and order.
func TestPythonMethods(t *testing.T) {
	checkJinja(t, map[string]string{
		"{{ 'a b  c'.split() | join(',') }}|{{ 'a,b,c'.rsplit(',', 1) | join('/') }}|{{ 'xxaxx'.strip('x') }}|{{ 'a'.center(5, '*') }}": "a,b,c|a,b/c|a|**a**",
		"{{ 'aaa'.replace('a', 'b', 2) }}|{{ 'aXa'.count('a') }}|{{ 'abc'.index('c') }}":                                                "bba|2|2",
		"{{ {'b': 1, 'a': 2}.keys() | join(',') }}|{{ {'b': 1, 'a': 2}.values() | join(',') }}":                                         "b,a|1,2",
	}, nil)
}

// Strings are sequences of characters, not bytes: iteration, indices,
// padding and find count code points; case mappings are Unicode's full ones.
func TestStringsAreCharacters(t *testing.T) {
	checkJinja(t, map[string]string{
		"{% for c in 'hé' %}[{{ c }}]{% endfor %}|{{ 'héllo'[1] }}|{{ 'héllo'[-4] }}|{{ 'hé' | reverse }}|{{ 'hé' | last }}":   "[h][é]|é|é|éh|é",
		"{{ 'straße' | upper }}|{{ 'straße'.upper() }}|{{ 'ÉA' | lower }}|{{ 'ßa' | capitalize }}":                             "STRASSE|STRASSE|éa|Ssa",
		"[{{ 'é' | center(4) }}]|[{{ 'abc' | center(6) }}]|{{ 'héllo'.find('l') }}|{{ 'é'.zfill(3) }}|{{ 'abc'.find('', 5) }}": "[ é  ]|[ abc  ]|2|00é|-1",
	}, nil)
}

// Comparisons chain as Python's (a < b < c is a < b and b < c, b evaluated
// once), a bool equals the number it is and is a number, an empty dict is
// false, and not nests and gives a bool.
func TestComparisonAndTruth(t *testing.T) {
	checkJinja(t, map[string]string{
		"{{ 0 < x < 3 }}|{{ 1 < 5 < 3 }}|{{ 3 > 2 > 1 }}|{{ 1 == 1 == 1 }}|{{ 2 == 2 == true }}|{{ 2 < 1 < 'a' }}": "True|False|True|True|False|False",
		"{{ 1 == true }}|{{ 1.0 == true }}|{{ true in [1] }}|{{ true is number }}|{{ true is integer }}":           "True|True|True|True|False",
		"{{ 'y' if {} else 'n' }}|{{ 'y' if d else 'n' }}|{{ not not x }}|{{ not 0 }}|{{ not {} }}":                "n|y|True|True|True",
	}, pyVars)
	checkPythonFails(t, map[string]string{
		"{{ 1 < 2 < 'a' }}": "'<' not supported between instances of 'int' and 'str'",
	})
}

// A macro's default sees the arguments before it; for and set unpack
// nested and parenthesized tuples; cycler keeps its items' types and resets.
func TestMacrosAndAssignment(t *testing.T) {
	checkJinja(t, map[string]string{
		"{% macro f(a, b=a ~ '!', c=b ~ '?') %}{{ a }}{{ b }}{{ c }}{% endmacro %}{{ f('x') }}|{{ f('x', 'y') }}":                                  "xx!x!?|xyy?",
		"{% for (a, b), c in [((1, 2), 3), ((4, 5), 6)] %}{{ a }}{{ b }}{{ c }};{% endfor %}|{% for a, b, c in ['xyz'] %}{{ c }}{% endfor %}":      "123;456;|z",
		"{% set (p, q) = [3, 4] %}{{ p }}{{ q }}|{% set c = cycler(1, 2) %}{{ c.next() + 1 }}{{ c.next() }}{% set _ = c.reset() %}{{ c.current }}": "34|221",
	}, nil)
	checkPythonFails(t, map[string]string{
		"{% for a, b in [(1, 2, 3)] %}{% endfor %}": "too many values to unpack (expected 2)",
		"{% for a, b in [1] %}{% endfor %}":         "cannot unpack non-iterable int object",
	})
}

// Filters with Python's exact semantics: int's sign before the base's
// prefix, float's whitespace, urlencode's order, striptags' entities,
// wordcount's \w+, min/max returning the item (undefined when empty),
// attr reading no dict item, and is upper/lower wanting a cased character.
func TestPythonFilterSemantics(t *testing.T) {
	checkJinja(t, map[string]string{
		"{{ '-0x1A' | int(base=16) }}|{{ ' 1.5 ' | float }}|{{ {'b': 1, 'a': 2} | urlencode }}|{{ '<b>a &amp; b</b>' | striptags }}|{{ 'a-b c.d' | wordcount }}": "-26|1.5|b=1&a=2|a & b|4",
		"{{ ([{'n': 3, 'k': 'a'}, {'n': 1, 'k': 'b'}] | min(attribute='n')).k }}|{{ [] | max is undefined }}|{{ [[1, 2], [1, 3]] | max | last }}":                "b|True|3",
		"{{ {'a': 1} | attr('a') is undefined }}|{{ '' is upper }}|{{ 'A1' is upper }}|{{ '1' is lower }}":                                                       "True|False|True|False",
		"{{ [] | first is undefined }}|{{ '' | last is undefined }}|{% set a, b = 'ab' %}{{ b }}{{ a }}":                                                         "True|True|ba",
	}, nil)
}

// An integer result outside 64 bits is an error, never a wrap-around.
func TestIntegerOverflowIsAnError(t *testing.T) {
	for _, src := range []string{"{{ -(-9223372036854775807 - 1) }}", "{{ (-9223372036854775807 - 1) | abs }}", "{{ 1e300 | int }}",
		"{{ '99999999999999999999' | int }}", "{{ 9223372036854775807 | round(-1) }}", "{{ [9223372036854775807, 1] | sum }}"} {
		checkPythonFails(t, map[string]string{src: "integer overflow"})
	}
}

// Python's str.format conversions, startswith/endswith with a tuple, and
// list.index/count.
func TestPythonMethodsFormatAndLists(t *testing.T) {
	checkJinja(t, map[string]string{
		"{{ '{!r}'.format('a') }}|{{ '{!s:>4}'.format(1) }}|{{ '{} {!r} {}'.format(1, 'a', 2) }}|{{ '{k!r}'.format(k='v') }}": "'a'|   1|1 'a' 2|'v'",
		"{{ 'hello'.startswith(('x', 'he')) }}|{{ 'hello'.endswith(('lo', 'x')) }}|{{ 'hello'.endswith('l', 0, 4) }}":         "True|True|True",
		"{{ [1, 2, 3, 2].index(2) }}|{{ [1, 2, 3, 2].index(2, 2) }}|{{ [1, 2, 3, 2].count(2) }}|{{ [1, true].count(1) }}":     "1|3|2|2",
	}, nil)
	checkJinja(t, map[string]string{
		"{{ '{:,}'.format(1234567) }}|{{ '{:_x}'.format(1048575) }}|{{ '{:,.2f}'.format(1234567.891) }}|{{ '{:,}'.format(1234.5) }}": "1,234,567|f_ffff|1,234,567.89|1,234.5",
	}, nil)
	checkPythonFails(t, map[string]string{"{{ [1, 2].index(5) }}": "5 is not in list"})
}

// str.format, the format filter and % follow Python's format-spec
// mini-language and printf-style conversions: fill, align, sign, #, 0,
// width, grouping, precision and type; fields by position, name, item and
// attribute; conversions. What Python refuses is an error.
func TestPythonFormatSpecs(t *testing.T) {
	checkJinja(t, map[string]string{
		"{{ '{:>8}|{:<6}|{:^7}|{:*^9}'.format('ab', 1, 'é', 2.5) }}":                                                                                      "      ab|1     |   é   |***2.5***",
		"{{ '{:05d}|{:+d}|{: d}|{:#x}|{:#o}|{:#b}|{:X}|{:c}'.format(42, 7, 7, 255, 8, 5, 255, 65) }}":                                                     "00042|+7| 7|0xff|0o10|0b101|FF|A",
		"{{ '{:.2f}|{:.3e}|{:g}|{:.3}|{}|{:%}|{:.1%}|{:010,.2f}|{:z.1f}'.format(3.14159, 12345.678, 1e-5, 10.0, 1e16, 0.25, 0.125, -1234.5, -0.04) }}":    "3.14|1.235e+04|1e-05|10.0|1e+16|25.000000%|12.5%|-01,234.50|0.0",
		"{{ '{0}{1}{0}|{name}|{0[1]}|{1[k]}|{1.k}|{1.nope}|'.format([1, 2], {'k': 'v'}, name='n') }}":                                                     "[1, 2]{'k': 'v'}[1, 2]|n|2|v|v||",
		"{{ '{:{w}.{p}f}|{!r:>5}|{!a}'.format(3.14159, 'x', 'é', w=8, p=2) }}":                                                                            `    3.14|  'x'|'\xe9'`,
		"{{ '%5.2f|%-5d|%05d|%x|%#X|%r|%c|%e|%g|%s' % (3.14159, 42, -42, 255, 255, 'a', 65, 1234.5, 0.00001, none) }}":                                    " 3.14|42   |-0042|ff|0XFF|'a'|A|1.234500e+03|1e-05|None",
		"{{ '%(a)s-%(b)05.1f' % {'a': 'x', 'b': 2.25} }}|{{ '%s-%05d'|format('a', 7) }}|{{ '%(k)s'|format(k=1) }}|{{ '%.3s|%3s'|format('abcdef', 'é') }}": "x-002.2|a-00007|1|abc|  é",
	}, nil)
	checkPythonFails(t, map[string]string{
		"{{ '{:.2}'.format(5) }}":       "Precision not allowed in integer format specifier",
		"{{ '{:d}'.format('a') }}":      "Unknown format code 'd' for object of type 'str'",
		"{{ '{:+}'.format('a') }}":      "Sign not allowed in string format specifier",
		"{{ '{:,x}'.format(5) }}":       "Cannot specify ',' with 'x'.",
		"{{ '{}{1}'.format(1, 2) }}":    "cannot switch",
		"{{ '{2}'.format(1) }}":         "out of range",
		"{{ '{:>5}'.format(none) }}":    "unsupported format string passed to NoneType",
		"{{ '{0.upper}'.format('a') }}": "not supported",
		"{{ '%x' % 1.5 }}":              "%x format: an integer is required, not float",
		"{{ '%d %d' % (1,) }}":          "not enough arguments for format string",
		"{{ '%s' % (1, 2) }}":           "not all arguments converted during string formatting",
	})
}

// A macro whose body mentions varargs or kwargs takes extra arguments; a
// character that starts no token, and an operator where `is` wants a test's
// name, are syntax errors, as in Jinja.
func TestImplicitMacroArgumentsAndUnexpectedCharacters(t *testing.T) {
	checkJinja(t, map[string]string{
		"{% macro m() %}{{ varargs | length }}{{ kwargs | length }}{% endmacro %}{{ m(1, 2, a=3) }}": "21",
	}, nil)
	checkJinjaFails(t, map[string]string{
		"{{ 0 #% 0 }}":    "unexpected char '#'",
		"{{ 0 ; 0 }}":     "unexpected char ';'",
		"{{ 3 is == 3 }}": "expected a test name after 'is'",
		"{{ 1 is < 2 }}":  "expected a test name after 'is'",
	})
	checkJinja(t, map[string]string{
		"{{ 1 is in [1] }}|{{ [1, 2] | select('==', 2) | first }}": "True|2",
	}, nil)
}

// Hooks: Finalize sees every {{ }} value, Enter and Exit every loop
// iteration and macro call, and an error raised ends the rendering.
func TestHooks(t *testing.T) {
	var entered, depth, deepest int
	hooks := &exec.Hooks{
		Finalize: func(v *exec.Value, start *tokens.Token) *exec.Value {
			if v.IsUndefined() {
				return exec.AsValue(errors.New("undefined at column " + string(rune('0'+start.Col))))
			}
			return exec.AsValue("<" + v.String() + ">")
		},
		Enter: func() error { entered++; depth++; deepest = max(deepest, depth); return nil },
		Exit:  func() { depth-- },
	}
	out, err := renderWith(hooks, "{% macro m() %}{% for i in [1, 2] %}{{ i }}{% endfor %}{% endmacro %}{{ m() }}")
	if err != nil || out != "<<1><2>>" || entered != 3 || depth != 0 || deepest != 2 {
		t.Errorf("got %q, %v, entered %d, depth %d, deepest %d; want <<1><2>>, 3 entered, back to 0, 2 deep", out, err, entered, depth, deepest)
	}
	if _, err := renderWith(&exec.Hooks{Finalize: hooks.Finalize}, "{{ missing }}"); err == nil || !strings.Contains(err.Error(), "undefined at column 1") {
		t.Errorf("finalize's error: %v", err)
	}
}

// Filters that walk or build lists of items are bounded by Limits.ListItems
// (a long string is as many items), and ask Interrupt as they go: a
// deadline ends them, not only the next statement.
func TestItemFiltersAreBounded(t *testing.T) {
	for _, f := range []string{"list", "sort", "reverse", "unique | list", "map('upper') | list", "join", "sum(start='')"} {
		checkPythonFails(t, map[string]string{"{{ 'abcdefghijk' | " + f + " }}": "more than 10 items"})
	}
	big := make([]any, 20000)
	for i := range big {
		big[i] = len(big) - i
	}
	// render asks Interrupt until it has been asked failAt times (0: never)
	render := func(src string, items []any, failAt int) (int, error) {
		asked := 0
		loader, err := loaders.NewShiftedLoader("t", strings.NewReader(src), gonja.DefaultLoader)
		if err != nil {
			return 0, err
		}
		env := &exec.Environment{
			Context: exec.NewContext(map[string]any{"items": items}), Filters: builtins.Filters, Tests: builtins.Tests,
			ControlStructures: builtins.ControlStructures, Methods: builtins.Methods,
			Interrupt: func() error {
				if asked++; asked == failAt {
					return errors.New("interrupted")
				}
				return nil
			},
		}
		tpl, err := exec.NewTemplate("t", gonja.DefaultConfig, loader, env)
		if err != nil {
			return 0, err
		}
		var out bytes.Buffer
		return asked, tpl.Execute(&out, nil)
	}
	for _, f := range []string{"list", "sort", "reverse", "unique | list", "sum"} {
		src := "{{ (items | " + f + ") is defined }}"  // not length: sum is a number
		outside, err := render(src, []any{3, 2, 1}, 0) // the questions outside the filter's loop
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if _, err := render(src, big, outside+1); err == nil || !strings.Contains(err.Error(), "interrupted") {
			t.Errorf("%s of 20000 items: %v, want it interrupted inside the filter", src, err)
		}
	}
}

// checkPythonFails checks that each source fails with an error containing
// the given text, as Jinja's does, rendered with Hooks (and small Limits).
func checkPythonFails(t *testing.T, cases map[string]string) {
	t.Helper()
	for src, want := range cases {
		hooks := &exec.Hooks{Limits: exec.Limits{StringBytes: 10, ListItems: 10, Width: 10}}
		out, err := renderWith(hooks, src)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q = %q, %v; Jinja fails with %q", src, out, err, want)
		}
	}
}

func renderWith(hooks *exec.Hooks, src string) (string, error) {
	loader, err := loaders.NewShiftedLoader("t", strings.NewReader(src), gonja.DefaultLoader)
	if err != nil {
		return "", err
	}
	env := &exec.Environment{
		Context:           exec.NewContext(pyVars),
		Filters:           builtins.Filters,
		Tests:             builtins.Tests,
		ControlStructures: builtins.ControlStructures,
		Methods:           builtins.Methods,
		Hooks:             hooks,
	}
	tpl, err := exec.NewTemplate("t", gonja.DefaultConfig, loader, env)
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	err = tpl.Execute(&out, nil)
	if err == nil {
		err = hooks.Raised()
	}
	return out.String(), err
}

// `not` is an operator where Jinja's parse_not reads one (an expression's
// start, after `and`, `or`, `not`); as an operand of an arithmetic,
// comparison or unary operator it is a name, so `1 + not (x)` calls a
// variable named not.
func TestNotAsAnOperandIsAName(t *testing.T) {
	checkJinja(t, map[string]string{
		"{{ 1 and not 1 }}|{{ not not 1 }}|{{ 1 not in [1] }}|{{ x is not none }}": "False|True|False|True",
		"{{ 1 + not (2) }}|{{ 'a' ~ not (x) }}|{{ 1 < not (x) }}|{{ - not (3) }}":  "3|a1|False|-3",
	}, map[string]any{"x": 1, "not": func(v int) int { return v }})
	checkPythonFails(t, map[string]string{
		"{{ 'a' ~ not (x) }}": "not",
		"{{ 1 + not x }}":     "",
	})
}

// Markup in a list, a dict or a tuple prints as markupsafe's repr, and the
// filters that build lists of their items (list, map, reverse, sort,
// unique) keep a Markup item Markup.
func TestMarkupReprInContainers(t *testing.T) {
	checkJinja(t, map[string]string{
		"{{ ['<a>'|safe, 'x']|string }}|{{ {'k': '<'|e}|string }}|{{ ('a'|safe, 1)|pprint }}|{{ 'a'|safe|pprint }}|{{ 'a'|safe|string }}":                  "[Markup('<a>'), 'x']|{'k': Markup('&lt;')}|(Markup('a'), 1)|Markup('a')|a",
		"{{ ['a', 'b']|map('e')|list|string }}|{{ ['a'|safe]|unique|list|string }}|{{ ['b'|safe, 'a']|sort|string }}|{{ ['a'|safe]|reverse|list|string }}": "[Markup('a'), Markup('b')]|[Markup('a')]|['a', Markup('b')]|[Markup('a')]",
		"{{ '{!r}'.format('a'|safe) }}|{{ '%r' % ('a'|safe,) }}|{{ 'ab'|safe|list|string }}":                                                               "Markup('a')|Markup('a')|['a', 'b']",
	}, nil)
}
