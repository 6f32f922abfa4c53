package pystring

import "strings"

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
	runes := []rune(s)
	prevIsCased := false
	for i, char := range runes {
		// PaV: Unicode's full mappings, as Python's ('ﬁ' is 'Fi', 'İ'
		// lowered 'i̇', a final 'Σ' 'ς')
		if prevIsCased {
			res.WriteString(toLowerFull(runes, i))
		} else {
			res.WriteString(toTitleFull(char))
		}
		// PaV: a word is a run of cased characters, as Python's (日 is a
		// letter but not cased: '日本a'.title() is '日本A')
		prevIsCased = isCased(char)
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
