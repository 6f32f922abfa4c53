package gonja_test

import "testing"

// An item by a number of a value that has none (a dict, a number) is
// undefined, as Jinja's getitem falls back to undefined (upstream: an error).
func TestItemOfNonSequenceIsUndefined(t *testing.T) {
	checkJinja(t, map[string]string{
		"{{ ({})[0] is defined }}|{{ {'a': 1}[0] is defined }}|{{ 5[0] is defined }}|{{ true[-1] is defined }}": "False|False|False|False",
		"{{ ({})[0]|default('d') }}|{{ [1][0] }}|{{ 'ab'[-1] }}":                                                "d|1|b",
	}, nil)
	checkJinjaFails(t, map[string]string{"{{ ({})[0].x }}": "has no element 0"})
}

// An undefined item prints as "" where Jinja's str() makes it (join), and a
// macro's varargs and kwargs keep their items as given: undefined stays
// undefined, Markup stays Markup (upstream: None, a plain string).
func TestUndefinedItemsStayUndefined(t *testing.T) {
	checkJinja(t, map[string]string{
		"{{ [1, [1][5], 2]|join(',') }}":                                                                   "1,,2",
		"{% macro m() %}{{ varargs|join(',') }}{% endmacro %}{{ m([1][5], 2) }}":                           ",2",
		"{% macro m() %}{{ varargs[0] is defined }}{{ kwargs.a is defined }}{% endmacro %}{{ m(u, a=u) }}": "FalseFalse",
		"{% macro m() %}{{ kwargs.a }}{{ varargs|length }}{% endmacro %}{{ m(1, a=2) }}":                   "21",
	}, nil)
}

// urlize escapes its text and links what Jinja's urlize links, with the
// sandbox's rel="noopener" (upstream escaped nothing but the links and
// linked any word with a dot).
func TestUrlizeAsJinja(t *testing.T) {
	checkJinja(t, map[string]string{
		"{{ '<b>x</b> http://a.b/?x=1&y=<2>'|urlize }}": "&lt;b&gt;x&lt;/b&gt; http://a.b/?x=1&amp;y=&lt;2&gt;",
		"{{ 'see (www.example.com), or http://example.com/a_(b). mail bob@ex.com!'|urlize }}": `see (<a href="https://www.example.com" rel="noopener">www.example.com</a>), or ` +
			`<a href="http://example.com/a_(b)" rel="noopener">http://example.com/a_(b)</a>. mail bob@ex.com!`,
		"{{ 'mailto:a@b.cd x@y @a@b a:b@c.de'|urlize(nofollow=true, target='_blank') }}": `<a href="mailto:a@b.cd">a@b.cd</a> x@y @a@b a:b@c.de`,
		"{{ 'https://verylongdomain.example.org/path'|urlize(10, rel='x y') }}":          `<a href="https://verylongdomain.example.org/path" rel="noopener x y">https://ve...</a>`,
		"{{ 'ftp://x.y/z ftp:'|urlize(extra_schemes=['ftp:']) }}":                        `<a href="ftp://x.y/z" rel="noopener">ftp://x.y/z</a> ftp:`,
		"{{ 'é.com http://1.2.3.4:80/x WWW.A.COM' | urlize }}": `é.com <a href="http://1.2.3.4:80/x" rel="noopener">http://1.2.3.4:80/x</a> ` +
			`<a href="https://WWW.A.COM" rel="noopener">WWW.A.COM</a>`,
		"{{ '&lt;http://a.io&gt;'|safe|urlize }}|{{ 5|urlize }}|{{ none|urlize }}": `&lt;<a href="http://a.io" rel="noopener">http://a.io</a>&gt;|5|None`,
		"{{ 'a\u00a0http://a.io\x1c b'|urlize(-3) }}":                              "a\u00a0<a href=\"http://a.io\" rel=\"noopener\">http://a...</a>\x1c b",
	}, nil)
	checkJinjaFails(t, map[string]string{"{{ 'x'|urlize(extra_schemes=['1']) }}": "'1' is not a valid URI scheme prefix."})
}

