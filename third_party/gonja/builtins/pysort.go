package builtins

import "github.com/nikolalohinski/gonja/v2/exec"

// Python's sorted() raises when it compares two items Python cannot order
// ('a' < 1), and which pairs it compares is its algorithm's: [[1, 'a'],
// [2, 3]] sorts, [[1, 'a'], [1, 3]] fails. sortFailure replays CPython
// 3.11's list.sort on the keys Jinja's sort makes (each item in a list of
// its own, so equal items are never ordered) for lists of fewer than 64
// items, which it sorts with a run and a binary insertion sort only
// (PaV). Longer ones merge runs: for them only items of different types
// fail, which Python's fails on too; lists holding items Python cannot
// order are the divergence "Sorting 64 lists" of docs/reference.md.

// minMergeItems is the length from which CPython merges runs.
const minMergeItems = 64

// sortFailure is the error Python's sorted(keys, reverse=reverse) raises
// comparing two keys, or nil.
func sortFailure(keys []*exec.Value, reverse bool) error {
	keys = append([]*exec.Value(nil), keys...)
	if reverse { // CPython sorts a reversed list forward, for stability
		for i, j := 0, len(keys)-1; i < j; i, j = i+1, j-1 {
			keys[i], keys[j] = keys[j], keys[i]
		}
	}
	if len(keys) < 2 {
		return nil
	}
	run, descending, err := countRun(keys)
	if err != nil {
		return err
	}
	if descending {
		for i, j := 0, run-1; i < j; i, j = i+1, j-1 {
			keys[i], keys[j] = keys[j], keys[i]
		}
	}
	return binaryInsertion(keys, run)
}

// keyLess is Python's `<` of two of Jinja's sort keys, [a] < [b]: a list
// comparison, which orders its items only when they are not equal.
func keyLess(a, b *exec.Value) (bool, error) {
	if a.EqualValueTo(b) {
		return false, nil
	}
	return exec.PyRichCompare("<", a, b)
}

// countRun is CPython's count_run: the length of the run keys begin with,
// strictly descending or not descending.
func countRun(keys []*exec.Value) (int, bool, error) {
	descending, err := keyLess(keys[1], keys[0])
	if err != nil {
		return 0, false, err
	}
	n := 2
	for ; n < len(keys); n++ {
		less, err := keyLess(keys[n], keys[n-1])
		if err != nil {
			return 0, false, err
		}
		if less != descending {
			break
		}
	}
	return n, descending, nil
}

// binaryInsertion is CPython's binarysort of keys, whose first sorted ones
// are sorted already.
func binaryInsertion(keys []*exec.Value, sorted int) error {
	for start := sorted; start < len(keys); start++ {
		pivot := keys[start]
		l, r := 0, start
		for l < r {
			p := l + (r-l)/2
			less, err := keyLess(pivot, keys[p])
			if err != nil {
				return err
			}
			if less {
				r = p
			} else {
				l = p + 1
			}
		}
		copy(keys[l+1:start+1], keys[l:start])
		keys[l] = pivot
	}
	return nil
}
