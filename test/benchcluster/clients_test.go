//go:build benchcluster

package benchcluster

import (
	"bufio"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/albertofaria/pav/protocol"
)

// The milestones of a client pod's start on a PaV volume, as offsets from
// the client's creation.
const (
	stepStagingCreated = "staging pod created (seen)"
	stepExited         = "staging container exited (its own clock)"
	stepReadyFile      = "`/pav/ready` written (its own clock)"
	stepStagingDone    = "staging pod `Succeeded` seen"
	stepPublished      = "NodePublishVolume returned (node plugin's log)"
	stepClientReady    = "client pod Ready seen"
)

// clientSample is one client pod's start.
type clientSample struct {
	created, ready time.Time
	// PaV only
	namespace, staging               string // the staging pod's
	stagingAdded, signal, stagingEnd time.Time
}

// clientSeries measures cfg.Samples client pods, one after the other, each
// mounting the same claim of class: created → Ready. For a PaV class, kind
// names its staging pods' kind ("run-to-completion" or "long-running") and
// the breakdown of the start goes into r.
func (b *bench) clientSeries(class, kind string, r *report) []float64 {
	claimName := "client-" + class
	b.must(b.createClaim(b.f.Client, claimName, class))
	b.wait(claimBound(claimName))
	plugin, err := b.nodePlugin()
	b.must(err)
	logsFrom := metav1.Now()

	samples := make([]clientSample, b.cfg.Samples)
	ready := b.series(fmt.Sprintf("%s: client Ready %s", class, kind), func(i int) float64 {
		s := &samples[i]
		name := fmt.Sprintf("client-%s-%d", class, i)
		s.namespace, s.created = b.f.Namespace, time.Now()
		pod := b.f.CreatePod(b.clientPod(name, claimName))
		s.ready = b.wait(podReady(name))
		if kind != "" {
			uid := string(pod.UID)
			s.stagingAdded = b.wait(phasePodAdded(protocol.PhaseStaging, uid))
			s.staging = b.rec.name(phasePodAdded(protocol.PhaseStaging, uid))
			var err error
			s.signal, err = b.lastEpoch(b.f.Namespace, s.staging)
			b.must(err)
			if kind == "run-to-completion" {
				s.stagingEnd = b.wait(phasePodSucceeded(protocol.PhaseStaging, uid))
			}
		}
		b.deletePod(name)
		if s.staging != "" {
			b.wait(podDeleted(s.staging)) // unstaged: the next sample starts from nothing
		}
		return since(s.created, s.ready)
	})
	b.must(b.deleteClaim(b.f.Client, claimName))
	b.wait(pvDeleted(claimName))

	if kind != "" {
		published, err := b.publishTimes(plugin, logsFrom)
		b.must(err)
		r.breakdown(kind, samples, published)
	}
	return ready
}

// nodePlugin is PaV's node plugin pod on the clients' node.
func (b *bench) nodePlugin() (*corev1.Pod, error) {
	pods, err := b.f.Client.CoreV1().Pods(pavNamespace).List(b.f.Ctx, metav1.ListOptions{LabelSelector: nodePluginPods, FieldSelector: "spec.nodeName=" + b.node})
	if err != nil || len(pods.Items) != 1 {
		return nil, fmt.Errorf("finding PaV's node plugin on %s: %d pods, %v", b.node, len(pods.Items), err)
	}
	return &pods.Items[0], nil
}

// volumeStaged matches the node plugin's log line of a NodePublishVolume
// that succeeded (verbosity 1), capturing the staging pod.
var volumeStaged = regexp.MustCompile(`"Volume staged".* pod="([^"]+)"`)

// publishTimes reads, from the node plugin's log since from, when each
// staging pod's NodePublishVolume returned ("<namespace>/<name>" → time): the
// container runtime's timestamp of the "Volume staged" line, written just
// before the call returns.
func (b *bench) publishTimes(plugin *corev1.Pod, from metav1.Time) (map[string]time.Time, error) {
	raw, err := b.f.Client.CoreV1().Pods(plugin.Namespace).GetLogs(plugin.Name, &corev1.PodLogOptions{
		Container: plugin.Spec.Containers[0].Name, Timestamps: true, SinceTime: &from,
	}).DoRaw(b.f.Ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the node plugin's log: %w", err)
	}
	out := map[string]time.Time{}
	s := bufio.NewScanner(strings.NewReader(string(raw)))
	s.Buffer(nil, 1<<20)
	for s.Scan() {
		stamp, line, _ := strings.Cut(s.Text(), " ")
		m := volumeStaged.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, stamp)
		if err != nil {
			return nil, fmt.Errorf("node plugin log line %q: %w", s.Text(), err)
		}
		if _, ok := out[m[1]]; !ok {
			out[m[1]] = at
		}
	}
	return out, s.Err()
}

// burstResult: rates of a burst of claims, per second.
type burstResult struct {
	System  string  `json:"system"`
	Claims  int     `json:"claims"`
	Created float64 `json:"pvs_created_per_s"`
	Bound   float64 `json:"claims_bound_per_s"`
	Deleted float64 `json:"pvs_deleted_per_s"`
}

// burst creates cfg.Burst claims of class at once (from 10 goroutines),
// waits until all are Bound, then deletes them at once and waits until their
// PVs are gone: PVs created and claims bound per second from the first
// create, PVs deleted per second from the first delete. With r, the memory of
// system's processes is measured while the claims are bound: at once, and
// again settleTime later, when what the burst itself allocated is collected.
func (b *bench) burst(class, system string, r *report) burstResult {
	n := b.cfg.Burst
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("burst-%s-%d", class, i)
	}
	start := time.Now()
	b.must(b.parallel(names, func(c kubernetes.Interface, name string) error { return b.createClaim(c, name, class) }))
	var lastPV, lastBound time.Time
	for _, name := range names {
		lastPV = later(lastPV, b.wait(pvAdded(name)))
		lastBound = later(lastBound, b.wait(claimBound(name)))
	}
	res := burstResult{System: system, Claims: n,
		Created: float64(n) / lastPV.Sub(start).Seconds(), Bound: float64(n) / lastBound.Sub(start).Seconds()}
	if r != nil {
		r.Memory = append(r.Memory, b.memory(fmt.Sprintf("%d claims just bound", n), system)...)
		time.Sleep(settleTime)
		r.Memory = append(r.Memory, b.memory(fmt.Sprintf("%d bound claims, %s later", n, settleTime), system)...)
	}
	start = time.Now()
	b.must(b.parallel(names, b.deleteClaim))
	var lastGone time.Time
	for _, name := range names {
		lastGone = later(lastGone, b.wait(pvDeleted(name)))
	}
	res.Deleted = float64(n) / lastGone.Sub(start).Seconds()
	fmt.Printf("%-50s PVs created %.1f/s, claims bound %.1f/s, PVs deleted %.1f/s\n",
		fmt.Sprintf("%s: burst of %d claims", class, n), res.Created, res.Bound, res.Deleted)
	return res
}

// settleTime is how long after a burst memory is measured again: the Go
// runtime forces a garbage collection once 2 minutes passed without one, and
// returns freed memory to the system in the background after it. (Idle Go
// processes, as PaV's and the anchor's, may otherwise not collect for minutes.)
const settleTime = 150 * time.Second

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// parallel calls do for every name from 10 goroutines, with the fast
// client, and returns the first error.
func (b *bench) parallel(names []string, do func(c kubernetes.Interface, name string) error) error {
	next := make(chan string)
	errs := make(chan error, len(names))
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range next {
				errs <- do(b.fast, name)
			}
		}()
	}
	for _, name := range names {
		next <- name
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
