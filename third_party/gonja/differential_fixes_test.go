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
