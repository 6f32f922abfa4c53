package pystring

import (
	"strings"
	"unicode"

	"golang.org/x/text/cases"
	"golang.org/x/text/language"
)


// Title returns a titlecased version of the string where words start with an uppercase
// character and the remaining characters are lowercase.
//
// For example:
//
// >>>
// >>> 'Hello world'.title()
// 'Hello World'
//
// The algorithm uses a simple language-independent definition of a word as
// groups of consecutive letters. The definition works in many contexts but it
// means that apostrophes in contractions and possessives form word boundaries,
// which may not be the desired result:
//
// >>>
// >>> "they're bill's friends from the UK".title(){}
// "They'Re Bill'S Friends From The Uk"
//
// The string.capwords() function does not have this problem, as it splits
// words on spaces only.
func Title(s string) string {
	var res strings.Builder

	// PaV: Unicode's full lowercase mapping, as Python's str.lower (a
	// Caser is stateful: one per call)
	lower := cases.Lower(language.Und)
	prevIsCased := false
	for _, char := range s {
		if prevIsCased {
			// PaV: Python's full lowercase mapping ('İ' is 'i̇', two runes)
			res.WriteString(lower.String(string(char)))
		} else {
			res.WriteRune(unicode.ToTitle(char))
		}
		// PaV: a word is a run of cased characters, as Python's (日 is a
		// letter but not cased: '日本a'.title() is '日本A')
		prevIsCased = unicode.IsUpper(char) || unicode.IsLower(char) || unicode.IsTitle(char)
	}

	return res.String()
}

// Title returns a titlecased version of the string where words start with an uppercase
// character and the remaining characters are lowercase.
//
// For example:
//
// >>>
// >>> 'Hello world'.title()
// 'Hello World'
//
// The algorithm uses a simple language-independent definition of a word as
// groups of consecutive letters. The definition works in many contexts but it
// means that apostrophes in contractions and possessives form word boundaries,
// which may not be the desired result:
//
// >>>
// >>> "they're bill's friends from the UK".title(){}
// "They'Re Bill'S Friends From The Uk"
//
// The string.capwords() function does not have this problem, as it splits
// words on spaces only.
func (pys PyString) Title() PyString {
	return PyString(Title(string(pys)))
}
