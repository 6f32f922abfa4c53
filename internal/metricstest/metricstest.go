// Package metricstest reads series out of a Prometheus registry, for tests
// of what a process exports.
package metricstest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Scrape returns the value of the first series name{labels...} in reg (a
// histogram's value is its count of observations), and whether there is
// one; labels not given match anything.
func Scrape(t testing.TB, reg prometheus.Gatherer, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	m := first(t, reg, name, labels, func(*dto.Metric) bool { return true })
	if m == nil {
		return 0, false
	}
	return value(m), true
}

// HistogramSum returns the sum of the observations of the first histogram
// series name{labels...} in reg, and whether there is one.
func HistogramSum(t testing.TB, reg prometheus.Gatherer, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	m := first(t, reg, name, labels, func(m *dto.Metric) bool { return m.Histogram != nil })
	if m == nil {
		return 0, false
	}
	return m.Histogram.GetSampleSum(), true
}

// first is the first series name{labels...} in reg that accept takes, or nil.
func first(t testing.TB, reg prometheus.Gatherer, name string, labels map[string]string, accept func(*dto.Metric) bool) *dto.Metric {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gathering metrics: %v", err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if accept(m) && matches(m, labels) {
				return m
			}
		}
	}
	return nil
}

func matches(m *dto.Metric, labels map[string]string) bool {
	got := map[string]string{}
	for _, l := range m.GetLabel() {
		got[l.GetName()] = l.GetValue()
	}
	for k, v := range labels {
		if got[k] != v {
			return false
		}
	}
	return true
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return 0
}
