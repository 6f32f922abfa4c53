//go:build integration

package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/albertofaria/pav/crds"
	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/kubeclient"
	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/test/integration/framework"
)

// Scale of BenchmarkControlPlaneScale (issue #14, item 5).
const (
	scaleNodes        = 1000
	scaleProvisioners = 50
	// every podProvisionerEvery-th provisioner has a creation pod and a
	// WaitForFirstConsumer class; the others bind without any pod
	podProvisionerEvery = 5
	scaleStaged         = 110 // PaV volumes staged on the node plugin's node (kubelet's default pod limit)
)

// scaleSteps are the claims in the cluster after each step: the second step
// adds 4,000 to the first 1,000, so per-claim figures of the two steps
// compare the same work at 1x and 5x the objects already there.
var scaleSteps = []int{1000, 5000}

// BenchmarkControlPlaneScale runs `bin/pav controller` (production flags, as
// BenchmarkMemory) against an API server of its own holding 1,000 Ready
// Nodes, and provisions claims across 50 provisioners in two steps (to 1,000
// and then 5,000 claims). Four in five provisioners bind without pods; every
// fifth has a creation pod and a WaitForFirstConsumer class, and its claims
// carry a selected node (spread over the 1,000). The benchmark plays kubelet
// and node plugin (creation pods finish with results) and the PV controller
// (each claim is bound to its PV). Per step it reports:
//
//   - the time from the first claim created to the last PV, and to the last
//     claim settled (bound, PaV's finalizer gone, no creation pod left);
//   - the controller's API requests per claim by verb and resource, counted
//     in the API server's audit log by the controller's user agent (so the
//     benchmark's own requests are left out without being estimated);
//   - the controller's memory (VmRSS, RssAnon, Go heap in use) after it,
//     read after its next garbage collection (measureAfterGC).
//
// Then it starts `bin/pav node` for one of the nodes and measures its memory
// with the 5,000 PVs in the cluster, before and after 110 volumes are staged
// on its node (a client pod and PaV's staging pod for each, created through
// the API as kubelet and the node plugin would).
//
// It prints numbers and asserts none; `make bench-scale` runs it alone.
func BenchmarkControlPlaneScale(b *testing.B) {
	fw := framework.NewWith(b, framework.Options{Audit: true})
	fw.InstallCRDs(b, crds.CustomResourceDefinition)
	cfg := rest.CopyConfig(fw.Config)
	cfg.QPS = -1 // the benchmark plays a whole cluster: no client-side limit
	e := newEnvOn(b, cfg)
	audit := &auditCounter{path: fw.AuditLog(), seen: map[string]bool{}}

	nodes := e.createNodes(scaleNodes)
	var provisioners, classes []string
	for i := range scaleProvisioners {
		name := fmt.Sprintf("scale-%02d", i)
		mutate, mode := (func(*v1alpha1.PavProvisionerSpec))(nil), storagev1.VolumeBindingImmediate
		if i%podProvisionerEvery == podProvisionerEvery-1 {
			mutate, mode = withPods(false, true, false), storagev1.VolumeBindingWaitForFirstConsumer
		}
		e.provisioner(name, mutate)
		e.class(name, name, func(sc *storagev1.StorageClass) { sc.VolumeBindingMode = &mode })
		provisioners, classes = append(provisioners, name), append(classes, name)
	}

	bin := pavBinary(b)
	dir := b.TempDir()
	kubeconfig := writeKubeconfig(b, dir, e)
	ctrl := startPav(b, bin, dir, "controller", controllerArgs(b, kubeconfig, e.ns, "pav-scale")...)
	e.waitFor("controller leading", func() (bool, error) {
		return ctrl.ready() && strings.Contains(ctrl.log(), "Controller started"), nil
	})

	e.waitFor("provisioners ready", func() (bool, error) {
		list, err := e.pav.List(e.ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		ready := 0
		for _, p := range list.Items {
			if meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ConditionReady) {
				ready++
			}
		}
		return ready == scaleProvisioners, nil
	})
	cl := e.startFakeCluster()
	mem := []memFigures{measureAfterGC(b, []*pavProcess{ctrl})[0]}
	audit.window(b) // what the controller did before the first claim is not per claim

	var steps []scaleStep
	var node *pavProcess
	var nodeIdle memFigures
	created := 0
	for i, total := range scaleSteps {
		s := scaleStep{claims: total - created}
		start := time.Now()
		e.createClaims(created, total, classes, provisioners, nodes)
		created = total
		cl.waitFor(b, "PVs", func() bool { return cl.pvs.Load() >= int64(total) })
		s.toPVs = time.Since(start)
		cl.waitFor(b, "claims settled", func() bool { return cl.settled(total) })
		s.toSettled = time.Since(start)
		s.requests = audit.window(b)
		steps = append(steps, s)
		if i < len(scaleSteps)-1 {
			mem = append(mem, measureAfterGC(b, []*pavProcess{ctrl})[0])
			continue
		}
		// The node plugin starts with every PV there, and the waits for
		// both processes' collections overlap.
		node = startPav(b, bin, dir, "node", nodeArgs(b, dir, kubeconfig, nodes[0])...)
		e.waitFor("node plugin ready", func() (bool, error) { return node.ready(), nil })
		both := measureAfterGC(b, []*pavProcess{ctrl, node})
		mem, nodeIdle = append(mem, both[0]), both[1]
	}
	e.stageVolumes(cl, nodes[0], filepath.Join(dir, "kubelet"), scaleStaged)
	nodeStaged := measureAfterGC(b, []*pavProcess{node})[0]

	for b.Loop() {
	}
	reportScale(b, steps, mem, nodeIdle, nodeStaged)
}

