package nodeagent

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	mount "k8s.io/mount-utils"

	"github.com/albertofaria/pav/kubeclient"
	"github.com/albertofaria/pav/kubeclient/generated/clientset/fake"
)

type checkFunc func() error

func (f checkFunc) Ready() error { return f() }
func (f checkFunc) Check() error { return f() }

// The probes: alive while starting but not ready; once started, both fail
// with the reason when a cache stopped or a driver socket is gone; a node
// that failed the preflight is alive but never ready, and says why.
func TestHealthProbes(t *testing.T) {
	var stagerErr, socketErr error
	var started atomic.Bool
	h := nodeHealth{
		started: &started,
		stager:  checkFunc(func() error { return stagerErr }),
		manager: checkFunc(func() error { return socketErr }),
	}
	probe := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		h.handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, strings.TrimSpace(rec.Body.String())
	}
	for _, c := range []struct {
		name               string
		started            bool
		stagerErr, sockErr error
		preflight          error
		healthz, readyz    int
		reason             string
	}{
		{name: "starting", healthz: 200, readyz: 503, reason: "caches not synced yet"},
		{name: "starting, sockets not there yet", sockErr: errors.New("socket gone"), healthz: 200, readyz: 503, reason: "caches not synced yet"},
		{name: "running", started: true, healthz: 200, readyz: 200},
		{name: "informer stopped", started: true, stagerErr: errors.New("the pods informer stopped"), healthz: 503, readyz: 503, reason: "the pods informer stopped"},
		{name: "socket gone", started: true, sockErr: errors.New("CSI driver p: socket /x is gone"), healthz: 503, readyz: 503, reason: "CSI driver p: socket /x is gone"},
		{name: "preflight failed", started: true, preflight: errors.New("this node cannot serve PaV volumes: kernel 5.4.0 lacks openat2"),
			healthz: 200, readyz: 503, reason: "this node cannot serve PaV volumes: kernel 5.4.0 lacks openat2"},
	} {
		started.Store(c.started)
		h.preflight = c.preflight
		stagerErr, socketErr = c.stagerErr, c.sockErr
		if code, body := probe("/healthz"); code != c.healthz || (code != 200 && body != c.reason) {
			t.Errorf("%s: /healthz %d %q, want %d", c.name, code, body, c.healthz)
		}
		if code, body := probe("/readyz"); code != c.readyz || (code != 200 && body != c.reason) {
			t.Errorf("%s: /readyz %d %q, want %d %q", c.name, code, body, c.readyz, c.reason)
		}
	}
}

// The stager is ready once its caches synced, and not any more when an
// informer behind them stopped.
func TestStagerReadyFollowsInformers(t *testing.T) {
	kube := fake.NewSimpleClientset()
	pods := kubeclient.NewInformer(kube, kube.CoreV1().Pods(metav1.NamespaceAll), &corev1.Pod{}, 0, kubeclient.Selector{})
	pvs := kubeclient.NewInformer(kube, kube.CoreV1().PersistentVolumes(), &corev1.PersistentVolume{}, 0, kubeclient.Selector{})
	// any informer will do: Ready only looks at its state
	nodes := kubeclient.NewInformer(kube, kube.CoreV1().Nodes(), &corev1.Node{}, 0, kubeclient.Selector{})
	s := NewStager(StagerConfig{
		Kube: kube, Engine: &literalEngine{}, NodeName: "node1", PodDirRoot: t.TempDir(), Mounter: mount.NewFakeMounter(nil),
		Pods: pods, PVs: pvs, Provisioners: nodes,
	})
	if err := s.Ready(); err == nil || !strings.Contains(err.Error(), "has not synced") {
		t.Errorf("before start: Ready() = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := kubeclient.Run(ctx, pods, pvs, nodes)
	cache.WaitForCacheSync(ctx.Done(), pods.HasSynced, pvs.HasSynced, nodes.HasSynced)
	if err := s.Ready(); err != nil {
		t.Errorf("synced: Ready() = %v", err)
	}
	cancel()
	stopped()
	if err := s.Ready(); err == nil || !strings.Contains(err.Error(), "informer stopped") {
		t.Errorf("stopped: Ready() = %v", err)
	}
}

// TestRunRejectsVolumeLimit: an impossible --max-volumes-per-node stops the
// node plugin at once, naming the flag, before it registers any driver.
func TestRunRejectsVolumeLimit(t *testing.T) {
	err := Run(context.Background(), Config{NodeName: "node1", KubeletDir: t.TempDir(), MaxVolumesPerNode: -1})
	if err == nil || !strings.Contains(err.Error(), "--max-volumes-per-node") {
		t.Errorf("Run with -1 volumes per node = %v, want an error naming the flag", err)
	}
}
