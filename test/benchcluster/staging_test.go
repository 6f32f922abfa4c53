//go:build benchcluster

package benchcluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/test/e2e/framework"
)

// footprintClients is how many client pods of one claim on one node the
// staging footprint is measured with.
const footprintClients = 20

// footprint is what the staging of footprintClients clients of one claim on
// one node costs.
type footprint struct {
	Provisioner string `json:"provisioner"`
	Clients     int    `json:"clients"`
	StagingPods int    `json:"staging_pods"`
	memory             // summed over the staging pods
}

// probeScript writes to the volume every 20 ms and prints each change
// between working and failing writes with its own clock: "up <epoch>" (the
// first line, once the volume works) and "down <epoch>".
const probeScript = `state=down
while :; do
  if echo x > /data/probe 2>/dev/null; then
    [ "$state" = down ] && echo "up $EPOCHREALTIME"; state=up
  else
    [ "$state" = up ] && echo "down $EPOCHREALTIME"; state=down
  fi
  sleep 0.02
done`

// recovery kills the FUSE daemon of a bench-fuse staging pod under a client
// that writes, cfg.Samples times, and returns (ms): daemon killed → the
// client's writes work again (the same container), the new staging pod's own
// start (its creation seen → `/pav/ready`, its clock), and the first minus
// the second: what PaV's recovery itself adds.
func (b *bench) recovery() (total, ownStart, added []float64) {
	claimName := "recovery"
	pv := b.boundClaim(claimName, fuse)
	client := "recovery-client"
	b.f.CreatePod(b.clientPod(client, claimName, "/bin/bash", "-c", probeScript))
	b.waitProbe(client, 1)

	start := time.Now()
	for i := range b.cfg.Samples {
		old := b.stagingPods(pv)
		if len(old) != 1 {
			b.t.Fatalf("recovery sample %d: %d staging pods of %s, want 1", i, len(old), pv)
		}
		// The exec may end with its container (137): the daemon was its
		// main process's child. Its first line, before the kill, counts.
		out, err := b.f.Kubectl("exec", old[0].Name, "--", "bash", "-c",
			`echo $EPOCHREALTIME; for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = gocryptfs ] && kill -9 "${p#/proc/}"; done; true`)
		killed, ok := parseEpoch(strings.SplitN(out, "\n", 2)[0])
		if !ok {
			b.t.Fatalf("killing the daemon of %s: %v: output %q", old[0].Name, err, out)
		}
		up := b.waitProbe(client, i+2)
		b.wait(podDeleted(old[0].Name))
		fresh := b.stagingPods(pv)
		if len(fresh) != 1 || fresh[0].Name == old[0].Name {
			b.t.Fatalf("recovery sample %d: no new staging pod of %s", i, pv)
		}
		created := b.wait(podAdded(fresh[0].Name))
		ready, err := b.lastEpoch(b.f.Namespace, fresh[0].Name)
		b.must(err)
		total = append(total, since(killed, up))
		ownStart = append(ownStart, since(created, ready))
		added = append(added, since(killed, up)-since(created, ready))
	}
	st := stats(total)
	fmt.Printf("%-50s p50 %s  p90 %s  (%d samples, %v)\n", "bench-fuse: daemon killed → client writes again", ms(st.P50), ms(st.P90), st.N, time.Since(start).Round(time.Second))
	b.deletePod(client)
	b.deleteBoundClaim(claimName)
	return total, ownStart, added
}

// waitProbe waits until a probeScript client has printed n "up" lines and
// returns the last one's time.
func (b *bench) waitProbe(pod string, n int) time.Time {
	b.t.Helper()
	var last time.Time
	err := wait.PollUntilContextTimeout(b.f.Ctx, 50*time.Millisecond, stepTimeout, true, func(ctx context.Context) (bool, error) {
		logs, err := framework.PodLogs(ctx, b.f.Client, b.f.Namespace, pod, "")
		if err != nil {
			return false, nil // not started yet
		}
		ups := 0
		for line := range strings.SplitSeq(logs, "\n") {
			if v, ok := strings.CutPrefix(line, "up "); ok {
				if at, ok := parseEpoch(v); ok {
					ups, last = ups+1, at
				}
			}
		}
		return ups >= n, nil
	})
	if err != nil {
		b.t.Fatalf("client %s: writes did not work again (%d times) within %v: %v", pod, n, stepTimeout, err)
	}
	return last
}

