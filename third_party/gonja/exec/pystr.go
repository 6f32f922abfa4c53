package exec

import (
	"strings"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/language"
)

// Python's str is a sequence of characters (code points), not bytes (PaV):
// its length, indices, iteration and padding count runes, and its case
// mappings are Unicode's full ones ('ß'.upper() is 'SS').

// PyUpper is Python's str.upper.
func PyUpper(s string) string { return cases.Upper(language.Und).String(s) }

// PyLower is Python's str.lower.
func PyLower(s string) string { return cases.Lower(language.Und).String(s) }

// PyPad is Python's str.center/ljust/rjust (how) of s to width characters
// with fill, CPython's split of an odd centering margin included.
func PyPad(how, s string, width int, fill string) string {
	marg := width - utf8.RuneCountInString(s)
	if marg <= 0 {
		return s
	}
	left := 0
	switch how {
	case "center":
		left = marg/2 + (marg & width & 1)
	case "rjust":
		left = marg
	}
	return strings.Repeat(fill, left) + s + strings.Repeat(fill, marg-left)
}
