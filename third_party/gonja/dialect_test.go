package gonja_test

import (
	"strings"
	"testing"

	"github.com/nikolalohinski/gonja/v2"
	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
)

// renderJinja renders src with gonja's defaults. Each expected output in
// this file is what Jinja 3.1 renders for the same source.
func renderJinja(t *testing.T, src string, vars map[string]any) string {
	t.Helper()
	out, err := tryJinja(src, vars)
	if err != nil {
		t.Fatalf("%q: %v", src, err)
	}
	return out
}

func tryJinja(src string, vars map[string]any) (string, error) {
	tpl, err := gonja.FromString(src)
	if err != nil {
		return "", err
	}
	return tpl.ExecuteToString(exec.NewContext(vars))
}

// checkJinjaFails checks that each source fails with an error containing
// the given text, as Jinja's does.
func checkJinjaFails(t *testing.T, cases map[string]string) {
	t.Helper()
	for src, want := range cases {
		out, err := tryJinja(src, nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q = %q, %v; Jinja fails with %q", src, out, err, want)
		}
	}
}

func checkJinja(t *testing.T, cases map[string]string, vars map[string]any) {
	t.Helper()
	for src, want := range cases {
		if got := renderJinja(t, src, vars); got != want {
			t.Errorf("%q renders %q, Jinja %q", src, got, want)
		}
	}
}

// Whitespace between the tokens of an expression or statement may break
// lines, as in Jinja.
func TestLineBreaksInsideTags(t *testing.T) {
	checkJinja(t, map[string]string{
		"{{ 1 +\n 2 }}":                                "3",
		"{{ [1,\n2] | join(',') }}":                    "1,2",
		"{{ 'a' if\n true\n else 'b' }}":               "a",
		"{{ 1 and\n 2 }}|{{ not\n false }}":            "2|True",
		"{%\n if true\n %}y{% endif %}":                "y",
		"{% for i in\n [1, 2]\n %}{{ i }}{% endfor %}": "12",
		"{{ 'a\nb' }}":                                 "a\nb",
	}, nil)
}

// `in` is a comparison: its right operand is an arithmetic expression,
// filters included, and must be a container.
func TestInTakesAnArithmeticRightOperand(t *testing.T) {
	checkJinja(t, map[string]string{
		"{{ 1 in [1] | list }}":           "True",
		"{{ not 1 in [2] | list }}":       "True",
		"{{ 2 in [1] | list + [2] }}":     "True",
		"{{ 3 not in [1] | list + [2] }}": "True",
		"{{ 'b' in 'a' ~ 'b' }}":          "True",
		"{{ 1 in [1] and 2 in [3] }}":     "False",
	}, nil)
	checkJinjaFails(t, map[string]string{
		"{{ 1 in [2] | list | length }}": "argument of type 'int' is not iterable",
		"{{ 1 in 2.5 }}":                 "argument of type 'float' is not iterable",
	})
}

// A conditional expression is an expression like any other: in
// parentheses, lists, arguments and set; without else it is undefined
// when its condition is false.
func TestConditionalExpressionsAnywhere(t *testing.T) {
	checkJinja(t, map[string]string{
		"{{ (1 if false) is none }}|{{ (1 if false) is defined }}":           "False|False",
		"{{ (1 if true) }}|{{ (1 if false else 2) + 1 }}":                    "1|3",
		"{{ [3 if false] | length }}":                                        "1",
		"{{ 1 if false else 2 if false else 3 }}":                            "3",
		"{{ 'abc' | replace('b' if x else 'c', '-') }}":                      "ab-",
		"{% set a = 'p' if x else 'q' %}{{ a }}":                             "q",
		"{% for i in [1, 2, 3] if i > (1 if x else 2) %}{{ i }}{% endfor %}": "3",
		"{{ 'y' if x }}|{{ 'n' if not x else 'y' }}":                         "|n",
	}, map[string]any{"x": false})
}

