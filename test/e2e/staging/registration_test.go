//go:build e2e

package staging

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	pavcsi "github.com/albertofaria/pav/csi"
	"github.com/albertofaria/pav/test/e2e/framework"
)

type noStager struct{}

func (noStager) Ready() error                                                  { return nil }
func (noStager) Publish(context.Context, string, *pavcsi.PublishRequest) error { return nil }
func (noStager) Unpublish(context.Context, string, string, string) error       { return nil }
func (noStager) SharedStaging(string) bool                                     { return false }
func (noStager) Stage(context.Context, string, *pavcsi.PublishRequest) error   { return nil }
func (noStager) Unstage(context.Context, string, string, string) error         { return nil }
func (noStager) Stats(context.Context, string, string, string) (*pavcsi.VolumeStats, error) {
	return &pavcsi.VolumeStats{}, nil
}

// TestKubeletRegistration registers a driver with the real kubelet the way
// `pav node` does (this test runs on the node, in the host's mount
// namespace) and checks that kubelet lists it in the CSINode object, then
// that removing it deregisters it.
func TestKubeletRegistration(t *testing.T) {
	f := framework.New(t)
	nodes, err := f.Client.CoreV1().Nodes().List(f.Ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) == 0 {
		t.Fatalf("listing nodes: %v", err)
	}
	node := nodes.Items[0].Name
	const name = "pav-e2e-registration"
	m := pavcsi.NewManager("/var/lib/kubelet", "e2e", node, noStager{})
	start := time.Now()
	if err := m.Add(name); err != nil {
		t.Fatal(err)
	}
	defer m.Remove(name)
	select {
	case <-m.Registered(name):
		t.Logf("kubelet registered the driver after %v", time.Since(start))
	case <-time.After(30 * time.Second):
		t.Fatal("kubelet did not register the driver within 30s")
	}
	hasDriver := func(n *storagev1.CSINode) (bool, error) {
		for _, d := range n.Spec.Drivers {
			if d.Name == name {
				return d.NodeID == node, nil
			}
		}
		return false, nil
	}
	if _, err := framework.WaitFor(f.Ctx, f.Client.StorageV1().CSINodes(), node, 30*time.Second, hasDriver); err != nil {
		t.Fatalf("CSINode never listed the driver: %v", err)
	}
	m.Remove(name)
	if _, err := framework.WaitFor(f.Ctx, f.Client.StorageV1().CSINodes(), node, 30*time.Second, func(n *storagev1.CSINode) (bool, error) {
		ok, err := hasDriver(n)
		return !ok, err
	}); err != nil {
		t.Fatalf("CSINode still lists the driver after removal: %v", err)
	}
}

// TestVolumeLimitInCSINode: kubelet copies the node plugin's
// --max-volumes-per-node (NodeGetInfo) into every node's CSINode as each PaV
// driver's allocatable count, and the scheduler enforces it. As installed
// (no limit: 0, which kubelet records as no allocatable count); with
// --max-volumes-per-node=1 on every node plugin, where a second volume of
// the provisioner keeps a pod off the node; and with the install's flags
// restored (kubelet drops the count), where it is let on again.
func TestVolumeLimitInCSINode(t *testing.T) {
	e := newEnv(t, dynamicWith(writeHello, "", false, ""))
	e.storageClass(nil)
	e.claim("c1", corev1.PersistentVolumeFilesystem, corev1.ReadWriteOnce)
	e.claim("c2", corev1.PersistentVolumeFilesystem, corev1.ReadWriteOnce)

	installed := e.nodePluginLimits()
	e.waitForLimits(installed)

	start := time.Now()
	restore := e.setNodePluginArg("--max-volumes-per-node=1")
	limited := map[string]int32{}
	for node := range installed {
		limited[node] = 1
	}
	e.waitForLimits(limited)
	t.Logf("every node's CSINode shows the limit %v after the flag changed", time.Since(start))

	e.clientPod("first", "sleep 3600", []string{"c1"}, false, false)
	e.WaitForPod("first", timeout, framework.PodRunningReady)
	e.clientPod("second", "true", []string{"c2"}, false, false)
	msg := e.waitForEvent("second", regexp.MustCompile(`exceed max volume count`), timeout)
	t.Logf("the second volume on the node: %s", msg)

	start = time.Now()
	restore()
	e.waitForLimits(installed)
	t.Logf("every node's CSINode shows the installed limit again %v after the flags were restored", time.Since(start))
	if installed[e.nodeName()] == 0 {
		// kube-scheduler retries a pod it refused for the limit when a
		// count grows, not when it goes (its queueing hint), so a new pod
		// shows that the node takes the volume again.
		e.DeletePod("second", timeout)
		e.clientPod("again", "true", []string{"c2"}, false, false)
		e.succeeded("again")
	}
}

