package builtins

// pyListSort sorts a in place as CPython 3.11's list.sort does
// (Objects/listobject.c: natural runs extended by binary insertion to a
// minimum length, merged in powersort's order, with galloping), with less
// as its `<` (PaV). It makes the same comparisons in the same order: the
// first error less returns is the one Python's sort raises, and the order
// is Python's even where less is not a strict weak order (NaN).
func pyListSort[T any](a []T, less func(x, y T) (bool, error)) error {
	s := &listSort[T]{a: a, less: less, minGallop: minGallop}
	return s.sort()
}

// minGallop is CPython's MIN_GALLOP: how many wins in a row of one run
// start galloping.
const minGallop = 7

// sortedRun is one of CPython's pending runs: a[base:base+len], and the
// power of its boundary with the next (powersort).
type sortedRun struct{ base, len, power int }

type listSort[T any] struct {
	a         []T
	less      func(x, y T) (bool, error)
	minGallop int
	pending   []sortedRun
	tmp       []T
}

func (s *listSort[T]) sort() error {
	n := len(s.a)
	if n < 2 {
		return nil
	}
	minRun := minRunLength(n)
	for lo := 0; lo < n; {
		k, descending, err := s.countRun(lo, n)
		if err != nil {
			return err
		}
		if descending {
			for i, j := lo, lo+k-1; i < j; i, j = i+1, j-1 {
				s.a[i], s.a[j] = s.a[j], s.a[i]
			}
		}
		if k < minRun {
			force := min(n-lo, minRun)
			if err := s.binarySort(lo, lo+force, lo+k); err != nil {
				return err
			}
			k = force
		}
		if err := s.foundNewRun(k); err != nil {
			return err
		}
		s.pending = append(s.pending, sortedRun{base: lo, len: k})
		lo += k
	}
	for len(s.pending) > 1 { // merge_force_collapse
		i := len(s.pending) - 2
		if i > 0 && s.pending[i-1].len < s.pending[i+1].len {
			i--
		}
		if err := s.mergeAt(i); err != nil {
			return err
		}
	}
	return nil
}

// minRunLength is CPython's merge_compute_minrun.
func minRunLength(n int) int {
	r := 0
	for n >= 64 {
		r |= n & 1
		n >>= 1
	}
	return n + r
}

// countRun is CPython's count_run: the length of the run a[lo:hi] begins
// with, strictly descending or not descending.
func (s *listSort[T]) countRun(lo, hi int) (int, bool, error) {
	if lo+1 == hi {
		return 1, false, nil
	}
	descending, err := s.less(s.a[lo+1], s.a[lo])
	if err != nil {
		return 0, false, err
	}
	n := 2
	for i := lo + 2; i < hi; i++ {
		lt, err := s.less(s.a[i], s.a[i-1])
		if err != nil {
			return 0, false, err
		}
		if lt != descending {
			break
		}
		n++
	}
	return n, descending, nil
}

// binarySort is CPython's binarysort of a[lo:hi], whose a[lo:start] is
// sorted already.
func (s *listSort[T]) binarySort(lo, hi, start int) error {
	if lo == start {
		start++
	}
	for ; start < hi; start++ {
		pivot := s.a[start]
		l, r := lo, start
		for l < r {
			p := l + (r-l)>>1
			lt, err := s.less(pivot, s.a[p])
			if err != nil {
				return err
			}
			if lt {
				r = p
			} else {
				l = p + 1
			}
		}
		copy(s.a[l+1:start+1], s.a[l:start])
		s.a[l] = pivot
	}
	return nil
}

// foundNewRun is CPython's found_new_run: before a run of n2 items is
// pushed, merge the pending runs powersort says to.
func (s *listSort[T]) foundNewRun(n2 int) error {
	if len(s.pending) == 0 {
		return nil
	}
	last := s.pending[len(s.pending)-1]
	power := powerLoop(last.base, last.len, n2, len(s.a))
	for len(s.pending) > 1 && s.pending[len(s.pending)-2].power > power {
		if err := s.mergeAt(len(s.pending) - 2); err != nil {
			return err
		}
	}
	s.pending[len(s.pending)-1].power = power
	return nil
}

// powerLoop is CPython's powerloop: the power of the boundary between runs
// a[s1:s1+n1] and the next n2 items in a list of n.
func powerLoop(s1, n1, n2, n int) int {
	a := 2*s1 + n1
	b := a + n1 + n2
	result := 0
	for {
		result++
		if a >= n {
			a -= n
			b -= n
		} else if b >= n {
			break
		}
		a <<= 1
		b <<= 1
	}
	return result
}

