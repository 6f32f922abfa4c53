package framework

import "testing"

func TestNearestRank(t *testing.T) {
	samples := []int{10, 20, 30, 40, 50, 60, 70, 80, 90, 100}
	for q, want := range map[float64]int{0.5: 50, 0.9: 90, 1: 100, 0.01: 10} {
		if got := NearestRank(samples, q); got != want {
			t.Errorf("NearestRank(q=%v) = %d, want %d", q, got, want)
		}
	}
	if got := NearestRank([]int{7}, 0.9); got != 7 {
		t.Errorf("one sample: %d", got)
	}
}