type scaleStep struct {
	claims           int
	toPVs, toSettled time.Duration
	requests         map[string]int // "verb resource[/subresource]" → requests of the controller
}

// parallel runs f(i) for i in [from, to) on a few goroutines and fails b on
// the first error.
func parallel(t testing.TB, from, to int, f func(i int) error) {
	t.Helper()
	const workers = 16
	var next atomic.Int64
	next.Store(int64(from))
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < to && errs[w] == nil; i = int(next.Add(1) - 1) {
				errs[w] = f(i)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// createNodes creates n Ready Nodes, as n kubelets would register.
func (e *env) createNodes(n int) []string {
	names := make([]string, n)
	parallel(e.t, 0, n, func(i int) error {
		names[i] = fmt.Sprintf("scale-node-%04d", i)
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: names[i], Labels: map[string]string{corev1.LabelHostname: names[i]}},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{
				Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
				LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
			}}},
		}
		_, err := e.kube.CoreV1().Nodes().Create(e.ctx, node, metav1.CreateOptions{})
		return err
	})
	return names
}

// createClaims creates claims number from to to-1: claim i goes to
// provisioner i mod 50, and those of WaitForFirstConsumer classes arrive
// with a node selected, as the scheduler would set it.
func (e *env) createClaims(from, to int, classes, provisioners, nodes []string) {
	parallel(e.t, from, to, func(i int) error {
		p := i % len(classes)
		pvc := e.claimObject(fmt.Sprintf("c%05d", i), classes[p], provisioners[p], "1Gi")
		if p%podProvisionerEvery == podProvisionerEvery-1 {
			pvc.Annotations[annSelectedNode] = nodes[i%len(nodes)]
		}
		_, err := e.kube.CoreV1().PersistentVolumeClaims(e.ns).Create(e.ctx, pvc, metav1.CreateOptions{})
		return err
	})
}

const annSelectedNode = "volume.kubernetes.io/selected-node"

// fakeCluster plays, for the claims of one namespace, kubelet and PaV's node
// plugin (creation pods succeed with a capacity) and the PV controller
// (claims are bound to their PVs), and counts what is done.
type fakeCluster struct {
	e                      *env
	claims, volumes, pods  cache.SharedIndexInformer
	bindQueue, finishQueue workqueue.TypedRateLimitingInterface[string]
	pvs                    atomic.Int64 // PVs of the namespace's claims seen
}

