package nodeagent

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	pavcsi "github.com/albertofaria/pav/csi"
	"github.com/albertofaria/pav/internal/metricstest"
	"github.com/albertofaria/pav/internal/testwait"
	"github.com/albertofaria/pav/nodeagent/volstats"
)

// A volume whose file system does not answer (a hung FUSE daemon) pins at
// most one thread, however often kubelet asks for its stats: the first call
// gives up after the deadline, later ones answer at once while that read is
// blocked, and once it returns the volume is read again.
func TestStatsOfAHungVolumePinOneThread(t *testing.T) {
	f := newStagerFixture(t, nil)
	release := make(chan struct{})
	var mu sync.Mutex
	reads := 0
	f.stager.readStats = func(string) (*pavcsi.VolumeStats, error) {
		mu.Lock()
		reads++
		mu.Unlock()
		<-release // a stat on a hung mount
		return &pavcsi.VolumeStats{TotalBytes: 1 << 20}, nil
	}
	f.stager.probes = volstats.NewProbes(time.Millisecond)
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		st, err := f.stager.Stats(ctx, testDriver, testHandle, f.target)
		if err != nil {
			t.Fatal(err)
		}
		if !st.Abnormal || st.Reason != volstats.ReasonVolumeUnreachable || !strings.Contains(st.Message, "does not answer") {
			t.Fatalf("call %d: %+v", i, st)
		}
	}
	// Each call started its read, or saw one running, before it returned;
	// the first read's goroutine may not have counted itself yet.
	readsNow := func() int { mu.Lock(); defer mu.Unlock(); return reads }
	testwait.Until(t, "the first read of the hung volume to start", func() bool { return readsNow() > 0 })
	if n := readsNow(); n != 1 {
		t.Errorf("%d reads of the hung volume under way, want 1", n)
	}

	close(release) // the file system answers again
	f.stager.probes.Timeout = time.Hour
	for {
		st, err := f.stager.Stats(ctx, testDriver, testHandle, f.target)
		if err != nil {
			t.Fatal(err)
		}
		if !st.Abnormal {
			if st.TotalBytes != 1<<20 {
				t.Errorf("stats %+v", st)
			}
			break
		}
		// Answered at once: the earlier read is still returning.
	}
}

// TestAbnormalVolumesAndOperationsMetrics: the volumes the last health
// check found abnormal are counted by provisioner and reason until one
// finds them well again; CSI calls are counted by provisioner.
func TestAbnormalVolumesAndOperationsMetrics(t *testing.T) {
	f := newStagerFixture(t, nil)
	reg := prometheus.NewRegistry()
	reg.MustRegister(newAbnormalVolumes(f.stager.health))
	f.stager.metrics = newMetrics(reg)
	ctx := context.Background()
	abnormal := map[string]string{"provisioner": testDriver, "reason": volstats.ReasonVolumeUnmounted}

	f.stager.readStats = func(string) (*pavcsi.VolumeStats, error) {
		return &pavcsi.VolumeStats{Abnormal: true, Reason: volstats.ReasonVolumeUnmounted, Message: "gone"}, nil
	}
	if _, err := f.stager.Stats(ctx, testDriver, testHandle, f.target); err != nil {
		t.Fatal(err)
	}
	if v, _ := metricstest.Scrape(t, reg, "pav_node_volumes_abnormal", abnormal); v != 1 {
		t.Errorf("abnormal volumes after a failed check: %v, want 1", v)
	}
	f.stager.readStats = func(string) (*pavcsi.VolumeStats, error) { return &pavcsi.VolumeStats{TotalBytes: 1}, nil }
	if _, err := f.stager.Stats(ctx, testDriver, testHandle, f.target); err != nil {
		t.Fatal(err)
	}
	if v, ok := metricstest.Scrape(t, reg, "pav_node_volumes_abnormal", abnormal); ok {
		t.Errorf("abnormal volumes after a good check: %v, want none", v)
	}

	if err := f.stager.Unpublish(ctx, testDriver, testHandle, f.target); err != nil {
		t.Fatal(err)
	}
	if v, _ := metricstest.Scrape(t, reg, "pav_node_operations_total", map[string]string{"provisioner": testDriver, "operation": "unpublish", "code": "OK"}); v != 1 {
		t.Errorf("unpublish calls of %s: %v, want 1", testDriver, v)
	}
}
