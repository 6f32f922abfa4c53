package nodeagent

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/status"
)

// metrics of the node plugin's CSI operations.
type metrics struct {
	operations *prometheus.CounterVec
	duration   *prometheus.HistogramVec
}

// newMetrics registers the metrics on reg (nil: unregistered, for tests).
func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		operations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pav_node_operations_total",
			Help: "NodePublishVolume (publish) and NodeUnpublishVolume (unpublish) calls by gRPC result code.",
		}, []string{"operation", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "pav_node_operation_duration_seconds",
			Help:    "Duration of NodePublishVolume (publish) and NodeUnpublishVolume (unpublish) calls.",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 30, 60, 120},
		}, []string{"operation", "code"}),
	}
	if reg != nil {
		reg.MustRegister(m.operations, m.duration)
	}
	return m
}

func (m *metrics) observe(op string, start time.Time, err error) {
	code := status.Code(err).String()
	m.operations.WithLabelValues(op, code).Inc()
	m.duration.WithLabelValues(op, code).Observe(time.Since(start).Seconds())
}
