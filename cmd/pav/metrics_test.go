package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"

	"github.com/albertofaria/pav/internal/metricstest"
	"github.com/albertofaria/pav/kubeclient"
	"github.com/albertofaria/pav/kubeclient/generated/clientset/fake"
	"github.com/albertofaria/pav/third_party/leaderelection"
	"github.com/albertofaria/pav/third_party/leaderelection/resourcelock"
)

var scrape = metricstest.Scrape

// TestBuildInfo: pav_build_info carries the version, commit and Go version.
func TestBuildInfo(t *testing.T) {
	info := currentBuildInfo()
	v, ok := scrape(t, newRegistry(), "pav_build_info", map[string]string{"version": info.Version, "commit": info.Commit, "go_version": info.GoVersion})
	if !ok || v != 1 {
		t.Errorf("pav_build_info: %v, present %v", v, ok)
	}
}

// TestClientGoMetrics: the API requests, workqueues and leader election of
// client-go report into every registry newRegistry makes.
func TestClientGoMetrics(t *testing.T) {
	reg := newRegistry()

	// A request to an API server that answers 404.
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	client, err := kubeclient.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = client.CoreV1().Pods("ns").Get(context.Background(), "p", metav1.GetOptions{})
	if n, _ := scrape(t, reg, "rest_client_requests_total", map[string]string{"code": "404", "method": "GET"}); n < 1 {
		t.Errorf("rest_client_requests_total{code=404,method=GET} = %v, want ≥ 1", n)
	}
	if n, _ := scrape(t, reg, "rest_client_request_duration_seconds", map[string]string{"verb": "GET"}); n < 1 {
		t.Errorf("rest_client_request_duration_seconds{verb=GET}: %v observations, want ≥ 1", n)
	}

	// A named queue: one item added, retried, worked on. Its name is new
	// (the series are process-wide, and tests may run more than once).
	queue := string(uuid.NewUUID())
	// The retry waits an hour: with the controllers' limiter (5 ms) it was
	// added again before a slow scrape, counting two adds.
	q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Hour, time.Hour),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: queue})
	defer q.ShutDown()
	q.Add("a")
	if d, _ := scrape(t, reg, "workqueue_depth", map[string]string{"name": queue}); d != 1 {
		t.Errorf("workqueue_depth = %v, want 1", d)
	}
	item, _ := q.Get()
	q.Done(item)
	q.AddRateLimited("a")
	for name, want := range map[string]float64{"workqueue_adds_total": 1, "workqueue_work_duration_seconds": 1, "workqueue_queue_duration_seconds": 1, "workqueue_retries_total": 1} {
		if n, _ := scrape(t, reg, name, map[string]string{"name": queue}); n != want {
			t.Errorf("%s{name=%s} = %v, want %v", name, queue, n, want)
		}
	}

	// An elector that takes its Lease.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: "pav", Name: "test-lease"},
		Client:     fake.NewSimpleClientset().CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: "me"},
	}
	leading := make(chan struct{})
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, Name: "test-lease", ReleaseOnCancel: true,
		LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { close(leading) },
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { le.Run(ctx); close(done) }()
	<-leading
	if v, ok := scrape(t, reg, "leader_election_master_status", map[string]string{"name": "test-lease"}); !ok || v != 1 {
		t.Errorf("leader_election_master_status while leading: %v (present %v), want 1", v, ok)
	}
	cancel()
	<-done
}