// sharedClientSeries measures cfg.Samples client pods, one after the other,
// of a bench-fuse-shared claim whose staging pod already serves another
// client on the node: created → Ready.
func (b *bench) sharedClientSeries() []float64 {
	claimName := "shared"
	b.boundClaim(claimName, fuseShared)
	holder := "shared-holder"
	b.f.CreatePod(b.clientPod(holder, claimName))
	b.wait(podReady(holder))
	ready := b.series("bench-fuse-shared: client Ready, staging running", func(i int) float64 {
		name := fmt.Sprintf("shared-client-%d", i)
		start := time.Now()
		b.f.CreatePod(b.clientPod(name, claimName))
		at := b.wait(podReady(name))
		b.deletePod(name)
		return since(start, at)
	})
	b.deletePod(holder)
	b.deleteBoundClaim(claimName)
	return ready
}

// stagingFootprint starts footprintClients client pods of one claim of class
// on the clients' node at once and measures the staging pods serving them.
func (b *bench) stagingFootprint(class string) footprint {
	claimName := "footprint-" + class
	pv := b.boundClaim(claimName, class)
	names := make([]string, footprintClients)
	for i := range names {
		names[i] = fmt.Sprintf("footprint-%s-%d", class, i)
		b.f.CreatePod(b.clientPod(names[i], claimName))
	}
	for _, name := range names {
		b.wait(podReady(name))
	}
	fp := footprint{Provisioner: class, Clients: footprintClients}
	for _, pod := range b.stagingPods(pv) {
		m, err := podMemory(pod)
		b.must(err)
		fp.StagingPods++
		fp.WorkingSet += m.WorkingSet
		fp.VmRSS += m.VmRSS
		fp.RssFile += m.RssFile
	}
	fmt.Printf("%-50s %d staging pods, working set %.1f MiB, VmRSS %.1f MiB\n",
		fmt.Sprintf("%s: %d clients on one node", class, footprintClients), fp.StagingPods, fp.WorkingSet, fp.VmRSS)
	for _, name := range names {
		b.deletePod(name)
	}
	b.deleteBoundClaim(claimName)
	return fp
}

// boundClaim creates a claim of class, waits until it is Bound and returns
// its PV's name.
func (b *bench) boundClaim(name, class string) string {
	b.t.Helper()
	b.must(b.createClaim(b.f.Client, name, class))
	b.wait(claimBound(name))
	pvc, err := b.f.Client.CoreV1().PersistentVolumeClaims(b.f.Namespace).Get(b.f.Ctx, name, metav1.GetOptions{})
	b.must(err)
	return pvc.Spec.VolumeName
}

func (b *bench) deleteBoundClaim(name string) {
	b.t.Helper()
	b.must(b.deleteClaim(b.f.Client, name))
	b.wait(pvDeleted(name))
}

// stagingPods lists the running, not deleted staging pods of a volume.
func (b *bench) stagingPods(pv string) []*corev1.Pod {
	b.t.Helper()
	sel := labels.Set{protocol.LabelVolume: pv, protocol.LabelPhase: string(protocol.PhaseStaging)}.AsSelector().String()
	pods, err := b.f.Client.CoreV1().Pods(b.f.Namespace).List(b.f.Ctx, metav1.ListOptions{LabelSelector: sel})
	b.must(err)
	var out []*corev1.Pod
	for i := range pods.Items {
		if p := &pods.Items[i]; p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			out = append(out, p)
		}
	}
	return out
}
