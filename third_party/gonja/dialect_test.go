package gonja_test

import (
	"testing"

	"github.com/nikolalohinski/gonja/v2"
	"github.com/nikolalohinski/gonja/v2/exec"
)

// renderJinja renders src with gonja's defaults. Each expected output in
// this file is what Jinja 3.1 renders for the same source.
func renderJinja(t *testing.T, src string, vars map[string]any) string {
	t.Helper()
	tpl, err := gonja.FromString(src)
	if err != nil {
		t.Fatalf("%q: %v", src, err)
	}
	out, err := tpl.ExecuteToString(exec.NewContext(vars))
	if err != nil {
		t.Fatalf("%q: %v", src, err)
	}
	return out
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
