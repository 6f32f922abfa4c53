//go:build integration

package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/albertofaria/pav/crds/v1alpha1"
)

// BenchmarkMemory measures what PaV's three long-running processes hold:
// `bin/pav controller` twice (the leader and a standby) and `bin/pav node`,
// run as subprocesses with their production flags (webhook, health and
// metrics endpoints on loopback) against the loopback API server, first idle
// and then with 100 more bound claims (dynamically provisioned by the
// leader). It reports, per process and state, in MiB:
//
//   - rss: VmRSS from /proc/PID/status (what `ps` shows; includes the
//     binary's file pages);
//   - anon: RssAnon, the process's anonymous memory, the part of kubelet's
//     "working set" that does not depend on the page cache (the working set
//     adds the container's active file pages);
//   - heap: go_memstats_heap_inuse_bytes from the process's /metrics.
//
// It prints numbers and asserts none. PAV_BIN runs that binary instead of
// building ./cmd/pav.
func BenchmarkMemory(b *testing.B) {
	e := newEnv(b)
	bin := pavBinary(b)
	dir := b.TempDir()
	kubeconfig := writeKubeconfig(b, dir, e)
	lease := "pav-bench"

	leader := startPav(b, bin, dir, "leader", controllerArgs(b, kubeconfig, e.ns, lease)...)
	e.waitFor("leader", func() (bool, error) {
		l, err := e.kube.CoordinationV1().Leases(e.ns).Get(e.ctx, lease, metav1.GetOptions{})
		return err == nil && holder(l) != "" && strings.Contains(leader.log(), "Controller started"), nil
	})
	standby := startPav(b, bin, dir, "standby", controllerArgs(b, kubeconfig, e.ns, lease)...)
	node := startPav(b, bin, dir, "node", nodeArgs(b, dir, kubeconfig, "bench-node")...)
	procs := []*pavProcess{leader, standby, node}
	for _, p := range procs {
		e.waitFor(p.name+" ready", func() (bool, error) { return p.ready(), nil })
	}

	time.Sleep(settle)
	idle := measure(b, procs)

	p := e.provisioner("membench", func(s *v1alpha1.PavProvisionerSpec) {
		s.VolumeCreation = &v1alpha1.VolumeCreation{Capacity: value("1Gi")}
	})
	e.class("membench", p.Name, nil)
	const claims = 100
	for i := range claims {
		pvc := e.claim(fmt.Sprintf("c%d", i), "membench", "1Gi")
		e.bind(pvc, e.volume(pvc))
	}
	time.Sleep(settle)
	bound := measure(b, procs)

	for b.Loop() {
	}
	for i, p := range procs {
		for _, m := range []struct {
			state string
			v     memFigures
		}{{"idle", idle[i]}, {"100claims", bound[i]}} {
			b.ReportMetric(m.v.rss, p.name+"-"+m.state+"-rss-MiB")
			b.ReportMetric(m.v.anon, p.name+"-"+m.state+"-anon-MiB")
			b.ReportMetric(m.v.heap, p.name+"-"+m.state+"-heap-MiB")
		}
	}
	var sum, sumBound memFigures
	for i := range procs {
		sum.rss += idle[i].rss
		sum.anon += idle[i].anon
		sumBound.anon += bound[i].anon
	}
	b.ReportMetric(sum.rss, "all-idle-rss-MiB")
	b.ReportMetric(sum.anon, "all-idle-anon-MiB")
	b.ReportMetric(sumBound.anon-sum.anon, "all-anon-MiB/100claims")
}

// settle is how long a process is left alone before its memory is read.
const settle = 10 * time.Second

// controllerArgs are `pav controller`'s production flags on loopback ports,
// for a Lease name in namespace ns.
// (With --metrics-auth=false: the benchmark reads /metrics without a token.)
func controllerArgs(b *testing.B, kubeconfig, ns, lease string) []string {
	return []string{"controller", "--kubeconfig=" + kubeconfig,
		"--leader-election-namespace=" + ns, "--leader-election-name=" + lease,
		"--webhook-configuration=", "--webhook-address=127.0.0.1:" + freePort(b),
		"--http-endpoint=127.0.0.1:" + freePort(b), "--metrics-endpoint=127.0.0.1:" + freePort(b), "--metrics-auth=false"}
}

// nodeArgs are `pav node`'s production flags for node, its kubelet
// directory under dir (on a mount that need not be shared: no kubelet
// reads it, so no preflight).
func nodeArgs(b *testing.B, dir, kubeconfig, node string) []string {
	return []string{"node", "--kubeconfig=" + kubeconfig, "--node-name=" + node,
		"--kubelet-dir=" + filepath.Join(dir, "kubelet"), "--preflight=false",
		"--http-endpoint=127.0.0.1:" + freePort(b), "--metrics-endpoint=127.0.0.1:" + freePort(b), "--metrics-auth=false"}
}