// An error in the test select, reject, selectattr or rejectattr asks of an
// item fails the rendering, as Jinja's exception does (upstream: the item
// failed the test).
func TestSelectTestErrorsFail(t *testing.T) {
	checkJinjaFails(t, map[string]string{
		"{{ [[1]]|select('odd')|list|length }}":                     "unsupported operand type(s) for %: 'list' and 'int'",
		"{{ [1, 'a']|reject('divisibleby', 2)|list|length }}":       "not all arguments converted",
		"{{ [{'a': 'x'}]|selectattr('a', 'even')|list|length }}":    "not all arguments converted",
		"{{ [{'a': 'x'}]|rejectattr('a', 'lt', 1)|list|length }}":   "'<' not supported",
		"{{ ([[1]]|select('odd')|list|length) is defined }}":        "unsupported operand",
		"{{ [[1]]|reject('odd')|list|default('swallowed', true) }}": "unsupported operand",
	})
	checkJinja(t, map[string]string{"{{ [1, 2, 3]|select('odd')|join }}|{{ [1, 2, 3]|reject('odd')|join }}": "13|2"}, nil)
}

// The tests `test` and `filter` look their operand up as Jinja's dict
// lookup does: a list or a dict is unhashable (upstream: false).
func TestTestTestOfUnhashable(t *testing.T) {
	checkJinja(t, map[string]string{
		"{{ 5 is test }}|{{ none is test }}|{{ nosuch is test }}|{{ 'odd' is test }}|{{ 'upper' is filter }}": "False|False|False|True|True",
	}, nil)
	checkJinjaFails(t, map[string]string{
		"{{ [] is test }}":           "unhashable type: 'list'",
		"{{ {} is not filter }}":     "unhashable type: 'dict'",
		"{{ [[1]]|select('test') }}": "unhashable type: 'list'",
	})
}

// startswith and endswith check a tuple's items' types as they come to
// them, as Python: ('a', 1) matches 'abc' (upstream: an error).
func TestAffixTupleCheckedLazily(t *testing.T) {
	checkJinja(t, map[string]string{
		"{{ 'abc'.startswith(('a', 1)) }}|{{ 'abc'.endswith(('x', 'c'), 5) }}|{{ ''.startswith('', 0) }}": "True|False|True",
	}, nil)
	checkJinjaFails(t, map[string]string{"{{ 'abc'.startswith(('x', 1)) }}": "tuple for startswith must only contain str, not int"})
}

// A call block may pass its caller only to a macro whose body refers to
// caller, or to kwargs (which then holds it), as in Jinja (upstream: the
// caller was ignored).
func TestCallBlockNeedsACaller(t *testing.T) {
	checkJinja(t, map[string]string{
		"{% macro m() %}{{ kwargs|length }}{{ kwargs.caller() }}{% endmacro %}{% call m() %}y{% endcall %}":           "1y",
		"{% macro m() %}{% if false %}{{ caller() }}{% endif %}x{% endmacro %}{% call m() %}y{% endcall %}|{{ m() }}": "x|x",
	}, nil)
	checkJinjaFails(t, map[string]string{
		"{% macro m(a=1) %}x{% endmacro %}{% call m(10) %}y{% endcall %}": "macro 'm' was invoked with two values for the special caller argument",
	})
}

// sort of items of types Python cannot compare with each other is an error
// (upstream: only strings with numbers).
func TestSortOfMixedTypes(t *testing.T) {
	checkJinja(t, map[string]string{
		"{{ [{}, {}]|sort|length }}|{{ [1, 2.5, true]|sort|length }}|{{ ['b', 'A']|sort|join }}|{{ [[2], [1, 3]]|sort|length }}|{{ [1, 'a']|sort(attribute='x')|length }}": "2|3|Ab|2|2",
	}, nil)
	checkJinjaFails(t, map[string]string{
		"{{ [1, [2]]|sort|length }}":       "'<' not supported between instances of 'list' and 'int'",
		"{{ [none, 1]|sort|length }}":      "'<' not supported",
		"{{ ['a', {}]|sort|length }}":      "'<' not supported",
		"{{ [{'a': 1}, {}]|sort|length }}": "'<' not supported between instances of 'dict' and 'dict'",
	})
}

// The pairs of items, dict.items() and dictsort, and groupby's groups, are
// tuples to repr (upstream: lists).
func TestPairsAreTuples(t *testing.T) {
	checkJinja(t, map[string]string{
		"{{ {'a': 1, 'b': 'x'}|items|list|string }}":                 "[('a', 1), ('b', 'x')]",
		"{{ {'a': 1}.items()|list|string }}":                         "[('a', 1)]",
		"{{ {'b': 1, 'a': 2}|dictsort|join(',') }}":                  "('a', 2),('b', 1)",
		"{{ [{'a': 1}]|groupby('a')|list|pprint }}":                  "[(1, [{'a': 1}])]",
		"{{ {'a': 1}|items|first|list|string }}":                     "['a', 1]",
		"{% for k, v in {'a': 1}|items %}{{ k }}{{ v }}{% endfor %}": "a1",
	}, nil)
}