// nodePluginLimits is the --max-volumes-per-node of the node plugin of
// each node (0 without the flag), from its pod.
func (e *env) nodePluginLimits() map[string]int32 {
	e.t.Helper()
	nodes, err := e.Client.CoreV1().Nodes().List(e.Ctx, metav1.ListOptions{})
	must(e.t, err)
	pods, err := e.Client.CoreV1().Pods(framework.PavNamespace).List(e.Ctx, metav1.ListOptions{LabelSelector: framework.NodePluginPods})
	must(e.t, err)
	limits := map[string]int32{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		limits[p.Spec.NodeName] = 0
		for _, a := range p.Spec.Containers[0].Args {
			if v, ok := strings.CutPrefix(a, "--max-volumes-per-node="); ok {
				n, err := strconv.ParseInt(v, 10, 32)
				must(e.t, err)
				limits[p.Spec.NodeName] = int32(n)
			}
		}
	}
	for _, n := range nodes.Items {
		if _, ok := limits[n.Name]; !ok {
			e.t.Fatalf("no node plugin on node %s", n.Name)
		}
	}
	return limits
}

// waitForLimits waits until the CSINode of every node lists the test's
// driver and gives each PaV driver there (a PavProvisioner's name) the
// allocatable count of limits (0: none).
func (e *env) waitForLimits(limits map[string]int32) {
	e.t.Helper()
	list, err := e.pav.List(e.Ctx, metav1.ListOptions{})
	must(e.t, err)
	pav := map[string]bool{}
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			pav[p.Name] = true
		}
	}
	for node, want := range limits {
		_, err := framework.WaitFor(e.Ctx, e.Client.StorageV1().CSINodes(), node, 2*time.Minute, func(n *storagev1.CSINode) (bool, error) {
			listed := false
			for _, d := range n.Spec.Drivers {
				if !pav[d.Name] {
					continue
				}
				listed = listed || d.Name == e.prov
				var got int32
				if d.Allocatable != nil && d.Allocatable.Count != nil {
					got = *d.Allocatable.Count
				}
				if got != want {
					return false, nil
				}
			}
			return listed, nil
		})
		if err != nil {
			e.t.Fatalf("CSINode %s: want driver %s and every PaV driver with allocatable count %d (0: none): %v", node, e.prov, want, err)
		}
	}
}

// setNodePluginArg adds arg to the node plugin of every node (each node
// plugin DaemonSet), waits until they run with it, and returns the function
// that restores their arguments and waits again (also run at cleanup).
func (e *env) setNodePluginArg(arg string) (restore func()) {
	e.t.Helper()
	sel, err := labels.Parse(framework.NodePluginPods)
	must(e.t, err)
	list, err := e.Client.AppsV1().DaemonSets(framework.PavNamespace).List(e.Ctx, metav1.ListOptions{})
	must(e.t, err)
	saved := map[string][]string{}
	for _, ds := range list.Items {
		if sel.Matches(labels.Set(ds.Spec.Template.Labels)) {
			saved[ds.Name] = ds.Spec.Template.Spec.Containers[0].Args
		}
	}
	setArgs := func(ctx context.Context, args map[string][]string) error {
		for name, a := range args {
			patch, err := json.Marshal([]map[string]any{{"op": "replace", "path": "/spec/template/spec/containers/0/args", "value": a}})
			if err != nil {
				return err
			}
			if _, err := e.Client.AppsV1().DaemonSets(framework.PavNamespace).Patch(ctx, name, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
				return fmt.Errorf("patching daemonset %s: %w", name, err)
			}
		}
		for name := range args {
			if out, err := framework.Kubectl(ctx, "-n", framework.PavNamespace, "rollout", "status", "daemonset/"+name, "--timeout=180s"); err != nil {
				return fmt.Errorf("%w: %s", err, out)
			}
		}
		return nil
	}
	done := false
	restore = func() {
		if done {
			return
		}
		done = true
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if err := setArgs(ctx, saved); err != nil {
			e.t.Errorf("restoring the node plugins' arguments: %v", err)
		}
	}
	e.t.Cleanup(restore)
	changed := map[string][]string{}
	for name, a := range saved {
		changed[name] = append(slices.Clip(a), arg)
	}
	if err := setArgs(e.Ctx, changed); err != nil {
		e.t.Fatal(err)
	}
	return restore
}
