//go:build soak

// Package soak is PaV's chaos soak (`make soak`; a short one in `make test`): many
// volume lifecycles at once over four provisioners of different shapes
// (testdata/provisioners.yaml) while faults are injected at points a seed
// chooses, then an audit of everything PaV could have leaked or lost, and a
// report (_output/soak/report.md).
//
// A lifecycle: claim created → Bound → a client pod writes a unique token and
// exits → it is deleted → a second client pod reads the token back → the claim
// is deleted → its PV is gone. One lifecycle in five of the provisioners that
// take snapshots also snapshots its claim after the write and restores it into
// a second claim, whose reader must read the token too (snapshot_test.go).
// Clients run on the node sharing this machine's mount namespace, so the audit
// can read the node's mounts, /pav directories, loop devices, the
// provisioners' ledger and snapshot copies directly.
//
// Settings (environment): SOAK_CYCLES (default 20), SOAK_SEED (default: from the
// clock, printed), SOAK_PARALLEL (lifecycles at once, default 6),
// SOAK_FAULT_EVERY (mean time between cluster faults, default 6s). The seed
// fixes which lifecycle gets which fault and the order and spacing of the
// cluster faults; where they land relative to the lifecycles depends on timing.
package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/albertofaria/pav/test/e2e/framework"
)

// settings of one soak run.
type settings struct {
	Cycles     int
	Seed       uint64
	Parallel   int
	FaultEvery time.Duration
}

func loadSettings(t *testing.T) settings {
	s := settings{Cycles: 20, Seed: uint64(time.Now().UnixNano()) % 1_000_000, Parallel: 6, FaultEvery: 6 * time.Second}
	for name, dst := range map[string]*int{"SOAK_CYCLES": &s.Cycles, "SOAK_PARALLEL": &s.Parallel} {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				t.Fatalf("%s=%q: want a positive number", name, v)
			}
			*dst = n
		}
	}
	if v := os.Getenv("SOAK_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("SOAK_SEED=%q: want a number", v)
		}
		s.Seed = n
	}
	if v := os.Getenv("SOAK_FAULT_EVERY"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("SOAK_FAULT_EVERY=%q: want a positive duration", v)
		}
		s.FaultEvery = d
	}
	return s
}

// stepBound is how long one lifecycle step may take under faults before its
// claim counts as stuck. The slowest legitimate path: kubelet's volume
// operation backoff (up to 2 min 2 s between NodeStageVolume attempts) after a
// staging failure, on top of a node plugin or controller restart (the local
// cluster caps kubelet's container restart backoff at 10 s), a kube-apiserver
// restart (~10 s) and leader election (15 s lease).
const stepBound = 5 * time.Minute

func TestSoak(t *testing.T) {
	cfg := loadSettings(t)
	fmt.Printf("soak: %d cycles, seed %d, %d at once, a cluster fault every ~%v (replay: SOAK_SEED=%d)\n",
		cfg.Cycles, cfg.Seed, cfg.Parallel, cfg.FaultEvery, cfg.Seed)
	// The verdict is printed last, after the framework's dump of the
	// namespace (cleanups run in reverse), where the tail of a CI log shows it.
	var verdict string
	t.Cleanup(func() {
		if verdict != "" {
			fmt.Print(verdict)
		}
	})
	f := framework.New(t)
	s := newSoak(t, f, cfg)
	s.install()

	ctx, stopFaults := context.WithCancel(f.Ctx)
	faultsDone := make(chan struct{})
	go func() { defer close(faultsDone); s.injectFaults(ctx) }()

	start := time.Now()
	cycles := make([]*cycle, cfg.Cycles)
	next := make(chan int)
	var wg sync.WaitGroup
	for range cfg.Parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				cycles[i] = s.lifecycle(f.Ctx, i)
			}
		}()
	}
	for i := range cfg.Cycles {
		next <- i
	}
	close(next)
	wg.Wait()
	stopFaults()
	<-faultsDone
	elapsed := time.Since(start)

	a := s.audit(cycles)
	r := s.report(cycles, a, elapsed)
	fmt.Print(r)
	if err := writeReport(r); err != nil {
		t.Error(err)
	}
	if problems := a.problems(); len(problems) > 0 {
		for _, p := range problems {
			t.Error(p)
		}
		verdict = fmt.Sprintf("soak: the audit failed (replay with SOAK_SEED=%d SOAK_CYCLES=%d):\n%s\n",
			cfg.Seed, cfg.Cycles, strings.Join(problems, "\n"))
		t.FailNow()
	}
}

// rngFor is the random source of one part of the run: stream 0 is the
// cluster faults, stream i+1 lifecycle i, so each is the same for a seed
// whatever the others do.
func rngFor(seed uint64, stream int) *rand.Rand {
	return rand.New(rand.NewPCG(seed, uint64(stream)))
}
