package gonja_test

import "testing"

// String literals as Jinja reads them: Python's escapes (unknown ones keep
// their backslash), adjacent literals joined; accessors and calls after a
// parenthesized expression apply to its value.
func TestStringLiteralsAndParenthesizedAccessors(t *testing.T) {
	checkJinja(t, map[string]string{
		`{{ '\\' }}|{{ 'a\\b' }}`:           `\|a\b`,
		`{{ '\d' }}|{{ '\101\x41\u0041' }}`: `\d|AAA`,
		`{{ 'it\'s' }}|{{ "q\"" }}`:         `it's|q"`,
		`{{ 'a\nb' }}|{{ 'x\
y' }}`: "a\nb|xy",
		`{{ 'a' 'b' "c" }}`:                      "abc",
		`{{ ('a' ~ 'b').upper() }}`:              "AB",
		`{{ ('a b').split()[1].upper() }}`:       "B",
		`{{ (1, 2)[1] }}|{{ ('ab' ~ 'c')[1:] }}`: "2|bc",
	}, nil)
	checkJinjaFails(t, map[string]string{`{{ '\x4' }}`: `truncated \xXX escape`})
}
