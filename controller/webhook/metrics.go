package webhook

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
)

// What became of an admission review, the label of the webhook's metrics.
const (
	resultAllowed    = "allowed"     // valid, no warnings
	resultWarned     = "warned"      // valid, with warnings for the user
	resultDenied     = "denied"      // invalid PavProvisioner
	resultBusy       = "busy"        // no room: answered 429
	resultBadRequest = "bad_request" // not an AdmissionReview, or too large
)

// Metrics of the admission webhook:
//   - pav_webhook_requests_total{result}: reviews by what became of them;
//   - pav_webhook_request_duration_seconds{result}: from arrival to answer,
//     waiting for a slot included.
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pav_webhook_requests_total",
			Help: "PavProvisioner admission reviews by result: allowed, warned (allowed with warnings), denied, busy, bad_request.",
		}, []string{"result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "pav_webhook_request_duration_seconds",
			Help:    "Time from a PavProvisioner admission review's arrival to its answer, by result.",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
		}, []string{"result"}),
	}
	for _, r := range []string{resultAllowed, resultWarned, resultDenied, resultBusy, resultBadRequest} {
		m.requests.WithLabelValues(r)
	}
	reg.MustRegister(m.requests, m.duration)
	return m
}

// observe counts a review that started at start with *result (read when
// the review is answered).
func (m *Metrics) observe(start time.Time, result *string) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(*result).Inc()
	m.duration.WithLabelValues(*result).Observe(time.Since(start).Seconds())
}

func reviewResult(resp *admissionv1.AdmissionResponse) string {
	switch {
	case !resp.Allowed:
		return resultDenied
	case len(resp.Warnings) > 0:
		return resultWarned
	}
	return resultAllowed
}
