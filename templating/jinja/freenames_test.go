package jinja

import (
	"reflect"
	"strings"
	"testing"
)

func TestFreeNames(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want []Name
	}{
		{"{{ requestedMinCapcity }}", []Name{{"requestedMinCapcity", 1, 4}}},
		{"{{ pvc.metadata.name }}-{{ params['x'] | default(handle) }}", []Name{{"pvc", 1, 4}, {"params", 1, 28}, {"handle", 1, 50}}},
		// Bound by the template: set (plain, tuple, block), for (key, value), macro and its
		// arguments, with, a call block's arguments; Jinja's own: globals, loop, caller, varargs.
		{"{% set a = 1 %}{% set b, c = 1, 2 %}{% set d %}x{% endset %}{{ a ~ b ~ c ~ d }}", nil},
		{"{% for k, v in params.items() %}{{ k }}{{ v }}{{ loop.index }}{% endfor %}", []Name{{"params", 1, 16}}},
		{"{% macro m(x, y=1) %}{{ x }}{{ y }}{{ varargs }}{{ caller() }}{% endmacro %}{% call(z) m(1) %}{{ z }}{% endcall %}", nil},
		{"{% with w = 1 %}{{ w }}{% endwith %}{{ range(3) | list }}{{ get_pvc('a', 'b') }}{{ namespace(x=1).x }}", nil},
		{"{{ true }}{{ none }}{{ False }}", nil},
		// each name once, at its first use, in source order
		{"{{ b }}\n  {{ a }}{{ b }}", []Name{{"b", 1, 4}, {"a", 2, 6}}},
	} {
		tpl, err := Compile(tc.src)
		if err != nil {
			t.Fatalf("%q: %v", tc.src, err)
		}
		if got := tpl.FreeNames(); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: free names %v, want %v", tc.src, got, tc.want)
		}
	}
}

// Errors name values as Python does, never by their Go types.
func TestErrorsNameNoGoTypes(t *testing.T) {
	for src, want := range map[string]string{
		"{{ range }}":                 "evaluated to a function",
		"{{ range | tobash }}":        "got a function",
		"{{ range.x }}":               "'function object' has no attribute 'x'",
		"{{ {'a': range} | tojson }}": "type function is not JSON serializable",
		"{{ range + 1 }}":             "'function' and 'int'",
	} {
		tpl, err := Compile(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		_, _, err = tpl.Render(map[string]interface{}{}, nil)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "func(") || strings.Contains(err.Error(), "exec.") {
			t.Errorf("%s: error %v, want one with %q and no Go type", src, err, want)
		}
	}
}
