package builtins

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestListSortMatchesCPython: pyListSort makes CPython's comparisons, in
// its order, and leaves its order, on lists of every shape
// (testdata/cpython_sort.json, written by CPython 3.11 with
// testdata/cpython_sort.py).
func TestListSortMatchesCPython(t *testing.T) {
	b, err := os.ReadFile("testdata/cpython_sort.json")
	if err != nil {
		t.Fatal(err)
	}
	var data struct {
		Python string
		Cases  []struct {
			Values      []int
			Order       string
			Comparisons int
			Digest      string
		}
	}
	if err := json.Unmarshal(b, &data); err != nil {
		t.Fatal(err)
	}
	type item struct{ v, i int }
	for n, c := range data.Cases {
		items := make([]item, len(c.Values))
		for i, v := range c.Values {
			items[i] = item{v, i}
		}
		var log strings.Builder
		comparisons := 0
		if err := pyListSort(items, func(x, y item) (bool, error) {
			comparisons++
			fmt.Fprintf(&log, "%d,%d;", x.i, y.i)
			return x.v < y.v, nil
		}); err != nil {
			t.Fatal(err)
		}
		var order strings.Builder
		for _, it := range items {
			fmt.Fprintf(&order, "%d,", it.i)
		}
		sameComparisons, sameOrder := sha256Hex(log.String()) == c.Digest, sha256Hex(order.String()) == c.Order
		if comparisons != c.Comparisons || !sameComparisons || !sameOrder {
			t.Errorf("case %d (%d items): %d comparisons, Python %s made %d; same comparisons %v, same order %v",
				n, len(c.Values), comparisons, data.Python, c.Comparisons, sameComparisons, sameOrder)
		}
	}
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestListSortStopsAtTheFirstError: the error of a comparison ends the sort.
func TestListSortStopsAtTheFirstError(t *testing.T) {
	calls := 0
	err := pyListSort([]int{3, 1, 2, 0}, func(x, y int) (bool, error) {
		calls++
		if calls == 2 {
			return false, fmt.Errorf("cannot compare %d and %d", x, y)
		}
		return x < y, nil
	})
	if err == nil || calls != 2 {
		t.Errorf("err %v after %d comparisons, want the second's", err, calls)
	}
}
