package main

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	clientmetrics "k8s.io/client-go/tools/metrics"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/albertofaria/pav/third_party/leaderelection"
)

// Metrics are served on their own address, loopback by default: they tell
// which claims, namespaces and provisioners exist, so only who can reach the
// pod's own network namespace (a sidecar, kubectl port-forward, which RBAC
// guards) reads them unless an operator deliberately exposes the endpoint;
// and then, with --metrics-auth, only who the API server says may
// (metricsAccess).
const (
	metricsFlagHelp     = "address of /metrics (empty: disabled); the default serves loopback only, set e.g. :9090 to let a scraper in"
	metricsAuthFlagHelp = "let only requests with a bearer token of a user who may get the non-resource URL /metrics (ClusterRole pav-metrics-reader) read /metrics: TokenReview and SubjectAccessReview, as kube-apiserver delegates them (false: anyone who reaches the address)"
)

// newRegistry holds the metrics every process exports: Go runtime and
// process, pav_build_info, and those of the client-go parts PaV runs
// (API requests, workqueues, leader election) under the names Kubernetes'
// components give them (component-base/metrics/prometheus), so the same
// dashboards read them.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	info := currentBuildInfo()
	build := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "pav_build_info",
		Help:        "PaV's version, commit and Go version (always 1).",
		ConstLabels: prometheus.Labels{"version": info.Version, "commit": info.Commit, "go_version": info.GoVersion},
	})
	build.Set(1)
	reg.MustRegister(build)
	kube := kubeMetrics()
	reg.MustRegister(kube.collectors()...)
	return reg
}

// clientGoMetrics are the metrics of client-go's REST client, workqueues
// and leader election. client-go takes one provider of each per process,
// set before the first client or queue is made: they are made once, and
// every registry exports the same collectors.
type clientGoMetrics struct {
	requestLatency, rateLimiterLatency *prometheus.HistogramVec
	requests, retries                  *prometheus.CounterVec

	depth, unfinishedWork, longestRunningWork *prometheus.GaugeVec
	adds, retriesQueue                        *prometheus.CounterVec
	queueLatency, workDuration                *prometheus.HistogramVec

	leaderStatus   *prometheus.GaugeVec
	leaderSlowpath *prometheus.CounterVec
}

var kubeMetrics = sync.OnceValue(func() *clientGoMetrics {
	apiBuckets := []float64{0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60}
	queueBuckets := prometheus.ExponentialBuckets(10e-9, 10, 10)
	m := &clientGoMetrics{
		requestLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "rest_client_request_duration_seconds", Help: "Kubernetes API request latency by verb and host.", Buckets: apiBuckets,
		}, []string{"verb", "host"}),
		rateLimiterLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "rest_client_rate_limiter_duration_seconds", Help: "Time Kubernetes API requests waited for the client-side rate limiter (--kube-api-qps, --kube-api-burst), by verb and host.", Buckets: apiBuckets,
		}, []string{"verb", "host"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rest_client_requests_total", Help: "Kubernetes API requests by status code, method and host.",
		}, []string{"code", "method", "host"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rest_client_request_retries_total", Help: "Kubernetes API requests retried by the client, by status code, verb and host.",
		}, []string{"code", "verb", "host"}),
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "workqueue_depth", Help: "Items waiting in a workqueue.",
		}, []string{"name"}),
		adds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "workqueue_adds_total", Help: "Items added to a workqueue.",
		}, []string{"name"}),
		queueLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "workqueue_queue_duration_seconds", Help: "Time an item waits in a workqueue before it is worked on.", Buckets: queueBuckets,
		}, []string{"name"}),
		workDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "workqueue_work_duration_seconds", Help: "Time working on an item of a workqueue takes.", Buckets: queueBuckets,
		}, []string{"name"}),
		unfinishedWork: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "workqueue_unfinished_work_seconds", Help: "Seconds of work in progress not yet observed by workqueue_work_duration_seconds; a large value means stuck workers.",
		}, []string{"name"}),
		longestRunningWork: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "workqueue_longest_running_processor_seconds", Help: "Seconds the longest running worker of a workqueue has been working on its item.",
		}, []string{"name"}),
		retriesQueue: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "workqueue_retries_total", Help: "Items of a workqueue added again with rate limiting (retries).",
		}, []string{"name"}),
		leaderStatus: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "leader_election_master_status", Help: "1 while this replica leads the Lease name, else 0.",
		}, []string{"name"}),
		leaderSlowpath: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leader_election_slowpath_total", Help: "Lease renewals that had to read the Lease again (an update conflicted, or the cached one was stale).",
		}, []string{"name"}),
	}
	clientmetrics.Register(clientmetrics.RegisterOpts{
		RequestLatency:     latencyAdapter{m.requestLatency},
		RateLimiterLatency: latencyAdapter{m.rateLimiterLatency},
		RequestResult:      resultAdapter{m.requests},
		RequestRetry:       retryAdapter{m.retries},
	})
	workqueue.SetProvider(queueProvider{m})
	leaderelection.SetProvider(leaderProvider{m})
	return m
})

