package nodeagent

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	pavcsi "github.com/albertofaria/pav/csi"
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
	f.stager.probes = newVolumeProbes(time.Millisecond)
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		st, err := f.stager.Stats(ctx, testDriver, testHandle, f.target)
		if err != nil {
			t.Fatal(err)
		}
		if !st.Abnormal || st.Reason != ReasonVolumeUnreachable || !strings.Contains(st.Message, "does not answer") {
			t.Fatalf("call %d: %+v", i, st)
		}
	}
	mu.Lock()
	if reads != 1 {
		t.Errorf("%d reads of the hung volume under way, want 1", reads)
	}
	mu.Unlock()

	close(release) // the file system answers again
	f.stager.probes.timeout = time.Hour
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
