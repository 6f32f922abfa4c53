package pystring

import (
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/language"
)

// Python's character case properties (PaV): CPython's str methods use
// Unicode's derived ones, not the general categories Go's unicode.IsLower
// and IsUpper test: ª and ⓐ are lowercase, Ⅰ uppercase, and a titlecase
// letter (ǅ) is cased but neither.

// isLowercase is Unicode's Lowercase property (Ll and Other_Lowercase).
func isLowercase(r rune) bool { return unicode.IsLower(r) || unicode.Is(unicode.Other_Lowercase, r) }

// isUppercase is Unicode's Uppercase property (Lu and Other_Uppercase).
func isUppercase(r rune) bool { return unicode.IsUpper(r) || unicode.Is(unicode.Other_Uppercase, r) }

// isCased is Unicode's Cased property.
func isCased(r rune) bool { return isLowercase(r) || isUppercase(r) || unicode.IsTitle(r) }

// toTitleFull is Unicode's full titlecase mapping of r, as Python's
// str.title and capitalize use ('ﬁ' is 'Fi', 'ß' is 'Ss').
func toTitleFull(r rune) string {
	if r < utf8.RuneSelf {
		return string(unicode.ToUpper(r))
	}
	return cases.Title(language.Und, cases.NoLower).String(string(r))
}

// toLowerFull is Unicode's full lowercase mapping of runes[i], a capital
// sigma final or not by its neighbours, as Python's str.lower of it.
func toLowerFull(runes []rune, i int) string {
	if runes[i] < utf8.RuneSelf {
		return string(unicode.ToLower(runes[i]))
	}
	if runes[i] == 'Σ' {
		if finalSigma(runes, i) {
			return "ς"
		}
		return "σ"
	}
	return cases.Lower(language.Und).String(string(runes[i]))
}
