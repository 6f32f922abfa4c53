//go:build e2e_slow

package staging

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/albertofaria/pav/kubelet"
	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/test/e2e/framework"
)

// TestSharedStagingNodePluginKilled: the node plugin is killed (SIGKILL)
// at four points of a shared staging's life, each while kubelet has calls
// for it under way: in NodeStageVolume (the staging pod runs but is not
// ready), right after a batch of client pods was created (their
// publishes), right after a batch was deleted (their unpublishes), and in
// NodeUnstageVolume (the unstaging pod runs). Every client still becomes
// Ready and shares the one volume, one staging pod serves them all, the
// staging and the unstaging pod each run once, and once the claim is gone
// nothing of PaV's is left (the soak's audit).
func TestSharedStagingNodePluginKilled(t *testing.T) {
	// Both pods wait for the test's go-ahead, so that the node plugin is
	// killed while the call that runs them waits for them.
	staging := podTemplate("stage", `mkdir -p /pav/volume
mount -t tmpfs -o size=1m tmpfs /pav/volume
echo staged >> /marker/stagings
trap 'umount /pav/volume; exit 0' TERM
until [ -e /marker/go-stage ]; do sleep 0.1; done
touch /pav/ready
sleep 3600 & wait`, true)
	unstaging := podTemplate("unstage", `echo started >> /marker/unstaging-started
until [ -e /marker/go-unstage ]; do sleep 0.1; done
echo unstaged >> /marker/unstagings`, false)
	spec := "provisioningModes: [Dynamic]\nvolumeCreation:\n  capacity: 1Mi\n" +
		"volumeStaging:\n  shared: true\n" + indent(staging, "  ") + section("volumeUnstaging", unstaging)
	e := newEnv(t, spec)
	e.storageClass(nil)
	e.claim("c1", corev1.PersistentVolumeFilesystem, corev1.ReadWriteMany)
	e.WaitForPVCBound("c1")
	pvc, err := e.Client.CoreV1().PersistentVolumeClaims(e.Namespace).Get(e.Ctx, "c1", metav1.GetOptions{})
	must(t, err)
	pv := pvc.Spec.VolumeName

	const perBatch = 4
	batch := func(b int) []string {
		var names []string
		for i := range perBatch {
			names = append(names, fmt.Sprintf("client-%d", b*perBatch+i))
		}
		return names
	}
	create := func(names []string) {
		for _, name := range names {
			e.CreatePod(framework.PinToNode(clientPodObject(name, "echo "+name+" > /data/c1/"+name+"; sleep 3600", []string{"c1"}, false, false), e.nodeName()))
		}
	}
	const readyWithin = 4 * time.Minute // kubelet retries a failed call with a backoff of up to 2 min
	ready := func(names []string) {
		for _, name := range names {
			e.WaitForPod(name, readyWithin, framework.PodRunningReady)
		}
	}
	remove := func(names []string) {
		for _, name := range names {
			if err := e.Client.CoreV1().Pods(e.Namespace).Delete(e.Ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Fatalf("deleting %s: %v", name, err)
			}
		}
	}
	gone := func(names []string) {
		for _, name := range names {
			e.DeletePod(name, readyWithin)
		}
	}
	// Every client of live reads what every client of wrote: one volume.
	shared := func(live, wrote []string) {
		t.Helper()
		for _, name := range live {
			out := e.exec(name, "sh", "-c", "cd /data/c1 && cat "+strings.Join(wrote, " "))
			if got := strings.Fields(out); !slices.Equal(got, wrote) {
				t.Fatalf("%s reads %q from the clients' files, want %q", name, got, wrote)
			}
		}
	}
	oneStaging := func() {
		t.Helper()
		pods, err := e.Client.CoreV1().Pods(e.Namespace).List(e.Ctx, metav1.ListOptions{
			LabelSelector: protocol.LabelPhase + "=" + string(protocol.PhaseStaging) + "," + protocol.LabelProvisioner + "=" + e.prov})
		must(t, err)
		if len(pods.Items) != 1 || pods.Items[0].DeletionTimestamp != nil {
			var names []string
			for _, p := range pods.Items {
				names = append(names, fmt.Sprintf("%s (deleting: %v)", p.Name, p.DeletionTimestamp != nil))
			}
			t.Fatalf("staging pods of the volume on the node: %v, want one", names)
		}
	}
	start := time.Now()

	// 1. Killed in NodeStageVolume.
	create(batch(0))
	if !e.marked("stagings") {
		t.Fatal("the staging pod never ran")
	}
	e.killNodePlugin()
	touch(t, filepath.Join(e.marker, "go-stage"))
	ready(batch(0))
	t.Logf("killed in NodeStageVolume: %d clients ready after %v", perBatch, time.Since(start))

	// 2. Killed while a batch of clients is published.
	create(batch(1))
	e.killNodePlugin()
	ready(batch(1))
	wrote := append(batch(0), batch(1)...)
	shared(wrote, wrote)
	oneStaging()
	t.Logf("killed during publishes: %d clients ready after %v", 2*perBatch, time.Since(start))

	// 3. Killed while a batch of clients is unpublished.
	remove(batch(0))
	e.killNodePlugin()
	gone(batch(0))
	shared(batch(1), wrote)
	oneStaging()
	if lines := e.markerLines("unstaging-started"); lines != 0 {
		t.Fatalf("the unstaging pod ran %d times while clients were left", lines)
	}
	t.Logf("killed during unpublishes: the other clients still share the volume after %v", time.Since(start))

	// 4. Killed in NodeUnstageVolume.
	remove(batch(1))
	if !e.marked("unstaging-started") {
		t.Fatal("the unstaging pod never ran after the last client went")
	}
	e.killNodePlugin()
	touch(t, filepath.Join(e.marker, "go-unstage"))
	gone(batch(1))
	if !e.marked("unstagings") {
		t.Fatal("the unstaging pod did not finish")
	}
	// Done when kubelet forgot the volume (it unstaged it: it calls no
	// more) and PaV's pods are gone: then count the runs.
	e.waitUntil("kubelet unstaged the volume and PaV's pods are gone", readyWithin, func() []string {
		left := framework.PavPodsLeft(e.Ctx, e.Client, func(p string) bool { return p == e.prov })
		if kubelet.Dir(protocol.DefaultKubeletDir).TracksVolumes(e.prov) {
			left = append(left, "kubelet still tracks the volume (vol_data.json)")
		}
		return left
	})
	t.Logf("killed in NodeUnstageVolume: unstaged after %v", time.Since(start))
	for marker, want := range map[string]int{"stagings": 1, "unstaging-started": 1, "unstagings": 1} {
		if lines := e.markerLines(marker); lines != want {
			t.Errorf("%s: %d runs, want %d", marker, lines, want)
		}
	}

	// The audit: with the claim gone, nothing of PaV's is left.
	must(t, e.Client.CoreV1().PersistentVolumeClaims(e.Namespace).Delete(e.Ctx, "c1", metav1.DeleteOptions{}))
	must(t, framework.WaitForDeletion(e.Ctx, e.Client.CoreV1().PersistentVolumes(), pv))
	e.waitUntil("nothing of PaV's is left", time.Minute, func() []string {
		left := framework.PavPodsLeft(e.Ctx, e.Client, func(p string) bool { return p == e.prov })
		left = append(left, framework.PavFinalizers(e.Ctx, e.Client, e.Namespace)...)
		left = append(left, framework.MountsLeft(e.dirs, map[string]bool{pv: true})...)
		return append(left, framework.PodDirsLeft(e.dirs)...)
	})
}

