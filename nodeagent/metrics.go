package nodeagent

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/status"
)

// metrics of the node plugin's CSI operations, by provisioner (its CSI
// driver: PavProvisioners are few and created by administrators).
type metrics struct {
	operations *prometheus.CounterVec
	duration   *prometheus.HistogramVec
}

// newMetrics registers the metrics on reg (nil: unregistered, for tests).
func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		operations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pav_node_operations_total",
			Help: "NodePublishVolume (publish), NodeUnpublishVolume (unpublish), NodeStageVolume (stage) and NodeUnstageVolume (unstage) calls by provisioner and gRPC result code.",
		}, []string{"provisioner", "operation", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "pav_node_operation_duration_seconds",
			Help:    "Duration of NodePublishVolume (publish), NodeUnpublishVolume (unpublish), NodeStageVolume (stage) and NodeUnstageVolume (unstage) calls by provisioner.",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 30, 60, 120},
		}, []string{"provisioner", "operation", "code"}),
	}
	if reg != nil {
		reg.MustRegister(m.operations, m.duration)
	}
	return m
}

func (m *metrics) observe(op, driver string, start time.Time, err error) {
	code := status.Code(err).String()
	m.operations.WithLabelValues(driver, op, code).Inc()
	m.duration.WithLabelValues(driver, op, code).Observe(time.Since(start).Seconds())
}

// abnormalVolumes exports how many volumes published on this node the
// last health check (kubelet's NodeGetVolumeStats) found abnormal, by
// provisioner and reason, from volumeHealth at scrape time.
type abnormalVolumes struct {
	health *volumeHealth
	desc   *prometheus.Desc
}

func newAbnormalVolumes(h *volumeHealth) *abnormalVolumes {
	return &abnormalVolumes{health: h, desc: prometheus.NewDesc("pav_node_volumes_abnormal",
		"Volumes on this node whose last health check (kubelet's volume stats) found them abnormal, by provisioner and reason (StagingPodStopped, VolumeUnmounted, VolumeUnreachable).",
		[]string{"provisioner", "reason"}, nil)}
}

func (a *abnormalVolumes) Describe(ch chan<- *prometheus.Desc) { ch <- a.desc }

func (a *abnormalVolumes) Collect(ch chan<- prometheus.Metric) {
	for k, n := range a.health.counts() {
		ch <- prometheus.MustNewConstMetric(a.desc, prometheus.GaugeValue, float64(n), k.driver, k.reason)
	}
}