func (m *clientGoMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{
		m.requestLatency, m.rateLimiterLatency, m.requests, m.retries,
		m.depth, m.adds, m.queueLatency, m.workDuration, m.unfinishedWork, m.longestRunningWork, m.retriesQueue,
		m.leaderStatus, m.leaderSlowpath,
	}
}

type latencyAdapter struct{ m *prometheus.HistogramVec }

func (a latencyAdapter) Observe(_ context.Context, verb string, u url.URL, latency time.Duration) {
	a.m.WithLabelValues(verb, u.Host).Observe(latency.Seconds())
}

type resultAdapter struct{ m *prometheus.CounterVec }

func (a resultAdapter) Increment(_ context.Context, code, method, host string) {
	a.m.WithLabelValues(code, method, host).Inc()
}

type retryAdapter struct{ m *prometheus.CounterVec }

func (a retryAdapter) IncrementRetry(_ context.Context, code, method, host string) {
	a.m.WithLabelValues(code, method, host).Inc()
}

// queueProvider: PaV's workqueues are named (the controller's claims,
// volumes, provisioners, contents; the node plugin's results, recovery).
type queueProvider struct{ m *clientGoMetrics }

func (p queueProvider) NewDepthMetric(name string) workqueue.GaugeMetric {
	return p.m.depth.WithLabelValues(name)
}
func (p queueProvider) NewAddsMetric(name string) workqueue.CounterMetric {
	return p.m.adds.WithLabelValues(name)
}
func (p queueProvider) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return p.m.queueLatency.WithLabelValues(name)
}
func (p queueProvider) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return p.m.workDuration.WithLabelValues(name)
}
func (p queueProvider) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return p.m.unfinishedWork.WithLabelValues(name)
}
func (p queueProvider) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return p.m.longestRunningWork.WithLabelValues(name)
}
func (p queueProvider) NewRetriesMetric(name string) workqueue.CounterMetric {
	return p.m.retriesQueue.WithLabelValues(name)
}

type leaderProvider struct{ m *clientGoMetrics }

func (p leaderProvider) NewLeaderMetric() leaderelection.LeaderMetric { return leaderMetric(p) }

type leaderMetric struct{ m *clientGoMetrics }

func (l leaderMetric) On(name string)  { l.m.leaderStatus.WithLabelValues(name).Set(1) }
func (l leaderMetric) Off(name string) { l.m.leaderStatus.WithLabelValues(name).Set(0) }
func (l leaderMetric) SlowpathExercised(name string) {
	l.m.leaderSlowpath.WithLabelValues(name).Inc()
}

// serveMetrics serves reg's /metrics on addr, to whom access allows if it is
// not nil.
func serveMetrics(ctx context.Context, addr string, reg *prometheus.Registry, access reviewer) {
	if addr == "" {
		return
	}
	mux := http.NewServeMux()
	var h http.Handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	if access != nil {
		h = newMetricsAccess(access, h)
	}
	mux.Handle("/metrics", h)
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		klog.ErrorS(err, "Metrics endpoint stopped", "address", addr)
	}
}