// wordwrap is Python's textwrap as Jinja calls it: long words cut (after a
// hyphen where there is one), hyphenated words broken, whitespace kept
// inside a line, Python's line breaks (upstream: lines broken only between
// words, whitespace collapsed).
func TestWordwrapIsTextwrap(t *testing.T) {
	checkJinja(t, map[string]string{
		"{{ 'hello world'|wordwrap(4) }}":                                     "hell\no wo\nrld",
		"{{ 'hello world'|wordwrap(4, false) }}":                              "hello\nworld",
		"{{ '  ,ßé}  x'|wordwrap(5) }}":                                       ",ßé}\nx",
		"{{ 'well-known self-evident thing'|wordwrap(6) }}":                   "well-\nknown\nself-e\nvident\nthing",
		"{{ 'well-known self-evident thing'|wordwrap(6, false) }}":            "well-\nknown\nself-\nevident\nthing",
		"{{ 'well-known self-evident'|wordwrap(6, break_on_hyphens=false) }}": "well-k\nnown s\nelf-ev\nident",
		"{{ 'a--b c---d x'|wordwrap(3) }}":                                    "a--\nb c\n---\nd x",
		"{{ '---abc'|wordwrap(2) }}":                                          "--\n-a\nbc",
		"{{ 'a-b-c-d-e'|wordwrap(3) }}":                                       "a-\nb-\nc-\nd-e",
		"{{ 'ab-1cd-ef'|wordwrap(4, false) }}":                                "ab-1cd-\nef",
		"{{ 'x\u00a0y z'|wordwrap(2) }}":                                      "x\u00a0\ny\nz",
		"{{ 'a\r\nb\x0bc\u2028d'|wordwrap(1) }}":                              "a\nb\nc\nd",
		"{{ 'tab\there  now'|wordwrap(4) }}":                                  "tab\nhere\nnow",
		"{{ 'hello world'|wordwrap(4, true, '|') }}":                          "hell|o wo|rld",
		"{{ '\n\n'|wordwrap(3) }}":                                            "\n",
	}, nil)
	checkJinjaFails(t, map[string]string{
		"{{ 31|wordwrap(4) }}":  "'int' object has no attribute 'splitlines'",
		"{{ 'x'|wordwrap(0) }}": "invalid width 0 (must be > 0)",
	})
}

// abs, center and truncate take what Jinja's take: a number, a string
// (upstream: anything, as a float or a string); truncate cuts at the last
// space only and keeps the whitespace before it; center's width is 80 by
// default.
func TestFiltersOnTheirTypes(t *testing.T) {
	checkJinja(t, map[string]string{
		"{{ true|abs }}|{{ -2|abs }}|{{ -1.5|abs }}":    "1|2|1.5",
		"{{ 'x'|center|length }}|{{ 'ab'|center(6) }}|": "80|  ab  |",
		"{{ 'ab\ncd efgh'|truncate(8, leeway=0) }}|{{ 'a  b\tcdefgh'|truncate(8, leeway=0) }}|{{ 'a   b cdefgh'|truncate(8, leeway=0) }}": "ab\ncd...|a ...|a  ...",
		"{{ [1, 2]|truncate|length }}": "2",
	}, nil)
	checkJinjaFails(t, map[string]string{
		"{{ 'x'|abs }}":                      "bad operand type for abs(): 'str'",
		"{{ 85|truncate(5) }}":               "object of type 'int' has no len()",
		"{{ 'abc'|truncate(3, leeway=-1) }}": "expected leeway >= 0, got -1",
	})
}

// Indexing and slicing Markup give Markup, which escape leaves as it is
// (upstream: a str, escaped again); iterating gives strs.
func TestMarkupIndexAndSlice(t *testing.T) {
	checkJinja(t, map[string]string{
		"{{ ('<p>'|e)[::2]|e }}|{{ ('<p>'|e)[0]|e }}|{{ ('<p>'|e)[1:3]|e }}|{% for c in '<'|e %}{{ c|e }}{% endfor %}": "&tpg;|&|lt|&amp;lt;",
	}, nil)
}

// join of none, a number or a bool is Python's TypeError (upstream: the
// value itself).
func TestJoinOfNotIterable(t *testing.T) {
	checkJinja(t, map[string]string{"{{ 'ab'|join(',') }}|{{ [1, 2]|join }}": "a,b|12"}, nil)
	checkJinjaFails(t, map[string]string{
		"{{ none|join(', ') }}": "'NoneType' object is not iterable",
		"{{ 12|join }}":         "'int' object is not iterable",
		"{{ true|join }}":       "'bool' object is not iterable",
	})
}

