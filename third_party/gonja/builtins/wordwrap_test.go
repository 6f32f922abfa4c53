package builtins_test

import (
	"strings"
	"testing"

	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/exec"
)

// wordwrap builds each line once: its work and allocations grow with the
// input, not with the input times the width (a 4 MB input wrapped at 65536
// took minutes when every word copied and re-counted the line so far).
func TestWordwrapIsLinear(t *testing.T) {
	wordwrap, ok := builtins.Filters.Get("wordwrap")
	if !ok {
		t.Fatal("no wordwrap filter")
	}
	wrap := func(in string, width int) string {
		params := exec.NewVarArgs()
		params.Args = []*exec.Value{exec.AsValue(width)}
		return wordwrap(nil, exec.AsValue(in), params).String()
	}
	if got := wrap("ab cd é fg\nh  i", 5); got != "ab cd\né fg\nh  i" {
		t.Errorf("wordwrap = %q", got)
	}
	words := strings.Repeat("x ", 10000)
	allocs := testing.AllocsPerRun(3, func() { wrap(words, 1<<16) })
	if allocs > 100 {
		t.Errorf("wrapping 10000 words into one line allocated %v times, want a few per line", allocs)
	}
}