// mergeAt is CPython's merge_at: merge pending runs i and i+1.
func (s *listSort[T]) mergeAt(i int) error {
	a, b := s.pending[i], s.pending[i+1]
	s.pending[i].len = a.len + b.len
	if i == len(s.pending)-3 {
		s.pending[i+1] = s.pending[i+2]
	}
	s.pending = s.pending[:len(s.pending)-1]
	baseA, na, baseB, nb := a.base, a.len, b.base, b.len
	// a's items before b's first are in place already, and b's after a's last
	k, err := s.gallopRight(s.a[baseB], s.a[baseA:baseA+na], 0)
	if err != nil {
		return err
	}
	baseA, na = baseA+k, na-k
	if na == 0 {
		return nil
	}
	if nb, err = s.gallopLeft(s.a[baseA+na-1], s.a[baseB:baseB+nb], nb-1); err != nil || nb == 0 {
		return err
	}
	if na <= nb {
		return s.mergeLo(baseA, na, baseB, nb)
	}
	return s.mergeHi(baseA, na, baseB, nb)
}

// gallopLeft is CPython's gallop_left: where key goes in the sorted a,
// left of the items equal to it, searching from hint.
func (s *listSort[T]) gallopLeft(key T, a []T, hint int) (int, error) {
	lastOfs, ofs := 0, 1
	lt, err := s.less(a[hint], key)
	if err != nil {
		return 0, err
	}
	if lt { // gallop right: a[hint+lastOfs] < key <= a[hint+ofs]
		maxOfs := len(a) - hint
		for ofs < maxOfs {
			if lt, err = s.less(a[hint+ofs], key); err != nil {
				return 0, err
			}
			if !lt {
				break
			}
			lastOfs, ofs = ofs, ofs<<1+1
		}
		ofs = min(ofs, maxOfs)
		lastOfs, ofs = lastOfs+hint, ofs+hint
	} else { // gallop left: a[hint-ofs] < key <= a[hint-lastOfs]
		maxOfs := hint + 1
		for ofs < maxOfs {
			if lt, err = s.less(a[hint-ofs], key); err != nil {
				return 0, err
			}
			if lt {
				break
			}
			lastOfs, ofs = ofs, ofs<<1+1
		}
		ofs = min(ofs, maxOfs)
		lastOfs, ofs = hint-ofs, hint-lastOfs
	}
	for lastOfs++; lastOfs < ofs; {
		m := lastOfs + (ofs-lastOfs)>>1
		if lt, err = s.less(a[m], key); err != nil {
			return 0, err
		}
		if lt {
			lastOfs = m + 1
		} else {
			ofs = m
		}
	}
	return ofs, nil
}

// gallopRight is CPython's gallop_right: where key goes in the sorted a,
// right of the items equal to it, searching from hint.
func (s *listSort[T]) gallopRight(key T, a []T, hint int) (int, error) {
	lastOfs, ofs := 0, 1
	lt, err := s.less(key, a[hint])
	if err != nil {
		return 0, err
	}
	if lt { // gallop left: a[hint-ofs] <= key < a[hint-lastOfs]
		maxOfs := hint + 1
		for ofs < maxOfs {
			if lt, err = s.less(key, a[hint-ofs]); err != nil {
				return 0, err
			}
			if !lt {
				break
			}
			lastOfs, ofs = ofs, ofs<<1+1
		}
		ofs = min(ofs, maxOfs)
		lastOfs, ofs = hint-ofs, hint-lastOfs
	} else { // gallop right: a[hint+lastOfs] <= key < a[hint+ofs]
		maxOfs := len(a) - hint
		for ofs < maxOfs {
			if lt, err = s.less(key, a[hint+ofs]); err != nil {
				return 0, err
			}
			if lt {
				break
			}
			lastOfs, ofs = ofs, ofs<<1+1
		}
		ofs = min(ofs, maxOfs)
		lastOfs, ofs = lastOfs+hint, ofs+hint
	}
	for lastOfs++; lastOfs < ofs; {
		m := lastOfs + (ofs-lastOfs)>>1
		if lt, err = s.less(key, a[m]); err != nil {
			return 0, err
		}
		if lt {
			ofs = m
		} else {
			lastOfs = m + 1
		}
	}
	return ofs, nil
}

