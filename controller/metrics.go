package controller

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/albertofaria/pav/protocol"
)

// Metrics are the controller's Prometheus metrics:
//   - pav_controller_operations_total{operation,result}: provision/delete attempts;
//   - pav_controller_operation_duration_seconds{operation}: claim creation → PV created;
//   - pav_controller_pods_total{phase,result}: validation/creation/deletion pods finished;
//   - pav_controller_pod_duration_seconds{phase}: pod creation → results collected;
//   - pav_controller_pods_in_flight{phase}: PaV pods not yet done (from the cache).
type Metrics struct {
	reg        prometheus.Registerer
	operations *prometheus.CounterVec
	opDuration *prometheus.HistogramVec
	pods       *prometheus.CounterVec
	podDur     *prometheus.HistogramVec
	once       sync.Once
}

// NewMetrics creates the metrics and registers them with reg (nil: not exported).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		reg: reg,
		operations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "pav", Subsystem: "controller", Name: "operations_total",
			Help: "Provisioning and deletion attempts by result.",
		}, []string{"operation", "result"}),
		opDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "pav", Subsystem: "controller", Name: "operation_duration_seconds",
			Help:    "Time from claim creation until its volume was provisioned.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 14),
		}, []string{"operation"}),
		pods: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "pav", Subsystem: "controller", Name: "pods_total",
			Help: "Validation, creation and deletion pods that finished, by result.",
		}, []string{"phase", "result"}),
		podDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "pav", Subsystem: "controller", Name: "pod_duration_seconds",
			Help:    "Time from a PaV pod's creation until it was done (terminated and results collected).",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 14),
		}, []string{"phase"}),
	}
	// Start every series at zero so dashboards and alerts see them at once.
	for _, op := range []string{"provision", "delete", "expand", "modify"} {
		for _, r := range []string{"success", "failure"} {
			m.operations.WithLabelValues(op, r)
		}
	}
	for _, ph := range []protocol.Phase{protocol.PhaseValidation, protocol.PhaseCreation, protocol.PhaseDeletion, protocol.PhaseExpansion, protocol.PhaseModification} {
		for _, r := range []string{"success", "failure"} {
			m.pods.WithLabelValues(string(ph), r)
		}
	}
	if reg != nil {
		reg.MustRegister(m.operations, m.opDuration, m.pods, m.podDur)
	}
	return m
}

func (m *Metrics) operation(op, result string, d time.Duration) {
	m.operations.WithLabelValues(op, result).Inc()
	if d > 0 {
		m.opDuration.WithLabelValues(op).Observe(d.Seconds())
	}
}

func (m *Metrics) podDone(pod *corev1.Pod, ok bool) {
	result := "success"
	if !ok {
		result = "failure"
	}
	ph := string(phaseOf(pod))
	m.pods.WithLabelValues(ph, result).Inc()
	m.podDur.WithLabelValues(ph).Observe(time.Since(pod.CreationTimestamp.Time).Seconds())
}

// registerInFlight exports the number of unfinished PaV pods per phase,
// computed from the pod cache at scrape time.
func (m *Metrics) registerInFlight(c *Controller) {
	if m.reg == nil {
		return
	}
	m.once.Do(func() {
		m.reg.MustRegister(&inFlight{c: c, desc: prometheus.NewDesc("pav_controller_pods_in_flight",
			"PaV pods (all phases) that have not terminated yet.", []string{"phase"}, nil)})
	})
}

type inFlight struct {
	c    *Controller
	desc *prometheus.Desc
}

func (f *inFlight) Describe(ch chan<- *prometheus.Desc) { ch <- f.desc }

func (f *inFlight) Collect(ch chan<- prometheus.Metric) {
	counts := map[protocol.Phase]int{
		protocol.PhaseValidation: 0, protocol.PhaseCreation: 0, protocol.PhaseDeletion: 0,
		protocol.PhaseStaging: 0, protocol.PhaseUnstaging: 0, protocol.PhaseExpansion: 0, protocol.PhaseModification: 0,
	}
	pods, _ := f.c.pods.List(everything)
	for _, p := range pods {
		if !protocol.Terminated(p) {
			counts[phaseOf(p)]++
		}
	}
	for ph, n := range counts {
		ch <- prometheus.MustNewConstMetric(f.desc, prometheus.GaugeValue, float64(n), string(ph))
	}
}
