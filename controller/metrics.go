package controller

import (
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/albertofaria/pav/protocol"
)

// Metrics are the controller's Prometheus metrics, each by provisioner
// (PavProvisioners are few and created by administrators), the operations
// also by StorageClass (class: also made by administrators, each naming one
// provisioner, so this adds a series per class, not per provisioner and class):
//   - pav_controller_operations_total{provisioner,class,operation,result}: provision/delete/expand/modify attempts;
//   - pav_controller_operation_duration_seconds{provisioner,class,operation}: claim provisionable → PV created
//     (provisionableSince);
//   - pav_controller_pods_total{provisioner,phase,result}: validation/creation/deletion/expansion pods finished;
//   - pav_controller_pod_duration_seconds{provisioner,phase}: pod creation → results collected;
//   - pav_controller_pods_in_flight{provisioner,phase}: PaV pods not yet done (from the cache).
//
// A provisioner's series start at zero when the controller syncs it (for
// each of its StorageClasses then), so dashboards and alerts see them at
// once, and go when it is deleted; a deleted class's go at the provisioner's
// next sync.
type Metrics struct {
	reg        prometheus.Registerer
	operations *prometheus.CounterVec
	opDuration *prometheus.HistogramVec
	pods       *prometheus.CounterVec
	podDur     *prometheus.HistogramVec
	once       sync.Once

	mu      sync.Mutex
	classes map[string][]string // provisioner → the classes its series were started for
}

// NewMetrics creates the metrics and registers them with reg (nil: not exported).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		reg: reg,
		operations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pav_controller_operations_total",
			Help: "Provisioning and deletion attempts by result.",
		}, []string{"provisioner", "class", "operation", "result"}),
		opDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "pav_controller_operation_duration_seconds",
			Help:    "Time from when a claim could be provisioned until its PersistentVolume was created: from the claim's creation, or for a WaitForFirstConsumer claim from when this controller first saw the node the scheduler selected for it (so the wait for a consumer is left out; after a change of leader, from when the new leader first saw it).",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 14),
		}, []string{"provisioner", "class", "operation"}),
		pods: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pav_controller_pods_total",
			Help: "Validation, creation and deletion pods that finished, by result.",
		}, []string{"provisioner", "phase", "result"}),
		podDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "pav_controller_pod_duration_seconds",
			Help:    "Time from a PaV pod's creation until it was done (terminated and results collected).",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 14),
		}, []string{"provisioner", "phase"}),
	}
	if reg != nil {
		reg.MustRegister(m.operations, m.opDuration, m.pods, m.podDur)
	}
	return m
}

// provisionerSeen starts a live provisioner's counters at zero, the
// operations' for each of its StorageClasses, and drops the operation series
// of its classes that are gone.
func (m *Metrics) provisionerSeen(provisioner string, classes []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, old := range m.classes[provisioner] {
		if !slices.Contains(classes, old) {
			l := prometheus.Labels{"provisioner": provisioner, "class": old}
			m.operations.DeletePartialMatch(l)
			m.opDuration.DeletePartialMatch(l)
		}
	}
	if m.classes == nil {
		m.classes = map[string][]string{}
	}
	m.classes[provisioner] = classes
	for _, class := range classes {
		for _, op := range []string{"provision", "delete", "expand", "modify"} {
			for _, r := range []string{"success", "failure"} {
				m.operations.WithLabelValues(provisioner, class, op, r)
			}
		}
	}
	for _, ph := range []protocol.Phase{protocol.PhaseValidation, protocol.PhaseCreation, protocol.PhaseDeletion, protocol.PhaseExpansion, protocol.PhaseModification} {
		for _, r := range []string{"success", "failure"} {
			m.pods.WithLabelValues(provisioner, string(ph), r)
		}
	}
}

// provisionerGone drops a deleted provisioner's series.
func (m *Metrics) provisionerGone(provisioner string) {
	m.mu.Lock()
	delete(m.classes, provisioner)
	m.mu.Unlock()
	l := prometheus.Labels{"provisioner": provisioner}
	m.operations.DeletePartialMatch(l)
	m.opDuration.DeletePartialMatch(l)
	m.pods.DeletePartialMatch(l)
	m.podDur.DeletePartialMatch(l)
}

