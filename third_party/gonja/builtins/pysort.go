package builtins

import (
	"slices"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// Python's sorted() raises when it compares two items Python cannot order
// ('a' < 1), and which pairs it compares is its algorithm's: [[1, 'a'],
// [2, 3]] sorts, [[1, 'a'], [1, 3]] fails (PaV). sortFailure replays
// CPython's list.sort (pyListSort) on the keys Jinja's sort makes: each
// item in a list of its own, so equal items are never ordered.

// sortFailure is the error Python's sorted(keys, reverse=reverse) raises
// comparing two keys, or nil.
func sortFailure(keys []*exec.Value, reverse bool) error {
	keys = slices.Clone(keys)
	if reverse { // CPython sorts a reversed list forward, for stability
		slices.Reverse(keys)
	}
	return pyListSort(keys, keyLess)
}

// keyLess is Python's `<` of two of Jinja's sort keys, [a] < [b]: a list
// comparison, which orders its items only when they are not equal.
func keyLess(a, b *exec.Value) (bool, error) {
	if a.EqualValueTo(b) {
		return false, nil
	}
	return exec.PyRichCompare("<", a, b)
}