// killNodePlugin SIGKILLs the node plugin on the test's node and waits
// until kubelet restarted it and it is ready again.
func (e *env) killNodePlugin() {
	e.t.Helper()
	pods, err := e.Client.CoreV1().Pods(framework.PavNamespace).List(e.Ctx, metav1.ListOptions{
		LabelSelector: framework.NodePluginPods, FieldSelector: "spec.nodeName=" + e.nodeName()})
	must(e.t, err)
	if len(pods.Items) != 1 {
		e.t.Fatalf("%d node plugin pods on %s, want 1", len(pods.Items), e.nodeName())
	}
	pod := pods.Items[0]
	restarts := restartCount(&pod)
	if killed, err := framework.KillPod(pod.UID); err != nil || !killed {
		e.t.Fatalf("killing the node plugin %s: killed %v, %v", pod.Name, killed, err)
	}
	// kubelet delays a restart of a container that keeps dying (10 s, 20 s, ...).
	if _, err := framework.WaitForPod(e.Ctx, e.Client, framework.PavNamespace, pod.Name, 3*time.Minute, func(p *corev1.Pod) (bool, error) {
		if restartCount(p) <= restarts {
			return false, nil
		}
		return framework.PodRunningReady(p)
	}); err != nil {
		e.t.Fatalf("the node plugin did not come back: %v", err)
	}
}

func restartCount(p *corev1.Pod) int32 {
	var n int32
	for _, c := range p.Status.ContainerStatuses {
		n += c.RestartCount
	}
	return n
}

// waitUntil waits until what returns nothing, failing the test with what
// it last returned if that takes longer than within.
func (e *env) waitUntil(desc string, within time.Duration, what func() []string) {
	e.t.Helper()
	var left []string
	err := wait.PollUntilContextTimeout(e.Ctx, 500*time.Millisecond, within, true, func(context.Context) (bool, error) {
		left = what()
		return len(left) == 0, nil
	})
	if err != nil {
		e.t.Fatalf("not true after %v: %s; left:\n\t%s", within, desc, strings.Join(left, "\n\t"))
	}
}

func touch(t *testing.T, path string) {
	t.Helper()
	must(t, os.WriteFile(path, nil, 0o644))
}