// operation counts an attempt of op on a volume of provisioner and class
// (the claim's or PV's StorageClass name) and, for a success, its duration d.
func (m *Metrics) operation(provisioner, class, op, result string, d time.Duration) {
	m.operations.WithLabelValues(provisioner, class, op, result).Inc()
	if d > 0 {
		m.opDuration.WithLabelValues(provisioner, class, op).Observe(d.Seconds())
	}
}

// claimClassName is the operation metrics' class of a claim: its
// StorageClass's name ("" for a claim without one).
func claimClassName(pvc *corev1.PersistentVolumeClaim) string {
	if n := pvc.Spec.StorageClassName; n != nil {
		return *n
	}
	return ""
}

func (m *Metrics) podDone(pod *corev1.Pod, ok bool) {
	result := "success"
	if !ok {
		result = "failure"
	}
	ph, prov := string(phaseOf(pod)), pod.Labels[protocol.LabelProvisioner]
	m.pods.WithLabelValues(prov, ph, result).Inc()
	m.podDur.WithLabelValues(prov, ph).Observe(time.Since(pod.CreationTimestamp.Time).Seconds())
}

// registerInFlight exports the number of unfinished PaV pods per
// provisioner and phase, computed from the caches at scrape time (every
// phase of every provisioner, zero included).
func (m *Metrics) registerInFlight(c *Controller) {
	if m.reg == nil {
		return
	}
	m.once.Do(func() {
		m.reg.MustRegister(&inFlight{c: c, desc: prometheus.NewDesc("pav_controller_pods_in_flight",
			"PaV pods (all phases) that have not terminated yet.", []string{"provisioner", "phase"}, nil)})
	})
}

type inFlight struct {
	c    *Controller
	desc *prometheus.Desc
}

func (f *inFlight) Describe(ch chan<- *prometheus.Desc) { ch <- f.desc }

func (f *inFlight) Collect(ch chan<- prometheus.Metric) {
	phases := []protocol.Phase{protocol.PhaseValidation, protocol.PhaseCreation, protocol.PhaseDeletion,
		protocol.PhaseStaging, protocol.PhaseUnstaging, protocol.PhaseExpansion, protocol.PhaseModification}
	type key struct {
		provisioner string
		phase       protocol.Phase
	}
	counts := map[key]int{}
	provisioners, _ := f.c.provisioners.List(everything)
	for _, p := range provisioners {
		for _, ph := range phases {
			counts[key{p.Name, ph}] = 0
		}
	}
	pods, _ := f.c.pods.List(everything)
	for _, p := range pods {
		if !protocol.Terminated(p) {
			counts[key{p.Labels[protocol.LabelProvisioner], phaseOf(p)}]++
		}
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(f.desc, prometheus.GaugeValue, float64(n), k.provisioner, string(k.phase))
	}
}

// nodeSelected remembers when this process first saw a node selected for
// each WaitForFirstConsumer claim, by claim key: the moment provisioning
// became possible, which the API does not record (the cache drops
// managedFields). In memory only, like the backoff: a new leader counts from
// when it first saw the claim.
type nodeSelected struct {
	mu    sync.Mutex
	since map[string]nodeSelectedAt
}

type nodeSelectedAt struct {
	uid types.UID // a claim deleted and created again under its name starts anew
	at  time.Time
}

// seen records now for the claim unless an earlier time is recorded, and
// returns the recorded time.
func (n *nodeSelected) seen(key string, uid types.UID, now time.Time) time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	if e, ok := n.since[key]; ok && e.uid == uid {
		return e.at
	}
	if n.since == nil {
		n.since = map[string]nodeSelectedAt{}
	}
	n.since[key] = nodeSelectedAt{uid, now}
	return now
}

func (n *nodeSelected) forget(key string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.since, key)
}
