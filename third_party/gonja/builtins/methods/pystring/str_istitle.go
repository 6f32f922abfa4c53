package pystring

import "unicode"

// IsTitle returns True if the string is a titlecased string and there is at least one
// character, for example uppercase characters may only follow uncased characters
// and lowercase characters only cased ones. Returns False otherwise.
func IsTitle(s string) bool {
	// PaV: CPython's: at least one cased character, an uppercase (or
	// titlecase) one only after an uncased one, a lowercase one only after
	// a cased one (upstream: true for "-", false for "A-B").
	cased, prevIsCased := false, false
	for _, char := range s {
		switch {
		case isUppercase(char) || unicode.IsTitle(char):
			if prevIsCased {
				return false
			}
			prevIsCased, cased = true, true
		case isLowercase(char):
			if !prevIsCased {
				return false
			}
			prevIsCased, cased = true, true
		default:
			prevIsCased = false
		}
	}
	return cased
}

// IsTitle returns True if the string is a titlecased string and there is at least one
// character, for example uppercase characters may only follow uncased characters
// and lowercase characters only cased ones. Returns False otherwise.
func (pys PyString) IsTitle() bool {
	return IsTitle(string(pys))
}