func (e *env) startFakeCluster() *fakeCluster {
	kube := e.kube
	cl := &fakeCluster{e: e,
		claims:  kubeclient.NewInformer(kube, kube.CoreV1().PersistentVolumeClaims(e.ns), &corev1.PersistentVolumeClaim{}, 0, kubeclient.Selector{}),
		volumes: kubeclient.NewInformer(kube, kube.CoreV1().PersistentVolumes(), &corev1.PersistentVolume{}, 0, kubeclient.Selector{}),
		pods: kubeclient.NewInformer(kube, kube.CoreV1().Pods(metav1.NamespaceAll), &corev1.Pod{}, 0,
			kubeclient.Selector{Label: protocol.LabelPhase + "=" + string(protocol.PhaseCreation)}),
		bindQueue:   workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		finishQueue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
	}
	_, _ = cl.volumes.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj interface{}) {
		if pv, ok := obj.(*corev1.PersistentVolume); ok && pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.Namespace == e.ns {
			cl.pvs.Add(1)
			cl.bindQueue.Add(pv.Name)
		}
	}})
	enqueuePod := func(obj interface{}) {
		if pod, ok := obj.(*corev1.Pod); ok && pod.DeletionTimestamp == nil && pod.Status.Phase != corev1.PodSucceeded {
			cl.finishQueue.Add(pod.Namespace + "/" + pod.Name)
		}
	}
	_, _ = cl.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueuePod, UpdateFunc: func(_, n interface{}) { enqueuePod(n) }})
	ctx, cancel := context.WithCancel(e.ctx)
	stopped := kubeclient.Run(ctx, cl.claims, cl.volumes, cl.pods)
	e.t.Cleanup(func() { cancel(); stopped() })
	if !cache.WaitForCacheSync(e.ctx.Done(), cl.claims.HasSynced, cl.volumes.HasSynced, cl.pods.HasSynced) {
		e.t.Fatal("fake cluster's caches did not sync")
	}
	for range 4 {
		go cl.work(cl.bindQueue, cl.bind)
		go cl.work(cl.finishQueue, cl.finish)
	}
	e.t.Cleanup(func() { cl.bindQueue.ShutDown(); cl.finishQueue.ShutDown() })
	return cl
}

func (cl *fakeCluster) work(q workqueue.TypedRateLimitingInterface[string], f func(key string) error) {
	for {
		key, quit := q.Get()
		if quit {
			return
		}
		if err := f(key); err != nil {
			q.AddRateLimited(key) // a conflict with the controller's own writes: again, from a fresher cache
		} else {
			q.Forget(key)
		}
		q.Done(key)
	}
}

// bind binds a PV and its claim as the PV controller would: the claim to
// the PV, then the PV's phase Bound.
func (cl *fakeCluster) bind(volume string) error {
	obj, exists, err := cl.volumes.GetStore().GetByKey(volume)
	if err != nil || !exists {
		return nil // deleted meanwhile
	}
	pv := obj.(*corev1.PersistentVolume)
	obj, exists, err = cl.claims.GetStore().GetByKey(cl.e.ns + "/" + pv.Spec.ClaimRef.Name)
	if err != nil || !exists {
		return fmt.Errorf("claim %s not in the cache yet", pv.Spec.ClaimRef.Name)
	}
	if pvc := obj.(*corev1.PersistentVolumeClaim); pvc.Spec.VolumeName != pv.Name || pvc.Status.Phase != corev1.ClaimBound {
		if err := cl.e.bindClaim(pvc.DeepCopy(), pv); err != nil {
			return err
		}
	}
	if pv.Status.Phase == corev1.VolumeBound {
		return nil
	}
	pv = pv.DeepCopy()
	pv.Status.Phase = corev1.VolumeBound
	_, err = cl.e.kube.CoreV1().PersistentVolumes().UpdateStatus(cl.e.ctx, pv, metav1.UpdateOptions{})
	return err
}