// first and last of none, a number or a bool are Python's TypeError
// (upstream: undefined).
func TestFirstLastOfNotIterable(t *testing.T) {
	checkJinja(t, map[string]string{"{{ 'ab'|first }}|{{ [1, 2]|last }}|{{ {'a': 1}|first }}": "a|2|a"}, nil)
	checkJinjaFails(t, map[string]string{
		"{{ 3|first }}":    "'int' object is not iterable",
		"{{ none|first }}": "'NoneType' object is not iterable",
		"{{ 2.5|last }}":   "'float' object is not reversible",
	})
}

// sort compares bools with numbers as the numbers they are (upstream: as
// strings), and keeps equal items in their order when reversed.
func TestSortBoolsWithNumbers(t *testing.T) {
	checkJinja(t, map[string]string{
		"{{ [true, 400.0, 1.5]|sort(reverse=true)|join('/') }}|{{ [2, false, 1.5]|sort|join('/') }}|{{ [1, true, 1.0]|sort(reverse=true)|join('/') }}": "400.0/1.5/True|False/1.5/2|1/True/1.0",
	}, nil)
}

// unique takes true for 1 and 1.0 for 1, as Python's set does (upstream:
// all three distinct).
func TestUniqueOfEqualNumbers(t *testing.T) {
	checkJinja(t, map[string]string{
		"{{ [true, 1, 1.0, 2.5, 0, false]|unique|join(',') }}|{{ [1, true]|unique|join(',') }}": "True,2.5,0|1",
	}, nil)
}

// capitalize capitalizes Python's str of anything (upstream: returned what
// was not a string); undefined is callable, as Jinja's Undefined.
func TestCapitalizeOfAnyAndUndefinedCallable(t *testing.T) {
	checkJinja(t, map[string]string{
		"{{ {'App': 'DB'}|capitalize }}|{{ none|capitalize }}|{{ [1][3] is callable }}|{{ nosuch is callable }}|{{ 1 is callable }}": "{'app': 'db'}|None|True|True|False",
	}, nil)
}

// Tuple literals are tuples (upstream: lists): repr in parentheses, a
// tuple + a tuple is a tuple, a list + a tuple is Python's TypeError, and
// otherwise they are sequences as lists are.
func TestTupleLiteralsAreTuples(t *testing.T) {
	checkJinja(t, map[string]string{
		"{{ (1, 'x')|string }}|{{ (2,)|pprint }}|{{ ()|string }}|{{ [(1, 'x')]|string }}":                                                          "(1, 'x')|(2,)|()|[(1, 'x')]",
		"{{ ((1, 2) + (3,))|string }}|{{ ((1,) * 2)|string }}|{{ ((1,) * 0)|string }}|{{ (1, 'x')|length }}|{{ (1, 'x')[1] }}|{{ (1, 'x')|last }}": "(1, 2, 3)|(1, 1)|()|2|x|x",
		"{% for a in (4, 2) %}{{ a }}{% endfor %}|{{ (4, 2)|list|string }}|{{ 2 in (4, 2) }}|{{ (4, 2)|join('-') }}|{{ {'k': (1, 2)}|string }}":    "42|[4, 2]|True|4-2|{'k': (1, 2)}",
		"{% for a, b in [('a', 'b')] %}{{ a }}{{ b }}{% endfor %}|{% set x, y = (1, 2) %}{{ x }}{{ y }}|{{ ('a', 'b') is sequence }}":              "ab|12|True",
		"{{ 'a=b'.partition('=')|string }}|{{ 'a=b'.rpartition('x')|string }}":                                                                     "('a', '=', 'b')|('', '', 'a=b')",
		"{{ ((1,), 2)|string }}|{{ (1, 2) == (1, 2) }}|{{ ('a', 'b')|sort|string }}":                                                               "((1,), 2)|True|['a', 'b']",
	}, nil)
	checkJinjaFails(t, map[string]string{
		"{{ ([1] + (2,))|string }}": `can only concatenate list (not "tuple") to list`,
		"{{ ((2,) + [1])|string }}": `can only concatenate tuple (not "list") to tuple`,
	})
}

// A dict literal's item by a number is the value of its number key, and a
// string never finds a number key (upstream: the reverse).
func TestDictItemByNumberKey(t *testing.T) {
	checkJinja(t, map[string]string{
		"{{ {1: 'one'}[1] }}|{{ {1: 'one'}['1'] is defined }}|{{ {'1': 'one'}[1] is defined }}|{{ {1.0: 'x', 2: 'y'}[1] }}{{ {true: 'b'}[1] }}": "one|False|False|xb",
	}, nil)
}
