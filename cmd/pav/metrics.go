package main

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"
)

// Metrics are served on their own address, loopback by default: they tell
// which claims, namespaces and provisioners exist, so only who can reach the
// pod's own network namespace (a sidecar, kubectl port-forward, which RBAC
// guards) reads them unless an operator deliberately exposes the endpoint.
const metricsFlagHelp = "address of /metrics (empty: disabled); the default serves loopback only, set e.g. :9090 to let a scraper in (and restrict it yourself)"

func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

func serveMetrics(ctx context.Context, addr string, reg *prometheus.Registry) {
	if addr == "" {
		return
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		klog.ErrorS(err, "Metrics endpoint stopped", "address", addr)
	}
}