type memFigures struct{ rss, anon, heap float64 }

func measure(b *testing.B, procs []*pavProcess) []memFigures {
	out := make([]memFigures, len(procs))
	for i, p := range procs {
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
		if err != nil {
			b.Fatalf("%s: %v\n%s", p.name, err, p.log())
		}
		out[i].rss = statusMiB(status, "VmRSS:")
		out[i].anon = statusMiB(status, "RssAnon:")
		out[i].heap = p.metric("go_memstats_heap_inuse_bytes") / (1 << 20)
		b.Logf("%s: VmRSS %.1f MiB, RssAnon %.1f MiB, heap in use %.1f MiB", p.name, out[i].rss, out[i].anon, out[i].heap)
	}
	return out
}

// measureAfterGC is measure once every process has run a garbage collection
// since the call (the Go runtime forces one at least every two minutes), so
// that the heap in use is what a process keeps, not also what it dropped
// since its last collection (after an informer's initial list, that can be
// most of it). RSS still includes freed pages the runtime has not returned
// to the system yet.
func measureAfterGC(b *testing.B, procs []*pavProcess) []memFigures {
	const gcCount = "go_gc_duration_seconds_count"
	before := make([]float64, len(procs))
	for i, p := range procs {
		before[i] = p.metric(gcCount)
	}
	for i, p := range procs {
		err := wait.PollUntilContextTimeout(context.Background(), time.Second, 3*time.Minute, true, func(context.Context) (bool, error) {
			return p.metric(gcCount) > before[i], nil
		})
		if err != nil {
			b.Fatalf("%s: no garbage collection in 3 minutes: %v", p.name, err)
		}
	}
	return measure(b, procs)
}

// statusMiB reads a "Field:   123 kB" line of /proc/PID/status.
func statusMiB(status []byte, field string) float64 {
	s := bufio.NewScanner(bytes.NewReader(status))
	for s.Scan() {
		if f := strings.Fields(s.Text()); len(f) >= 2 && f[0] == field {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

func holder(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// pavBinary builds ./cmd/pav as `make build` does (or takes $PAV_BIN).
func pavBinary(b *testing.B) string {
	if bin := os.Getenv("PAV_BIN"); bin != "" {
		return bin
	}
	bin := filepath.Join(b.TempDir(), "pav")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "github.com/albertofaria/pav/cmd/pav")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("building pav: %v\n%s", err, out)
	}
	return bin
}

func writeKubeconfig(b *testing.B, dir string, e *env) string {
	path := filepath.Join(dir, "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: it, cluster: {server: %q, certificate-authority-data: %s}}]
users: [{name: it, user: {token: %q}}]
contexts: [{name: it, context: {cluster: it, user: it}}]
current-context: it
`, e.cfg.Host, base64.StdEncoding.EncodeToString(e.cfg.CAData), e.cfg.BearerToken)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		b.Fatal(err)
	}
	return path
}

func freePort(b *testing.B) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

type pavProcess struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	health  string // host:port of /readyz
	metrics string // host:port of /metrics
}

func startPav(b *testing.B, bin, dir, name string, args ...string) *pavProcess {
	p := &pavProcess{name: name, logPath: filepath.Join(dir, name+".log")}
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--http-endpoint="); ok {
			p.health = v
		}
		if v, ok := strings.CutPrefix(a, "--metrics-endpoint="); ok {
			p.metrics = v
		}
	}
	f, err := os.Create(p.logPath)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	p.cmd.Env = append(os.Environ(), "POD_NAMESPACE=")
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	b.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = p.cmd.Process.Kill()
			<-done
		}
		if b.Failed() {
			b.Logf("%s log:\n%s", name, p.log())
		}
	})
	return p
}

func (p *pavProcess) log() string {
	out, _ := os.ReadFile(p.logPath)
	return string(out)
}

func (p *pavProcess) get(addr, path string) (string, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body), resp.StatusCode == http.StatusOK
}

func (p *pavProcess) ready() bool {
	_, ok := p.get(p.health, "/readyz")
	return ok
}

// metric returns the value of an unlabelled metric from /metrics (0 if absent).
func (p *pavProcess) metric(name string) float64 {
	var v float64
	_ = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		body, ok := p.get(p.metrics, "/metrics")
		if !ok {
			return false, nil
		}
		for _, line := range strings.Split(body, "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[0] == name {
				v, _ = strconv.ParseFloat(f[1], 64)
				return true, nil
			}
		}
		return true, nil
	})
	return v
}
