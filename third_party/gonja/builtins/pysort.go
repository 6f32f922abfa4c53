package builtins

import (
	"github.com/nikolalohinski/gonja/v2/exec"
)

// Python's sorted() raises when it compares two items Python cannot order
// ('a' < 1), and which pairs it compares is its algorithm's: [[1, 'a'],
// [2, 3]] sorts, [[1, 'a'], [1, 3]] fails (PaV). So sort and groupby sort
// with CPython's list.sort (pyListSort) and Python's comparisons.

// pySort sorts a as Python's sorted() does, with less as its `<`, and
// ticks e's limits; it returns what the filter fails with, the limit
// reached or less's error raised, or nil once sorted.
func pySort[T any](e *exec.Evaluator, a []T, less func(x, y T) (bool, error)) *exec.Value {
	calls := 0
	var stop *exec.Value
	err := pyListSort(a, func(x, y T) (bool, error) {
		calls++
		if stop = e.Tick(calls); stop != nil {
			return false, stop
		}
		return less(x, y)
	})
	switch {
	case stop != nil:
		return stop
	case err != nil:
		return e.Raise(err)
	}
	return nil
}

// keysLess is Python's `<` of two of Jinja's sort keys, lists of one item
// per attribute: ordered by the first items that are not equal.
func keysLess(a, b []*exec.Value) (bool, error) {
	for i := range a {
		if !pyEqual(a[i], b[i]) {
			return exec.PyRichCompare("<", a[i], b[i])
		}
	}
	return false, nil
}

// pyEqual is Python's ==, where Jinja's undefined equals only undefined.
func pyEqual(a, b *exec.Value) bool {
	if a.IsUndefined() || b.IsUndefined() {
		return a.IsUndefined() && b.IsUndefined()
	}
	return a.EqualValueTo(b)
}