// finish ends a creation pod with a capacity, as its container, kubelet
// and the node plugin would.
func (cl *fakeCluster) finish(key string) error {
	obj, exists, err := cl.pods.GetStore().GetByKey(key)
	if err != nil || !exists {
		return nil // deleted meanwhile
	}
	pod := obj.(*corev1.Pod)
	if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded {
		return nil
	}
	err = cl.e.completePod(pod.DeepCopy(), 0, "", map[string]string{protocol.AnnotationResultCapacity: "1Gi"})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// settled: n claims and their PVs bound, no claim with PaV's finalizer, and
// no creation pod left.
func (cl *fakeCluster) settled(n int) bool {
	if len(cl.pods.GetStore().ListKeys()) > 0 {
		return false
	}
	bound := 0
	for _, obj := range cl.volumes.GetStore().List() {
		if obj.(*corev1.PersistentVolume).Status.Phase == corev1.VolumeBound {
			bound++
		}
	}
	if bound < n {
		return false
	}
	done := 0
	for _, obj := range cl.claims.GetStore().List() {
		pvc := obj.(*corev1.PersistentVolumeClaim)
		if pvc.Status.Phase == corev1.ClaimBound && !protocol.HasFinalizer(pvc, protocol.FinalizerClaim) {
			done++
		}
	}
	return done >= n
}

// waitFor polls cond, which reads only the fake cluster's caches (no
// requests), for up to 10 minutes.
func (cl *fakeCluster) waitFor(b *testing.B, what string, cond func() bool) {
	b.Helper()
	err := wait.PollUntilContextTimeout(cl.e.ctx, 20*time.Millisecond, 10*time.Minute, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		b.Fatalf("waiting for %s: %v (%d PVs seen)", what, err, cl.pvs.Load())
	}
}

// stageVolumes creates what exists on node once n of the claims' volumes are
// staged there: per volume, a client pod using the claim (as kubelet runs it)
// and PaV's staging pod for it (as the node plugin creates it in
// NodePublishVolume, protocol.StagingPod), the node plugin's kubelet
// directory being kubeletDir.
func (e *env) stageVolumes(cl *fakeCluster, node, kubeletDir string, n int) {
	root := protocol.PodDirRoot(kubeletDir)
	tmpl := &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "stage", Image: "busybox", Command: []string{"true"}}}},
	}
	parallel(e.t, 0, n, func(i int) error {
		obj, exists, err := cl.claims.GetStore().GetByKey(fmt.Sprintf("%s/c%05d", e.ns, i))
		if err != nil || !exists {
			return fmt.Errorf("claim c%05d not in the cache", i)
		}
		pvc := obj.(*corev1.PersistentVolumeClaim)
		obj, exists, err = cl.volumes.GetStore().GetByKey(pvc.Spec.VolumeName)
		if err != nil || !exists {
			return fmt.Errorf("PV of claim %s not in the cache", pvc.Name)
		}
		pv := obj.(*corev1.PersistentVolume)
		client := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "client-" + pvc.Name, Namespace: e.ns},
			Spec: corev1.PodSpec{NodeName: node,
				Containers: []corev1.Container{{Name: "app", Image: "busybox", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}},
				Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name}}}}},
		}
		client, err = e.kube.CoreV1().Pods(e.ns).Create(e.ctx, client, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		target := filepath.Join(kubeletDir, "pods", string(client.UID), "volumes/kubernetes.io~csi", pv.Name, "mount")
		staging, err := protocol.StagingPod(protocol.PodBase{Template: tmpl, Provisioner: pv.Spec.CSI.Driver, Root: root}, protocol.StagingPodSpec{
			Node: node, StagingID: protocol.StagingID(pv.Spec.CSI.VolumeHandle, target), PV: pv, PVC: pvc,
			Publication: protocol.Publication{TargetPath: target}})
		if err != nil {
			return err
		}
		_, err = e.kube.CoreV1().Pods(e.ns).Create(e.ctx, staging, metav1.CreateOptions{})
		return err
	})
}

// auditCounter counts, in an audit log, the requests of `pav controller` by
// verb and resource; each request once (a watch is logged when it starts and
// when it ends).
type auditCounter struct {
	path   string
	offset int64
	seen   map[string]bool
}

// window returns the controller's requests logged since the previous call.
func (a *auditCounter) window(b *testing.B) map[string]int {
	f, err := os.Open(a.path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(a.offset, io.SeekStart); err != nil {
		b.Fatal(err)
	}
	counts := map[string]int{}
	r := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			break // a partial last line is read again next time
		}
		a.offset += int64(len(line))
		var ev struct {
			AuditID   string `json:"auditID"`
			Verb      string `json:"verb"`
			UserAgent string `json:"userAgent"`
			ObjectRef *struct {
				Resource    string `json:"resource"`
				Subresource string `json:"subresource"`
			} `json:"objectRef"`
		}
		if json.Unmarshal(line, &ev) != nil || !strings.HasPrefix(ev.UserAgent, "pav-controller/") || a.seen[ev.AuditID] {
			continue
		}
		a.seen[ev.AuditID] = true
		what := ev.Verb
		if ev.ObjectRef != nil {
			what += " " + ev.ObjectRef.Resource
			if ev.ObjectRef.Subresource != "" {
				what += "/" + ev.ObjectRef.Subresource
			}
		}
		counts[what]++
	}
	return counts
}

