package pystring

import (
	"strings"
	"unicode"

	"golang.org/x/text/cases"
	"golang.org/x/text/language"
)

// SwapCase returns a copy of the string with uppercase characters converted to lowercase
// and vice versa. Note that it is not necessarily true that
// s.swapcase().swapcase() == s.
//
// PaV: Python's full case mappings ('İ' is 'i̇', 'ß' is 'SS') and its final
// sigma (upstream: one rune for one).
func SwapCase(s string) string {
	var res strings.Builder
	runes := []rune(s)
	for i, char := range runes {
		switch {
		case char == 'Σ':
			if finalSigma(runes, i) {
				res.WriteRune('ς')
			} else {
				res.WriteRune('σ')
			}
		case isUppercase(char):
			res.WriteString(cases.Lower(language.Und).String(string(char)))
		case isLowercase(char):
			res.WriteString(cases.Upper(language.Und).String(string(char)))
		default:
			res.WriteRune(char)
		}
	}
	return res.String()
}

// finalSigma is Python's rule for a capital sigma at runes[i]: a cased
// letter before it and none after it, case-ignorable characters skipped.
func finalSigma(runes []rune, i int) bool {
	ignorable := func(r rune) bool {
		return unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf, unicode.Lm, unicode.Sk) || strings.ContainsRune("'.:^`\u00b7\u2018\u2019\u2024\u2027", r)
	}
	j := i - 1
	for j >= 0 && ignorable(runes[j]) {
		j--
	}
	if j < 0 || !isCased(runes[j]) {
		return false
	}
	k := i + 1
	for k < len(runes) && ignorable(runes[k]) {
		k++
	}
	return k == len(runes) || !isCased(runes[k])
}

// SwapCase returns a copy of the string with uppercase characters converted to lowercase
// and vice versa. Note that it is not necessarily true that
// s.swapcase().swapcase() == s.
func (pys PyString) SwapCase() PyString {
	return PyString(SwapCase(string(pys)))
}
