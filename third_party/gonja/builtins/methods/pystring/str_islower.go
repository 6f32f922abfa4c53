package pystring

import "unicode"

// IsLower returns True if all cased characters in the string are lowercase and there is at least one cased character, False otherwise.
func IsLower(s string) bool {
	hasCased := false
	for _, char := range s {
		// PaV: Python's properties; a titlecase letter is not lowercase
		if isUppercase(char) || unicode.IsTitle(char) {
			return false
		} else if isLowercase(char) {
			hasCased = true
		}
	}
	return hasCased
}

// IsLower returns True if all cased characters in the string are lowercase and there is at least one cased character, False otherwise.
func (pys PyString) IsLower() bool {
	return IsLower(string(pys))
}
