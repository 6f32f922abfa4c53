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

// Numbers, booleans and none have no length and do not iterate, as in
// Python (upstream counted 0 and iterated nothing).
func TestScalarsDoNotIterate(t *testing.T) {
	checkJinjaFails(t, map[string]string{
		"{{ 3|length }}":                             "object of type 'int' has no len()",
		"{{ none|length }}":                          "object of type 'NoneType' has no len()",
		"{{ true|list }}":                            "'bool' object is not iterable",
		"{% for x in 2.5 %}{% endfor %}":             "'float' object is not iterable",
		"{% for x in false %}{% else %}{% endfor %}": "'bool' object is not iterable",
	})
	checkJinja(t, map[string]string{"{{ x|length }}|{{ 'ab'|list|length }}": "0|2"}, nil)
}

// odd, even and divisibleby use Python's modulo: -1 is odd, 3.0 is odd.
func TestOddEvenWithPythonModulo(t *testing.T) {
	checkJinja(t, map[string]string{
		"{{ -1 is odd }}|{{ -3 is even }}|{{ 3.0 is odd }}|{{ -6 is divisibleby(3) }}": "True|False|True|True",
		"{{ [1, 2, -1, -4]|select('odd')|join(',') }}":                                 "1,-1",
	}, nil)
	checkJinjaFails(t, map[string]string{"{{ 3 is divisibleby(0) }}": "by zero", "{{ 'a' is odd }}": "not all arguments converted"})
}

// reverse reverses a list as it is (upstream sorted it first).
func TestReverseDoesNotSort(t *testing.T) {
	checkJinja(t, map[string]string{
		"{{ [1, 'a', none]|reverse|map('string')|join(',') }}|{{ [2, 3, 1]|reverse|join(',') }}": "None,a,1|1,3,2",
	}, nil)
}