// reportScale reports and prints the figures of BenchmarkControlPlaneScale.
func reportScale(b *testing.B, steps []scaleStep, mem []memFigures, nodeIdle, nodeStaged memFigures) {
	var t strings.Builder
	fmt.Fprintf(&t, "\n| claims in the cluster | new claims | to all PVs (s) | PVs/s | to all settled (s) | ms/claim | controller requests/claim | RssAnon (MiB) | heap (MiB) | Δ RssAnon KiB/claim | Δ heap KiB/claim |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	total := 0
	kinds := map[string]bool{}
	for i, s := range steps {
		total += s.claims
		n := float64(s.claims)
		var reqs int
		for k, v := range s.requests {
			if !strings.HasSuffix(k, " leases") { // leader election: per second, not per claim
				reqs += v
			}
			kinds[k] = true
		}
		dAnon := (mem[i+1].anon - mem[i].anon) * 1024 / n
		dHeap := (mem[i+1].heap - mem[i].heap) * 1024 / n
		fmt.Fprintf(&t, "| %d | %d | %.1f | %.0f | %.1f | %.2f | %.2f | %.1f | %.1f | %.2f | %.2f |\n",
			total, s.claims, s.toPVs.Seconds(), n/s.toPVs.Seconds(), s.toSettled.Seconds(),
			s.toSettled.Seconds()*1000/n, float64(reqs)/n, mem[i+1].anon, mem[i+1].heap, dAnon, dHeap)
		tag := fmt.Sprintf("%dclaims-", total)
		b.ReportMetric(n/s.toPVs.Seconds(), tag+"PVs/s")
		b.ReportMetric(s.toSettled.Seconds()*1000/n, tag+"ms/claim")
		b.ReportMetric(float64(reqs)/n, tag+"requests/claim")
		b.ReportMetric(mem[i+1].rss, tag+"ctrl-rss-MiB")
		b.ReportMetric(mem[i+1].anon, tag+"ctrl-anon-MiB")
		b.ReportMetric(mem[i+1].heap, tag+"ctrl-heap-MiB")
	}
	fmt.Fprintf(&t, "\ncontroller requests per claim, by verb and resource (leases: in the step, not per claim):\n\n| request |")
	for _, s := range steps {
		fmt.Fprintf(&t, " %d new claims |", s.claims)
	}
	fmt.Fprintf(&t, "\n|---|%s\n", strings.Repeat("---|", len(steps)))
	for _, k := range slices.Sorted(maps.Keys(kinds)) {
		fmt.Fprintf(&t, "| %s |", k)
		for _, s := range steps {
			if strings.HasSuffix(k, " leases") {
				fmt.Fprintf(&t, " %d |", s.requests[k])
			} else {
				fmt.Fprintf(&t, " %.3f |", float64(s.requests[k])/float64(s.claims))
			}
		}
		t.WriteString("\n")
	}
	fmt.Fprintf(&t, "\nnode plugin, %d PVs in the cluster (MiB, VmRSS / RssAnon / heap): no volume staged %.1f / %.1f / %.1f; %d staged %.1f / %.1f / %.1f\n",
		total, nodeIdle.rss, nodeIdle.anon, nodeIdle.heap, scaleStaged, nodeStaged.rss, nodeStaged.anon, nodeStaged.heap)
	b.ReportMetric(nodeIdle.anon, "node-0staged-anon-MiB")
	b.ReportMetric(nodeStaged.anon, fmt.Sprintf("node-%dstaged-anon-MiB", scaleStaged))
	b.ReportMetric(nodeStaged.rss, fmt.Sprintf("node-%dstaged-rss-MiB", scaleStaged))
	b.ReportMetric(nodeStaged.heap, fmt.Sprintf("node-%dstaged-heap-MiB", scaleStaged))
	// to stdout: go test keeps only the first lines of a benchmark's log
	fmt.Println(t.String())
}
