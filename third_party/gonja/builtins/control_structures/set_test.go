package controlStructures_test

import (
	"strings"
	"testing"

	"github.com/nikolalohinski/gonja/v2"
	"github.com/nikolalohinski/gonja/v2/exec"
)

// PaV's additions to set, as Jinja has them: tuples, unpacking, filtered blocks.
func TestSet(t *testing.T) {
	tests := []struct{ source, want, err string }{
		{`{% set a, b = 'x', 'y' %}{{ b }}{{ a }}`, "yx", ""},
		{`{% set a, b = [1, 2] %}{{ a + b }}`, "3", ""},
		{`{% set t = 1, 2 %}{{ t | length }}`, "2", ""},
		{`{% set a, b = [1] %}`, "", "not enough values to unpack (expected 2, got 1)"},
		{`{% set a, b = [1, 2, 3] %}`, "", "too many values to unpack (expected 2)"},
		{`{% set a, b = 5 %}`, "", "cannot unpack non-iterable int object"},
		{`{% set a, b.c = [1, 2] %}`, "", "Only names can be unpacked into"},
		{`{% set x | trim | upper %} hi {% endset %}[{{ x }}]`, "[HI]", ""},
	}
	for _, tt := range tests {
		out, err := render(tt.source)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: error %v, want one containing %q (output %q)", tt.source, err, tt.err, out)
			}
			continue
		}
		if err != nil || out != tt.want {
			t.Errorf("%s: %q, %v; want %q", tt.source, out, err, tt.want)
		}
	}
}

func render(source string) (string, error) {
	tpl, err := gonja.FromString(source)
	if err != nil {
		return "", err
	}
	return tpl.ExecuteToString(exec.NewContext(map[string]interface{}{}))
}
