package pystring

import "strings"

// Capitalize is Python's str.capitalize (PaV): the first character in
// Unicode's full titlecase ('ß' is 'Ss', 'ﬁ' 'Fi'), the rest in its full
// lowercase, a final capital sigma 'ς' (upstream: simple upper and
// lower mappings).
func Capitalize(s string) string {
	runes := []rune(s)
	if len(runes) == 0 {
		return ""
	}
	var res strings.Builder
	res.WriteString(toTitleFull(runes[0]))
	for i := 1; i < len(runes); i++ {
		res.WriteString(toLowerFull(runes, i))
	}
	return res.String()
}

func (pys PyString) Capitalize() PyString {
	return PyString(Capitalize(string(pys)))
}
