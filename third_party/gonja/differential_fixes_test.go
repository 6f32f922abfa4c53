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
		"{{ [1, [1][5], 2]|join(',') }}":                                                                  "1,,2",
		"{% macro m() %}{{ varargs|join(',') }}{% endmacro %}{{ m([1][5], 2) }}":                           ",2",
		"{% macro m() %}{{ varargs[0] is defined }}{{ kwargs.a is defined }}{% endmacro %}{{ m(u, a=u) }}": "FalseFalse",
		"{% macro m() %}{{ kwargs.a }}{{ varargs|length }}{% endmacro %}{{ m(1, a=2) }}":                   "21",
	}, nil)
}
