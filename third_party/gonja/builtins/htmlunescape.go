package builtins

import (
	"html"
	"regexp"
	"strconv"
	"strings"
)

// Python's html.unescape (PaV), which markupsafe's striptags and unescape
// use. Go's html.UnescapeString names the same entities, but keeps the
// code points HTML forbids (&#3; is '' in Python) and wraps a number too
// long for a rune around; so numeric references are Python's, named ones
// Go's, which finds the same longest legacy name Python's does.

// charRef is Python's html._charref.
var charRef = regexp.MustCompile(`&(#[0-9]+;?|#[xX][0-9a-fA-F]+;?|[^\t\n\f <&#;]{1,32};?)`)

// windows1252Refs is Python's html._invalid_charrefs: the numbers HTML
// reads as Windows-1252 or replaces.
var windows1252Refs = map[int64]string{
	0x00: "\ufffd", 0x0d: "\r", 0x80: "\u20ac", 0x81: "\x81", 0x82: "\u201a", 0x83: "\u0192",
	0x84: "\u201e", 0x85: "\u2026", 0x86: "\u2020", 0x87: "\u2021", 0x88: "\u02c6", 0x89: "\u2030",
	0x8a: "\u0160", 0x8b: "\u2039", 0x8c: "\u0152", 0x8d: "\x8d", 0x8e: "\u017d", 0x8f: "\x8f",
	0x90: "\x90", 0x91: "\u2018", 0x92: "\u2019", 0x93: "\u201c", 0x94: "\u201d", 0x95: "\u2022",
	0x96: "\u2013", 0x97: "\u2014", 0x98: "\u02dc", 0x99: "\u2122", 0x9a: "\u0161", 0x9b: "\u203a",
	0x9c: "\u0153", 0x9d: "\x9d", 0x9e: "\u017e", 0x9f: "\u0178",
}

// forbiddenCodePoint is Python's html._invalid_codepoints: controls and
// noncharacters, which a reference to becomes nothing.
func forbiddenCodePoint(n int64) bool {
	return 0x1 <= n && n <= 0x8 || n == 0xb || 0xe <= n && n <= 0x1f || 0x7f <= n && n <= 0x9f ||
		0xfdd0 <= n && n <= 0xfdef || n&0xfffe == 0xfffe
}

// pyHTMLUnescape is Python's html.unescape of s.
func pyHTMLUnescape(s string) string {
	if !strings.Contains(s, "&") {
		return s
	}
	return charRef.ReplaceAllStringFunc(s, func(ref string) string {
		if ref[1] != '#' {
			return html.UnescapeString(ref)
		}
		digits, base := strings.TrimSuffix(ref[2:], ";"), 10
		if digits[0] == 'x' || digits[0] == 'X' {
			digits, base = digits[1:], 16
		}
		n, err := strconv.ParseInt(digits, base, 64) // a number too long to parse is past 0x10ffff
		if r, ok := windows1252Refs[n]; ok && err == nil {
			return r
		}
		if err != nil || n > 0x10ffff || 0xd800 <= n && n <= 0xdfff {
			return "\ufffd"
		}
		if forbiddenCodePoint(n) {
			return ""
		}
		return string(rune(n))
	})
}