// In a recursive loop, `loop` is both callable and the loop's attributes;
// loop.depth counts recursion levels only, not nesting.
func TestRecursiveLoop(t *testing.T) {
	tree := []any{map[string]any{"n": "a", "c": []any{map[string]any{"n": "b"}, map[string]any{"n": "c", "c": []any{map[string]any{"n": "d"}}}}}, map[string]any{"n": "e"}}
	checkJinja(t, map[string]string{
		"{% for i in tree recursive %}{{ loop.depth }}{{ i.n }}{% if i.c %}[{{ loop(i.c) }}]{% endif %}{% endfor %}":       "1a[2b2c[3d]]1e",
		"{% for i in tree recursive %}{{ loop.depth0 }}{{ loop.index }}{{ loop.length }}{{ loop(i.c or []) }}{% endfor %}": "012112122211022",
		"{% for a in [1, 2] %}{% for b in [1] %}{{ loop.depth }}{% endfor %}{{ loop.depth }}{% endfor %}":                  "1111",
		"{% for a in [1] %}{{ loop is callable }}{% endfor %}":                                                             "True",
	}, map[string]any{"tree": tree})
	checkJinjaFails(t, map[string]string{
		"{% for a in [1] %}{{ loop([2]) }}{% endfor %}": "the loop must have the 'recursive' marker",
	})
}

// A call block's body is the macro `caller`, with the block's parameters,
// given to the called macro only; call blocks nest.
func TestCallBlockArguments(t *testing.T) {
	checkJinja(t, map[string]string{
		"{% macro row(c) %}<{{ c }}:{{ caller('x', 2) }}>{% endmacro %}{% call(a, b) row('r') %}{{ a }}{{ b * 3 }}{% endcall %}":                    "<r:x6>",
		"{% macro m() %}{{ caller(1) }}|{{ caller(1, b=5) }}|{{ caller(b=1, a=2) }}{% endmacro %}{% call(a, b=2) m() %}{{ a }}{{ b }}{% endcall %}": "12|15|21",
		"{% macro m() %}{{ caller(2) }}{% endmacro %}{% call(a) m() %}{% call(b) m() %}{{ a * b }}{% endcall %}{% endcall %}":                       "4",
		"{% macro w() %}[{{ caller() }}]{% endmacro %}{% call w() %}{% call w() %}x{% endcall %}{% endcall %}":                                      "[[x]]",
		"{% macro n() %}{{ caller is defined }}{% endmacro %}{% macro m() %}{{ n() }}{{ caller() }}{% endmacro %}{% call m() %}x{% endcall %}":      "Falsex",
	}, nil)
	checkJinjaFails(t, map[string]string{
		"{% macro m() %}{{ caller(1, 2) }}{% endmacro %}{% call(a) m() %}{{ a }}{% endcall %}": "received 2 arguments but expected only 1",
		"{% macro m() %}{{ caller(1) }}{% endmacro %}{% call m() %}x{% endcall %}":             "received 1 arguments but expected only 0",
	})
}

// With trim_blocks and lstrip_blocks, as Jinja: lstrip removes only blanks
// that start a line; trim_blocks keeps the newline after {% raw %}; lstrip
// applies to {% endraw %}; `-` trims a raw block's text; a raw block may be
// empty.
func TestTrimAndLStripBlocks(t *testing.T) {
	cfg := config.New()
	cfg.TrimBlocks, cfg.LeftStripBlocks = true, true
	for src, want := range map[string]string{
		"{{ 'a' }} {% if true %}b{% endif %}  {% if true %}c{% endif %}\n  {% if true %}d{% endif %}": "a b  cd",
		"a {# c #} b\n  {# d #}\ne":                                   "a  b\ne",
		"{% if true %}\n  {% if true %}x{% endif %}\n{% endif %}":     "x",
		"{% raw %}\n  x\n  {% endraw %}|":                             "\n  x\n|",
		"{% raw -%}  \n x \n  {%- endraw %}|{% raw %}  {% endraw %}|": "x|  |",
		"a{% raw %}{% endraw %}b":                                     "ab",
	} {
		loader, err := loaders.NewMemoryLoader(map[string]string{"/t": src})
		if err != nil {
			t.Fatal(err)
		}
		tpl, err := exec.NewTemplate("/t", cfg, loader, gonja.DefaultEnvironment)
		if err != nil {
			t.Errorf("%q: %v", src, err)
			continue
		}
		if got, err := tpl.ExecuteToString(exec.EmptyContext()); err != nil || got != want {
			t.Errorf("%q renders %q, %v; Jinja %q", src, got, err, want)
		}
	}
}