// mergeLo is CPython's merge_lo: merge the runs a[baseA:baseA+na] and
// a[baseB:baseB+nb] (na <= nb) from the left, a copied aside.
func (s *listSort[T]) mergeLo(baseA, na, baseB, nb int) (err error) {
	s.tmp = append(s.tmp[:0], s.a[baseA:baseA+na]...)
	ta, pa, pb, dest := s.tmp, 0, baseB, baseA
	defer func() {
		if na == 1 && nb > 0 && err == nil { // CopyB: a's last item ends the merge
			copy(s.a[dest:], s.a[pb:pb+nb])
			s.a[dest+nb] = ta[pa]
		} else if na > 0 {
			copy(s.a[dest:], ta[pa:pa+na])
		}
	}()
	s.a[dest], dest, pb, nb = s.a[pb], dest+1, pb+1, nb-1
	if nb == 0 || na == 1 {
		return nil
	}
	for gallopAt := s.minGallop; ; {
		aWins, bWins := 0, 0
		for aWins < gallopAt && bWins < gallopAt { // one item at a time
			lt, err := s.less(s.a[pb], ta[pa])
			if err != nil {
				return err
			}
			if lt {
				s.a[dest], dest, pb, nb = s.a[pb], dest+1, pb+1, nb-1
				bWins, aWins = bWins+1, 0
				if nb == 0 {
					return nil
				}
			} else {
				s.a[dest], dest, pa, na = ta[pa], dest+1, pa+1, na-1
				aWins, bWins = aWins+1, 0
				if na == 1 {
					return nil
				}
			}
		}
		for gallopAt++; ; { // galloping, while it wins MIN_GALLOP items at once
			if gallopAt > 1 {
				gallopAt--
			}
			s.minGallop = gallopAt
			k, err := s.gallopRight(s.a[pb], ta[pa:pa+na], 0)
			if err != nil {
				return err
			}
			aWins = k
			if k > 0 {
				copy(s.a[dest:], ta[pa:pa+k])
				dest, pa, na = dest+k, pa+k, na-k
				if na <= 1 {
					return nil
				}
			}
			s.a[dest], dest, pb, nb = s.a[pb], dest+1, pb+1, nb-1
			if nb == 0 {
				return nil
			}
			if k, err = s.gallopLeft(ta[pa], s.a[pb:pb+nb], 0); err != nil {
				return err
			}
			bWins = k
			if k > 0 {
				copy(s.a[dest:], s.a[pb:pb+k])
				dest, pb, nb = dest+k, pb+k, nb-k
				if nb == 0 {
					return nil
				}
			}
			s.a[dest], dest, pa, na = ta[pa], dest+1, pa+1, na-1
			if na == 1 {
				return nil
			}
			if aWins < minGallop && bWins < minGallop {
				break
			}
		}
		gallopAt++ // a penalty for leaving galloping
		s.minGallop = gallopAt
	}
}

// mergeHi is CPython's merge_hi: merge the runs a[baseA:baseA+na] and
// a[baseB:baseB+nb] (na > nb) from the right, b copied aside.
func (s *listSort[T]) mergeHi(baseA, na, baseB, nb int) (err error) {
	s.tmp = append(s.tmp[:0], s.a[baseB:baseB+nb]...)
	tb, pa, pb, dest := s.tmp, baseA+na-1, nb-1, baseB+nb-1
	defer func() {
		if nb == 1 && na > 0 && err == nil { // CopyA: b's first item begins the merge
			dest, pa = dest-na, pa-na
			copy(s.a[dest+1:dest+1+na], s.a[pa+1:pa+1+na])
			s.a[dest] = tb[pb]
		} else if nb > 0 {
			copy(s.a[dest-(nb-1):dest+1], tb[:nb])
		}
	}()
	s.a[dest], dest, pa, na = s.a[pa], dest-1, pa-1, na-1
	if na == 0 || nb == 1 {
		return nil
	}
	for gallopAt := s.minGallop; ; {
		aWins, bWins := 0, 0
		for aWins < gallopAt && bWins < gallopAt { // one item at a time
			lt, err := s.less(tb[pb], s.a[pa])
			if err != nil {
				return err
			}
			if lt {
				s.a[dest], dest, pa, na = s.a[pa], dest-1, pa-1, na-1
				aWins, bWins = aWins+1, 0
				if na == 0 {
					return nil
				}
			} else {
				s.a[dest], dest, pb, nb = tb[pb], dest-1, pb-1, nb-1
				bWins, aWins = bWins+1, 0
				if nb == 1 {
					return nil
				}
			}
		}
		for gallopAt++; ; { // galloping, while it wins MIN_GALLOP items at once
			if gallopAt > 1 {
				gallopAt--
			}
			s.minGallop = gallopAt
			k, err := s.gallopRight(tb[pb], s.a[baseA:baseA+na], na-1)
			if err != nil {
				return err
			}
			k = na - k
			aWins = k
			if k > 0 {
				dest, pa = dest-k, pa-k
				copy(s.a[dest+1:dest+1+k], s.a[pa+1:pa+1+k])
				na -= k
				if na == 0 {
					return nil
				}
			}
			s.a[dest], dest, pb, nb = tb[pb], dest-1, pb-1, nb-1
			if nb == 1 {
				return nil
			}
			if k, err = s.gallopLeft(s.a[pa], tb[:nb], nb-1); err != nil {
				return err
			}
			k = nb - k
			bWins = k
			if k > 0 {
				dest, pb = dest-k, pb-k
				copy(s.a[dest+1:dest+1+k], tb[pb+1:pb+1+k])
				nb -= k
				if nb <= 1 {
					return nil
				}
			}
			s.a[dest], dest, pa, na = s.a[pa], dest-1, pa-1, na-1
			if na == 0 {
				return nil
			}
			if aWins < minGallop && bWins < minGallop {
				break
			}
		}
		gallopAt++ // a penalty for leaving galloping
		s.minGallop = gallopAt
	}
}
