//go:build integration

// Integration tests of the controller against a real kube-apiserver and etcd
// (no kubelet, scheduler or kube-controller-manager). The tests play the
// missing parts: kubelet (pod status), PaV's node plugin (the result
// annotations on terminated pods) and the PV controller (status.phase
// Released on PVs whose claim is gone).
package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"k8s.io/client-go/util/retry"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	pavtyped "github.com/albertofaria/pav/crds/generated/clientset/versioned/typed/crds/v1alpha1"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/albertofaria/pav/controller"
	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/kubeclient"
	"github.com/albertofaria/pav/protocol"
)

const timeout = 30 * time.Second

type env struct {
	t    testing.TB
	ctx  context.Context
	cfg  *rest.Config
	kube kubernetes.Interface
	pav  pavtyped.PavProvisionerInterface
	// client is PaV's, the one the controller, its engine and the webhook get.
	client *kubeclient.Clientset
	ns     string

	mu         sync.Mutex
	stopCtrl   context.CancelFunc
	ctrlDone   chan struct{}
	engine     controller.Engine
	workerOpts controller.Config
	// snapshots, when set, is the controller's Config.Snapshots (the
	// API server must serve the snapshot CRDs).
	snapshots kubeclient.SnapshotInterface

	// settled: per "<queue>/<key>", the newest resourceVersion a sync of the
	// controller finished on (controller.Config.Settled)
	settledMu sync.Mutex
	settled   map[string]uint64
}

var nsCounter int

func newEnv(t testing.TB) *env {
	t.Helper()
	return newEnvOn(t, apiServer(t))
}

// newEnvOn is newEnv on the API server of cfg (the package's shared one, or a
// benchmark's own), in a namespace of its own.
func newEnvOn(t testing.TB, cfg *rest.Config) *env {
	t.Helper()
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubeclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	nsCounter++
	ns := fmt.Sprintf("t%d-%s", nsCounter, strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")))
	if len(ns) > 60 {
		ns = ns[:60]
	}
	ns = strings.TrimRight(ns, "-")
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ctx: ctx, cfg: cfg, kube: kube, pav: client.PavV1alpha1().PavProvisioners(), client: client, ns: ns, engine: testEngine(client)}
	t.Cleanup(e.stopController)
	return e
}

// startController runs a controller until stopController (or the test's end).
func (e *env) startController() {
	e.t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.settledMu.Lock()
	e.settled = nil // what an earlier controller settled on says nothing about this one
	e.settledMu.Unlock()
	c, err := controller.New(controller.Config{
		Kube: e.client, Pav: e.client, Snapshots: e.snapshots, Engine: e.engine,
		RetryStart: 200 * time.Millisecond, RetryMax: 2 * time.Second,
		ResultsTimeout: time.Minute,
		Settled:        e.recordSettled,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := c.Run(ctx); err != nil {
			e.t.Errorf("controller: %v", err)
		}
	}()
	e.stopCtrl, e.ctrlDone = cancel, done
}

func (e *env) stopController() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopCtrl != nil {
		e.stopCtrl()
		<-e.ctrlDone
		e.stopCtrl = nil
	}
}

func (e *env) recordSettled(queue, key, resourceVersion string) {
	v, err := strconv.ParseUint(resourceVersion, 10, 64)
	if err != nil {
		return
	}
	e.settledMu.Lock()
	defer e.settledMu.Unlock()
	if e.settled == nil {
		e.settled = map[string]uint64{}
	}
	e.settled[queue+"/"+key] = max(e.settled[queue+"/"+key], v)
}

// waitSettled waits until the controller has finished a sync of key (in
// queue "claims", "volumes" or "provisioners") that saw obj's version or a
// newer one: whatever it decided on that version, it has done.
func (e *env) waitSettled(queue, key string, obj metav1.Object) {
	e.t.Helper()
	want, err := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
	if err != nil {
		e.t.Fatalf("resourceVersion of %s: %v", key, err)
	}
	e.waitFor("controller settled on "+queue+"/"+key, func() (bool, error) {
		e.settledMu.Lock()
		defer e.settledMu.Unlock()
		return e.settled[queue+"/"+key] >= want, nil
	})
}

func (e *env) waitFor(what string, cond func() (bool, error)) {
	e.t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(e.ctx, 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		ok, err := cond()
		last = err
		return ok, nil
	})
	if err != nil {
		e.t.Fatalf("timed out waiting for %s (last error: %v)\nevents:\n%s", what, last, e.events())
	}
}

func (e *env) events() string {
	list, err := e.kube.CoreV1().Events("").List(e.ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, ev := range list.Items {
		if ev.Namespace == e.ns || ev.InvolvedObject.Namespace == "" {
			fmt.Fprintf(&b, "  %s %s/%s %s: %s\n", ev.Type, ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Reason, ev.Message)
		}
	}
	return b.String()
}

// --- object builders ---

func value(v interface{}) *v1alpha1.Value { return v1alpha1.NewValue(v) }

// podTemplate is a run-to-completion pod template as JSON-like data.
func podTemplate(ns string) map[string]interface{} {
	md := map[string]interface{}{}
	if ns != "" {
		md["namespace"] = ns
	}
	return map[string]interface{}{
		"metadata": md,
		"spec": map[string]interface{}{
			"containers": []interface{}{map[string]interface{}{"name": "main", "image": "busybox", "command": []interface{}{"true"}}},
		},
	}
}

func (e *env) provisioner(name string, mutate func(*v1alpha1.PavProvisionerSpec)) *v1alpha1.PavProvisioner {
	e.t.Helper()
	p := &v1alpha1.PavProvisioner{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.PavProvisionerSpec{
			ProvisioningModes: []v1alpha1.ProvisioningMode{v1alpha1.Dynamic},
			VolumeStaging:     &v1alpha1.VolumeStaging{PodTemplate: value(podTemplate(""))},
			// A Dynamic provisioner needs a capacity or a creation pod.
			VolumeCreation: &v1alpha1.VolumeCreation{Capacity: value("1Gi")},
		},
	}
	if mutate != nil {
		mutate(&p.Spec)
	}
	out, err := e.pav.Create(e.ctx, p, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("creating PavProvisioner: %v", err)
	}
	e.t.Cleanup(func() { e.forceDeleteProvisioner(name) })
	return out
}

// forceDeleteProvisioner removes a provisioner even if the controller is gone.
func (e *env) forceDeleteProvisioner(name string) {
	ctx := context.Background()
	_ = e.pav.Delete(ctx, name, metav1.DeleteOptions{})
	if p, err := e.pav.Get(ctx, name, metav1.GetOptions{}); err == nil {
		p.Finalizers = nil
		_, _ = e.pav.Update(ctx, p, metav1.UpdateOptions{})
	}
}

func (e *env) class(name, provisioner string, mutate func(*storagev1.StorageClass)) *storagev1.StorageClass {
	e.t.Helper()
	sc := &storagev1.StorageClass{
		ObjectMeta:  metav1.ObjectMeta{Name: name},
		Provisioner: provisioner,
		Parameters:  map[string]string{"color": "blue"},
	}
	if mutate != nil {
		mutate(sc)
	}
	out, err := e.kube.StorageV1().StorageClasses().Create(e.ctx, sc, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		_ = e.kube.StorageV1().StorageClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return out
}

func (e *env) claim(name, class, size string) *corev1.PersistentVolumeClaim {
	e.t.Helper()
	out, err := e.createClaim(name, class, size)
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// createClaim creates a claim; unlike claim, it is safe in any goroutine.
// Playing the PV controller, it hands the claim over to its class's
// provisioner at once (annotation volume.kubernetes.io/storage-provisioner).
func (e *env) createClaim(name, class, size string) (*corev1.PersistentVolumeClaim, error) {
	provisioner := ""
	if sc, err := e.kube.StorageV1().StorageClasses().Get(e.ctx, class, metav1.GetOptions{}); err == nil {
		provisioner = sc.Provisioner
	}
	return e.kube.CoreV1().PersistentVolumeClaims(e.ns).Create(e.ctx, e.claimObject(name, class, provisioner, size), metav1.CreateOptions{})
}

// claimObject is a claim of class handed over to provisioner (none if "").
func (e *env) claimObject(name, class, provisioner, size string) *corev1.PersistentVolumeClaim {
	ann := map[string]string{}
	if provisioner != "" {
		ann["volume.kubernetes.io/storage-provisioner"] = provisioner
	}
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns, Annotations: ann},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &class,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		},
	}
}

// --- playing kubelet, node plugin and PV controller ---

// pod waits for the pod of a phase for key (claim UID, or PV name for deletions of a PV).
func (e *env) pod(phase protocol.Phase, key string) *corev1.Pod {
	e.t.Helper()
	sel := protocol.LabelPhase + "=" + string(phase)
	var found *corev1.Pod
	e.waitFor(fmt.Sprintf("the %s pod of %s", phase, key), func() (bool, error) {
		pods, err := e.kube.CoreV1().Pods("").List(e.ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return false, err
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if (p.Labels[protocol.LabelClaimUID] == key || p.Labels[protocol.LabelVolume] == key) && p.DeletionTimestamp == nil &&
				(phase != protocol.PhaseDeletion || key != p.Labels[protocol.LabelClaimUID] || p.Labels[protocol.LabelVolume] == "") {
				found = p
				return true, nil
			}
		}
		return false, nil
	})
	return found
}

// pavPods lists PaV pods of a claim UID (any phase).
func (e *env) pavPods(claimUID types.UID) []corev1.Pod {
	e.t.Helper()
	pods, err := e.kube.CoreV1().Pods("").List(e.ctx, metav1.ListOptions{LabelSelector: protocol.LabelClaimUID + "=" + string(claimUID)})
	if err != nil {
		e.t.Fatal(err)
	}
	return pods.Items
}

// finishPod plays kubelet (the pod terminates) and the node plugin (results).
func (e *env) finishPod(pod *corev1.Pod, exitCode int32, terminationMessage string, results map[string]string) {
	e.t.Helper()
	cur, err := e.kube.CoreV1().Pods(pod.Namespace).Get(e.ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.completePod(cur, exitCode, terminationMessage, results); err != nil {
		e.t.Fatal(err)
	}
}

// completePod is finishPod on the pod as it is now (cur, which it changes);
// unlike finishPod, it is safe in any goroutine.
func (e *env) completePod(cur *corev1.Pod, exitCode int32, terminationMessage string, results map[string]string) error {
	now := metav1.Now()
	phase := corev1.PodSucceeded
	if exitCode != 0 {
		phase = corev1.PodFailed
	}
	cur.Status.Phase = phase
	cur.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name: "main", Image: "busybox",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: exitCode, Message: terminationMessage, FinishedAt: now, StartedAt: now,
		}},
	}}
	if _, err := e.kube.CoreV1().Pods(cur.Namespace).UpdateStatus(e.ctx, cur, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("setting status of pod %s: %w", cur.Name, err)
	}
	ann := map[string]interface{}{protocol.AnnotationResultsCollected: "true"}
	for k, v := range results {
		ann[k] = v
	}
	patch, _ := json.Marshal(map[string]interface{}{"metadata": map[string]interface{}{"annotations": ann}})
	if _, err := e.kube.CoreV1().Pods(cur.Namespace).Patch(e.ctx, cur.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("annotating pod %s: %w", cur.Name, err)
	}
	return nil
}

func (e *env) volume(pvc *corev1.PersistentVolumeClaim) *corev1.PersistentVolume {
	e.t.Helper()
	var pv *corev1.PersistentVolume
	e.waitFor("the PV of claim "+pvc.Name, func() (bool, error) {
		var err error
		pv, err = e.kube.CoreV1().PersistentVolumes().Get(e.ctx, "pvc-"+string(pvc.UID), metav1.GetOptions{})
		return err == nil, err
	})
	return pv
}

// release plays the PV controller: the claim is gone, the PV is Released.
func (e *env) release(pv *corev1.PersistentVolume) *corev1.PersistentVolume {
	e.t.Helper()
	cur, err := e.kube.CoreV1().PersistentVolumes().Get(e.ctx, pv.Name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	cur.Status.Phase = corev1.VolumeReleased
	released, err := e.kube.CoreV1().PersistentVolumes().UpdateStatus(e.ctx, cur, metav1.UpdateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return released
}

// volumeGone: the PV is gone, or only kube-controller-manager's protection
// finalizer (nobody runs it here) keeps the deleted object.
func (e *env) waitVolumeGone(name string) {
	e.t.Helper()
	e.waitFor("PV "+name+" to be deleted", func() (bool, error) {
		pv, err := e.kube.CoreV1().PersistentVolumes().Get(e.ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		for _, f := range pv.Finalizers {
			if f == protocol.FinalizerVolume {
				return false, nil
			}
		}
		return pv.DeletionTimestamp != nil, nil
	})
}

func (e *env) getClaim(name string) *corev1.PersistentVolumeClaim {
	e.t.Helper()
	pvc, err := e.kube.CoreV1().PersistentVolumeClaims(e.ns).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return pvc
}

// waitEvent waits for an Event on an object whose reason and message match.
func (e *env) waitEvent(objName, reason, substring string) {
	e.t.Helper()
	e.waitFor(fmt.Sprintf("event %s on %s containing %q", reason, objName, substring), func() (bool, error) {
		list, err := e.kube.CoreV1().Events("").List(e.ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, ev := range list.Items {
			if ev.InvolvedObject.Name == objName && ev.Reason == reason && strings.Contains(ev.Message, substring) {
				return true, nil
			}
		}
		return false, nil
	})
}

func (e *env) noVolumeFor(pvc *corev1.PersistentVolumeClaim) {
	e.t.Helper()
	if _, err := e.kube.CoreV1().PersistentVolumes().Get(e.ctx, "pvc-"+string(pvc.UID), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		e.t.Fatalf("claim %s has a PV (err %v)", pvc.Name, err)
	}
}

func (e *env) waitNoPods(claimUID types.UID) {
	e.t.Helper()
	e.waitFor("PaV pods of claim "+string(claimUID)+" to go", func() (bool, error) {
		return len(e.pavPods(claimUID)) == 0, nil
	})
}

// ================================ tests ================================

func TestProvisionWithoutPods(t *testing.T) {
	e := newEnv(t)
	e.startController()
	p := e.provisioner("nopods", func(s *v1alpha1.PavProvisionerSpec) {
		s.VolumeCreation = &v1alpha1.VolumeCreation{Capacity: value("3Gi")}
	})
	e.class("nopods", p.Name, nil)
	pvc := e.claim("c", "nopods", "1Gi")
	pv := e.volume(pvc)

	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != p.Name || pv.Spec.CSI.VolumeHandle != "pvc-"+string(pvc.UID) {
		t.Errorf("csi: %+v", pv.Spec.CSI)
	}
	if pv.Spec.CSI.VolumeAttributes["color"] != "blue" {
		t.Errorf("volumeAttributes: %v", pv.Spec.CSI.VolumeAttributes)
	}
	if q := pv.Spec.Capacity[corev1.ResourceStorage]; q.Cmp(resource.MustParse("3Gi")) != 0 {
		t.Errorf("capacity %s", q.String())
	}
	if r := pv.Spec.ClaimRef; r == nil || r.UID != pvc.UID || r.Name != "c" || r.Namespace != e.ns {
		t.Errorf("claimRef %+v", r)
	}
	if pv.Annotations["pv.kubernetes.io/provisioned-by"] != p.Name || pv.Spec.StorageClassName != "nopods" ||
		pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete || !protocol.HasFinalizer(pv, protocol.FinalizerVolume) {
		t.Errorf("PV metadata/spec: %+v", pv)
	}
	e.waitEvent("c", "ProvisioningSucceeded", pv.Name)
	e.waitFor("claim finalizer removed", func() (bool, error) {
		return !protocol.HasFinalizer(e.getClaim("c"), protocol.FinalizerClaim), nil
	})

	// The PavProvisioner got its CSIDriver, finalizer and status.
	e.waitFor("provisioner status", func() (bool, error) {
		cur, err := e.pav.Get(e.ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ready := meta.FindStatusCondition(cur.Status.Conditions, v1alpha1.ConditionReady)
		valid := meta.FindStatusCondition(cur.Status.Conditions, v1alpha1.ConditionValid)
		return ready != nil && ready.Status == metav1.ConditionTrue && valid != nil && valid.Status == metav1.ConditionTrue &&
			cur.Status.ObservedGeneration == cur.Generation && protocol.HasFinalizer(cur, protocol.FinalizerProvisioner), nil
	})
	d, err := e.kube.StorageV1().CSIDrivers().Get(e.ctx, p.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *d.Spec.AttachRequired || !*d.Spec.PodInfoOnMount || len(d.OwnerReferences) != 1 || d.OwnerReferences[0].UID != p.UID {
		t.Errorf("CSIDriver: %+v", d)
	}
}

func withPods(validation, creation, deletion bool) func(*v1alpha1.PavProvisionerSpec) {
	return func(s *v1alpha1.PavProvisionerSpec) {
		if validation {
			s.VolumeValidation = &v1alpha1.VolumeValidation{PodTemplate: value(podTemplate(""))}
		}
		if creation {
			s.VolumeCreation = &v1alpha1.VolumeCreation{PodTemplate: value(podTemplate(""))}
		}
		if deletion {
			s.VolumeDeletion = &v1alpha1.VolumeDeletion{PodTemplate: value(podTemplate(""))}
		}
	}
}

func TestProvisionWithPodsHandleAndCapacityFromFiles(t *testing.T) {
	e := newEnv(t)
	e.startController()
	p := e.provisioner("pods", withPods(true, true, true))
	e.class("pods", p.Name, nil)
	pvc := e.claim("c", "pods", "1Gi")
	uid := string(pvc.UID)

	val := e.pod(protocol.PhaseValidation, uid)
	if val.Namespace != "default" || val.Labels[protocol.LabelProvisioner] != p.Name {
		t.Errorf("validation pod %s/%s labels %v", val.Namespace, val.Name, val.Labels)
	}
	if !protocol.HasFinalizer(e.getClaim("c"), protocol.FinalizerClaim) {
		t.Error("claim has no PaV finalizer while its pods run")
	}
	e.finishPod(val, 0, "", nil)
	cre := e.pod(protocol.PhaseCreation, uid)
	e.waitFor("validation pod deleted", func() (bool, error) {
		_, err := e.kube.CoreV1().Pods(val.Namespace).Get(e.ctx, val.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	e.finishPod(cre, 0, "", map[string]string{
		protocol.AnnotationResultHandle:   "backend-volume-7\n",
		protocol.AnnotationResultCapacity: "2147483648\n",
	})
	pv := e.volume(pvc)
	if pv.Spec.CSI.VolumeHandle != "backend-volume-7" {
		t.Errorf("handle %q", pv.Spec.CSI.VolumeHandle)
	}
	if q := pv.Spec.Capacity[corev1.ResourceStorage]; q.Value() != 2<<30 {
		t.Errorf("capacity %s", q.String())
	}
	e.waitNoPods(pvc.UID)
	e.waitFor("claim finalizer removed", func() (bool, error) {
		return !protocol.HasFinalizer(e.getClaim("c"), protocol.FinalizerClaim), nil
	})
}

// The node plugin learnt from the container runtime that the pods succeeded
// and recorded it with their results, before kubelet reports any phase (here:
// never): the controller provisions all the same.
func TestProvisionOnTheRuntimesWord(t *testing.T) {
	e := newEnv(t)
	e.startController()
	p := e.provisioner("early", withPods(true, true, true))
	e.class("early", p.Name, nil)
	pvc := e.claim("c", "early", "1Gi")
	uid := string(pvc.UID)
	e.recordSucceeded(e.pod(protocol.PhaseValidation, uid), nil)
	e.recordSucceeded(e.pod(protocol.PhaseCreation, uid), map[string]string{protocol.AnnotationResultHandle: "backend-volume-8", protocol.AnnotationResultCapacity: "1Gi"})
	if pv := e.volume(pvc); pv.Spec.CSI.VolumeHandle != "backend-volume-8" {
		t.Errorf("handle %q", pv.Spec.CSI.VolumeHandle)
	}
	e.waitNoPods(pvc.UID)
}

// A tenant deletes the finished creation pod while no controller runs (the
// leader is changing, say), before its PV exists: PaV's finalizer keeps the
// pod, so the next controller makes the PV from its results, and exactly one
// creation pod ever runs.
func TestTenantDeletesFinishedCreationPod(t *testing.T) {
	e := newEnv(t)
	// Every creation pod's arrival and departure, in the API server's order.
	type podEvent struct {
		typ        watch.EventType
		pod, claim types.UID
	}
	var (
		mu     sync.Mutex
		events []podEvent
	)
	// From any version: this test's pods come later; "" would ask for the
	// current one, which a pod watch cache with no pod yet may not reach.
	w, err := e.kube.CoreV1().Pods("").Watch(e.ctx, metav1.ListOptions{LabelSelector: protocol.LabelPhase + "=" + string(protocol.PhaseCreation), ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	go func() {
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok {
				return // the watch failed (the wait below says so) or was stopped
			}
			mu.Lock()
			events = append(events, podEvent{ev.Type, pod.UID, types.UID(pod.Labels[protocol.LabelClaimUID])})
			mu.Unlock()
		}
	}()
	e.startController()
	p := e.provisioner("kept", withPods(true, true, true))
	e.class("kept", p.Name, nil)
	pvc := e.claim("c", "kept", "1Gi")
	uid := string(pvc.UID)
	e.finishPod(e.pod(protocol.PhaseValidation, uid), 0, "", nil)
	cre := e.pod(protocol.PhaseCreation, uid)
	if !protocol.HasFinalizer(cre, protocol.FinalizerResult) {
		t.Fatalf("creation pod finalizers %v", cre.Finalizers)
	}
	e.stopController()
	e.finishPod(cre, 0, "", map[string]string{protocol.AnnotationResultHandle: "backend-volume-9", protocol.AnnotationResultCapacity: "1Gi"})
	if err := e.kube.CoreV1().Pods(cre.Namespace).Delete(e.ctx, cre.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, err := e.kube.CoreV1().Pods(cre.Namespace).Get(e.ctx, cre.Name, metav1.GetOptions{}); err != nil || got.DeletionTimestamp == nil {
		t.Fatalf("the deleted creation pod: %v, %+v; want it kept, marked deleted", err, got)
	}

	e.startController()
	if pv := e.volume(pvc); pv.Spec.CSI.VolumeHandle != "backend-volume-9" {
		t.Errorf("handle %q", pv.Spec.CSI.VolumeHandle)
	}
	e.waitNoPods(pvc.UID)
	// A second creation would have run before the PV, so before the first
	// pod went: count the creation pods that arrived until then.
	runs := 0
	e.waitFor("the creation pod's departure in the watch", func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		runs = 0
		for _, ev := range events {
			switch {
			case ev.typ == watch.Added && ev.claim == pvc.UID:
				runs++
			case ev.typ == watch.Deleted && ev.pod == cre.UID:
				return true, nil
			}
		}
		return false, nil
	})
	if runs != 1 {
		t.Errorf("%d creation pods ran, want 1", runs)
	}
}

// recordSucceeded plays the node plugin when the container runtime said
// every container of pod exited 0: results and success in one write, the
// pod's status untouched.
func (e *env) recordSucceeded(pod *corev1.Pod, results map[string]string) {
	e.t.Helper()
	ann := map[string]interface{}{protocol.AnnotationResultsCollected: "true", protocol.AnnotationSucceeded: "true"}
	for k, v := range results {
		ann[k] = v
	}
	patch, _ := json.Marshal(map[string]interface{}{"metadata": map[string]interface{}{"annotations": ann}})
	if _, err := e.kube.CoreV1().Pods(pod.Namespace).Patch(e.ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		e.t.Fatalf("annotating pod %s: %v", pod.Name, err)
	}
}

func TestValidationFailureKeepsClaimPending(t *testing.T) {
	e := newEnv(t)
	e.startController()
	p := e.provisioner("valfail", withPods(true, true, false))
	e.class("valfail", p.Name, nil)
	pvc := e.claim("c", "valfail", "1Gi")
	val := e.pod(protocol.PhaseValidation, string(pvc.UID))
	e.finishPod(val, 1, "", map[string]string{protocol.AnnotationResultError: "parameter color=blue is not supported"})
	e.waitEvent("c", "ValidationFailed", "parameter color=blue is not supported")
	e.noVolumeFor(pvc)
	if pods := e.pavPods(pvc.UID); len(pods) > 0 && pods[0].Labels[protocol.LabelPhase] == string(protocol.PhaseCreation) {
		t.Fatal("a creation pod ran after validation failed")
	}
	// Retried with backoff: a new validation pod comes.
	again := e.pod(protocol.PhaseValidation, string(pvc.UID))
	if again.UID == val.UID {
		t.Fatal("retry reused the failed pod")
	}
	e.finishPod(again, 2, "still bad", nil)
	e.waitEvent("c", "ValidationFailed", `exited with code 2: still bad`)
	e.noVolumeFor(pvc)
}

func TestCreationFailureRunsDeletionPod(t *testing.T) {
	e := newEnv(t)
	e.startController()
	p := e.provisioner("crefail", withPods(false, true, true))
	e.class("crefail", p.Name, nil)
	pvc := e.claim("c", "crefail", "1Gi")
	uid := string(pvc.UID)
	cre := e.pod(protocol.PhaseCreation, uid)
	e.finishPod(cre, 3, "quota exceeded", nil)
	e.waitEvent("c", "ProvisioningFailed", "quota exceeded")
	del := e.pod(protocol.PhaseDeletion, uid)
	e.finishPod(del, 0, "", nil)
	// The attempt ends (pods gone), then a new one starts after the backoff.
	e.waitFor("a new creation pod", func() (bool, error) {
		for _, pod := range e.pavPods(pvc.UID) {
			if pod.Labels[protocol.LabelPhase] == string(protocol.PhaseCreation) && pod.UID != cre.UID {
				return true, nil
			}
		}
		return false, nil
	})
	e.noVolumeFor(pvc)
}

func TestBadCapacityFromCreationPodRunsDeletionPod(t *testing.T) {
	e := newEnv(t)
	e.startController()
	p := e.provisioner("badcap", withPods(false, true, true))
	e.class("badcap", p.Name, nil)
	pvc := e.claim("c", "badcap", "1Gi")
	cre := e.pod(protocol.PhaseCreation, string(pvc.UID))
	e.finishPod(cre, 0, "", map[string]string{protocol.AnnotationResultCapacity: "1Mi"})
	e.waitEvent("c", "ProvisioningFailed", "less than the 1Gi the claim requests")
	del := e.pod(protocol.PhaseDeletion, string(pvc.UID))
	e.finishPod(del, 0, "", nil)
	e.noVolumeFor(pvc)
}

func TestTemplateErrorIsReportedWithField(t *testing.T) {
	e := newEnv(t)
	e.startController()
	p := e.provisioner("tmplerr", func(s *v1alpha1.PavProvisionerSpec) {
		s.VolumeCreation = &v1alpha1.VolumeCreation{Capacity: value("{{ nonsense(")}
	})
	e.class("tmplerr", p.Name, nil)
	e.claim("c", "tmplerr", "1Gi")
	e.waitEvent("c", "ProvisioningFailed", "spec.volumeCreation.capacity")
}

func TestClaimDeletionDeletesVolume(t *testing.T) {
	e := newEnv(t)
	e.startController()
	p := e.provisioner("del", func(s *v1alpha1.PavProvisionerSpec) {
		s.VolumeCreation = &v1alpha1.VolumeCreation{Capacity: value("1Gi")}
		s.VolumeDeletion = &v1alpha1.VolumeDeletion{PodTemplate: value(podTemplate(e.ns))}
	})
	e.class("del", p.Name, nil)
	pvc := e.claim("c", "del", "1Gi")
	pv := e.volume(pvc)
	if err := e.kube.CoreV1().PersistentVolumeClaims(e.ns).Delete(e.ctx, "c", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The class may be gone by the time the volume is deleted.
	if err := e.kube.StorageV1().StorageClasses().Delete(e.ctx, "del", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.release(pv)
	del := e.pod(protocol.PhaseDeletion, pv.Name)
	if del.Namespace != e.ns || del.Labels[protocol.LabelVolume] != pv.Name {
		t.Errorf("deletion pod %s/%s labels %v", del.Namespace, del.Name, del.Labels)
	}
	// A failed deletion is reported on the PV and retried.
	e.finishPod(del, 1, "backend unreachable", nil)
	e.waitEvent(pv.Name, "VolumeFailedDelete", "backend unreachable")
	again := e.pod(protocol.PhaseDeletion, pv.Name)
	if again.UID == del.UID {
		t.Fatal("retry reused the failed pod")
	}
	e.finishPod(again, 0, "", nil)
	e.waitVolumeGone(pv.Name)
	e.waitFor("deletion pod removed", func() (bool, error) {
		_, err := e.kube.CoreV1().Pods(again.Namespace).Get(e.ctx, again.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

func TestRetain(t *testing.T) {
	e := newEnv(t)
	e.startController()
	p := e.provisioner("retain", func(s *v1alpha1.PavProvisionerSpec) {
		s.VolumeCreation = &v1alpha1.VolumeCreation{Capacity: value("1Gi")}
		s.VolumeDeletion = &v1alpha1.VolumeDeletion{PodTemplate: value(podTemplate(""))}
	})
	retain := corev1.PersistentVolumeReclaimRetain
	e.class("retain", p.Name, func(sc *storagev1.StorageClass) { sc.ReclaimPolicy = &retain })
	pvc := e.claim("c", "retain", "1Gi")
	pv := e.volume(pvc)
	if pv.Spec.PersistentVolumeReclaimPolicy != retain {
		t.Fatalf("reclaim policy %s", pv.Spec.PersistentVolumeReclaimPolicy)
	}
	e.waitSettled("volumes", pv.Name, e.release(pv))
	e.waitEvent(pv.Name, "VolumeRetained", "PaV keeps the volume")
	if pods, _ := e.kube.CoreV1().Pods("").List(e.ctx, metav1.ListOptions{LabelSelector: protocol.LabelVolume + "=" + pv.Name}); len(pods.Items) > 0 {
		t.Fatalf("a pod runs for a retained volume: %s", pods.Items[0].Name)
	}
	if _, err := e.kube.CoreV1().PersistentVolumes().Get(e.ctx, pv.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("retained PV: %v", err)
	}
	// Deleting a retained PV by hand is not blocked by PaV.
	if err := e.kube.CoreV1().PersistentVolumes().Delete(e.ctx, pv.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitVolumeGone(pv.Name)
}

func TestWaitForFirstConsumer(t *testing.T) {
	e := newEnv(t)
	e.startController()
	p := e.provisioner("wffc", withPods(false, true, false))
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	e.class("wffc", p.Name, func(sc *storagev1.StorageClass) { sc.VolumeBindingMode = &wffc })
	pvc := e.claim("c", "wffc", "1Gi")
	e.waitSettled("claims", e.ns+"/c", pvc)
	if pods := e.pavPods(pvc.UID); len(pods) > 0 {
		t.Fatalf("pod %s started before a node was selected", pods[0].Name)
	}
	patch := []byte(`{"metadata":{"annotations":{"volume.kubernetes.io/selected-node":"node-7"}}}`)
	if _, err := e.kube.CoreV1().PersistentVolumeClaims(e.ns).Patch(e.ctx, "c", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	cre := e.pod(protocol.PhaseCreation, string(pvc.UID))
	e.finishPod(cre, 0, "", map[string]string{protocol.AnnotationResultCapacity: "1Gi"})
	pv := e.volume(pvc)
	if pv.Annotations[protocol.AnnotationSelectedNode] != "node-7" {
		t.Errorf("selected node annotation: %v", pv.Annotations)
	}
}

func TestRestartDuringCreationResumesWithoutDuplicate(t *testing.T) {
	e := newEnv(t)
	e.startController()
	p := e.provisioner("restart", withPods(false, true, false))
	e.class("restart", p.Name, nil)
	pvc := e.claim("c", "restart", "1Gi")
	cre := e.pod(protocol.PhaseCreation, string(pvc.UID))
	e.stopController()

	// The pod finishes while no controller runs.
	e.finishPod(cre, 0, "", map[string]string{protocol.AnnotationResultCapacity: "1Gi"})
	e.startController()
	pv := e.volume(pvc)
	if pv.Spec.CSI.VolumeHandle != "pvc-"+string(pvc.UID) {
		t.Errorf("handle %q", pv.Spec.CSI.VolumeHandle)
	}
	// Exactly one creation pod ever existed: the one we finished (its
	// results made the PV), and no other was created.
	e.waitNoPods(pvc.UID)
	list, err := e.kube.CoreV1().Events(e.ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range list.Items {
		if ev.Reason == "ProvisioningFailed" {
			t.Errorf("unexpected failure event: %s", ev.Message)
		}
	}

	// Restart again in the middle of a running pod: the new controller adopts it.
	pvc2 := e.claim("c2", "restart", "1Gi")
	cre2 := e.pod(protocol.PhaseCreation, string(pvc2.UID))
	e.stopController()
	e.startController()
	e.waitSettled("claims", e.ns+"/c2", e.getClaim("c2"))
	pods := e.pavPods(pvc2.UID)
	if len(pods) != 1 || pods[0].UID != cre2.UID {
		t.Fatalf("after restart: %d pods (want the original one)", len(pods))
	}
	e.finishPod(cre2, 0, "", map[string]string{protocol.AnnotationResultCapacity: "1Gi"})
	e.volume(pvc2)
}

func TestClaimDeletedDuringCreation(t *testing.T) {
	e := newEnv(t)
	e.startController()
	p := e.provisioner("delcre", withPods(false, true, true))
	e.class("delcre", p.Name, nil)
	pvc := e.claim("c", "delcre", "1Gi")
	cre := e.pod(protocol.PhaseCreation, string(pvc.UID))
	if err := e.kube.CoreV1().PersistentVolumeClaims(e.ns).Delete(e.ctx, "c", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitSettled("claims", e.ns+"/c", e.getClaim("c"))
	if !protocol.HasFinalizer(e.getClaim("c"), protocol.FinalizerClaim) {
		t.Fatal("finalizer removed while the creation pod runs")
	}
	// Creation succeeds after all: what it created must be deleted.
	e.finishPod(cre, 0, "", map[string]string{protocol.AnnotationResultCapacity: "1Gi"})
	del := e.pod(protocol.PhaseDeletion, string(pvc.UID))
	e.noVolumeFor(pvc)
	e.finishPod(del, 0, "", nil)
	e.waitFor("claim released by PaV", func() (bool, error) {
		c, err := e.kube.CoreV1().PersistentVolumeClaims(e.ns).Get(e.ctx, "c", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return err == nil && !protocol.HasFinalizer(c, protocol.FinalizerClaim), err
	})
	e.waitNoPods(pvc.UID)
	e.noVolumeFor(pvc)
}

func TestProvisionerWithVolumesCannotBeDeleted(t *testing.T) {
	e := newEnv(t)
	e.startController()
	p := e.provisioner("held", func(s *v1alpha1.PavProvisionerSpec) {
		s.VolumeCreation = &v1alpha1.VolumeCreation{Capacity: value("1Gi")}
	})
	e.class("held", p.Name, nil)
	pvc := e.claim("c", "held", "1Gi")
	pv := e.volume(pvc)
	e.waitFor("provisioner finalizer", func() (bool, error) {
		cur, err := e.pav.Get(e.ctx, p.Name, metav1.GetOptions{})
		return err == nil && protocol.HasFinalizer(cur, protocol.FinalizerProvisioner), err
	})
	if err := e.pav.Delete(e.ctx, p.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitFor("Ready=False Terminating", func() (bool, error) {
		cur, err := e.pav.Get(e.ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(cur.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, "1 PersistentVolume"), nil
	})
	// New claims are refused while it is being deleted.
	e.claim("late", "held", "1Gi")
	e.waitEvent("late", "ProvisioningFailed", "being deleted")

	if err := e.kube.CoreV1().PersistentVolumeClaims(e.ns).Delete(e.ctx, "c", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.release(pv)
	e.waitVolumeGone(pv.Name)
	// kube-controller-manager would drop pv-protection; do it ourselves.
	if cur, err := e.kube.CoreV1().PersistentVolumes().Get(e.ctx, pv.Name, metav1.GetOptions{}); err == nil {
		cur.Finalizers = nil
		if _, err := e.kube.CoreV1().PersistentVolumes().Update(e.ctx, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.waitFor("provisioner gone", func() (bool, error) {
		_, err := e.pav.Get(e.ctx, p.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	e.waitFor("CSIDriver gone", func() (bool, error) {
		_, err := e.kube.StorageV1().CSIDrivers().Get(e.ctx, p.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// spec.volumeStaging.fsGroupPolicy reaches the CSIDriver; changing it
// updates the CSIDriver in place (same UID: never a moment without one).
func TestFSGroupPolicyReachesCSIDriver(t *testing.T) {
	e := newEnv(t)
	e.startController()
	file := storagev1.FileFSGroupPolicy
	p := e.provisioner("fsgroup", func(s *v1alpha1.PavProvisionerSpec) { s.VolumeStaging.FSGroupPolicy = &file })
	var first *storagev1.CSIDriver
	e.waitFor("CSIDriver with fsGroupPolicy File", func() (bool, error) {
		d, err := e.kube.StorageV1().CSIDrivers().Get(e.ctx, p.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		first = d
		return err == nil && d.Spec.FSGroupPolicy != nil && *d.Spec.FSGroupPolicy == file, err
	})
	// Spec updates are retried on conflicts: the controller writes the
	// provisioner's status meanwhile.
	setPolicy := func(policy storagev1.FSGroupPolicy) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := e.pav.Get(e.ctx, p.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Spec.VolumeStaging.FSGroupPolicy = &policy
			_, err = e.pav.Update(e.ctx, cur, metav1.UpdateOptions{})
			return err
		})
	}
	none := storagev1.NoneFSGroupPolicy
	if err := setPolicy(none); err != nil {
		t.Fatal(err)
	}
	e.waitFor("CSIDriver with fsGroupPolicy None", func() (bool, error) {
		d, err := e.kube.StorageV1().CSIDrivers().Get(e.ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return false, err // a replacement would be seen as NotFound here
		}
		if d.UID != first.UID {
			return false, fmt.Errorf("the CSIDriver was replaced (UID %s, was %s)", d.UID, first.UID)
		}
		return *d.Spec.FSGroupPolicy == none, nil
	})
	err := setPolicy("Sometimes")
	if err == nil || !strings.Contains(err.Error(), "spec.volumeStaging.fsGroupPolicy") {
		t.Errorf("an unknown fsGroupPolicy was accepted: %v", err)
	}
}

func TestInvalidProvisionerIsReported(t *testing.T) {
	e := newEnv(t)
	e.startController()
	p := e.provisioner("invalid", func(s *v1alpha1.PavProvisionerSpec) {
		s.VolumeValidation = &v1alpha1.VolumeValidation{MinCapacity: value("{{ 1 +")}
	})
	e.waitFor("Valid=False naming the field", func() (bool, error) {
		cur, err := e.pav.Get(e.ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(cur.Status.Conditions, v1alpha1.ConditionValid)
		r := meta.FindStatusCondition(cur.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, "spec.volumeValidation.minCapacity") &&
			r != nil && r.Status == metav1.ConditionFalse, nil
	})
	e.waitEvent(p.Name, "InvalidSpec", "spec.volumeValidation.minCapacity")
}

func TestNotDynamic(t *testing.T) {
	e := newEnv(t)
	e.startController()
	p := e.provisioner("static", func(s *v1alpha1.PavProvisionerSpec) {
		s.ProvisioningModes = []v1alpha1.ProvisioningMode{v1alpha1.Static}
	})
	e.class("static", p.Name, nil)
	e.claim("c", "static", "1Gi")
	e.waitEvent("c", "ProvisioningFailed", "does not support dynamic provisioning")
}

func TestValidationRulesRejectClaim(t *testing.T) {
	e := newEnv(t)
	e.startController()
	p := e.provisioner("rules", func(s *v1alpha1.PavProvisionerSpec) {
		s.VolumeValidation = &v1alpha1.VolumeValidation{MaxCapacity: value("1Gi")}
		s.VolumeCreation = &v1alpha1.VolumeCreation{Capacity: value("1Gi")}
	})
	e.class("rules", p.Name, nil)
	pvc := e.claim("big", "rules", "2Gi")
	e.waitEvent("big", "ProvisioningFailed", "above the maximum capacity 1Gi")
	e.noVolumeFor(pvc)
}

func TestStuckPodIsReported(t *testing.T) {
	e := newEnv(t)
	e.startController()
	p := e.provisioner("stuck", withPods(false, true, false))
	e.class("stuck", p.Name, nil)
	pvc := e.claim("c", "stuck", "1Gi")
	cre := e.pod(protocol.PhaseCreation, string(pvc.UID))
	cur, err := e.kube.CoreV1().Pods(cre.Namespace).Get(e.ctx, cre.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Status.Phase = corev1.PodPending
	cur.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", Image: "busybox", State: corev1.ContainerState{
		Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `image "busybox" not found`}}}}
	if _, err := e.kube.CoreV1().Pods(cre.Namespace).UpdateStatus(e.ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitEvent("c", "PodNotStarting", `ImagePullBackOff: image "busybox" not found`)
}

// A burst of claims is limited by the API server, not by PaV's client rate
// limits or worker counts: 200 claims without pods are provisioned quickly.
// TestBurstOfClaims checks that a burst of claims is all provisioned (how fast
// is measured by BenchmarkClaimBurst).
func TestBurstOfClaims(t *testing.T) {
	e := newEnv(t)
	e.startController()
	d := e.claimBurst("burst", 200)
	t.Logf("200 claims provisioned in %v", d)
}

// BenchmarkClaimBurst measures how long the controller takes to provision a
// burst of claims against a real API server, from the first claim created to
// the last PV: `make bench` reports it as volumes/s.
func BenchmarkClaimBurst(b *testing.B) {
	const n = 200
	e := newEnv(b)
	e.startController()
	var total time.Duration
	i := 0
	for b.Loop() {
		total += e.claimBurst(fmt.Sprintf("burst%d", i), n)
		i++
	}
	b.ReportMetric(float64(n*i)/total.Seconds(), "volumes/s")
}

// claimBurst creates n claims of a new class at once and waits until each has
// its PV; it returns the time that took.
func (e *env) claimBurst(class string, n int) time.Duration {
	e.t.Helper()
	p := e.provisioner(class, func(s *v1alpha1.PavProvisionerSpec) {
		s.VolumeCreation = &v1alpha1.VolumeCreation{Capacity: value("1Gi")}
	})
	e.class(class, p.Name, nil)
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, errs[i] = e.createClaim(fmt.Sprintf("%s-c%d", class, i), class, "1Gi")
		}(i)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		e.t.Fatal(err)
	}
	e.waitFor(fmt.Sprintf("%d PVs", n), func() (bool, error) {
		list, err := e.kube.CoreV1().PersistentVolumes().List(e.ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		count := 0
		for _, pv := range list.Items {
			if pv.Spec.StorageClassName == class {
				count++
			}
		}
		return count == n, nil
	})
	return time.Since(start)
}

// Retained and statically provisioned PVs, which PaV never deletes, do not
// hold a PavProvisioner being deleted (the original PaV's system tests delete
// the provisioner, and the CRD on uninstall, with such PVs left).
func TestProvisionerDeletionIgnoresRetainedAndStaticVolumes(t *testing.T) {
	e := newEnv(t)
	e.startController()
	p := e.provisioner("keeps", func(s *v1alpha1.PavProvisionerSpec) {
		s.ProvisioningModes = []v1alpha1.ProvisioningMode{v1alpha1.Dynamic, v1alpha1.Static}
		s.VolumeCreation = &v1alpha1.VolumeCreation{Capacity: value("1Gi")}
	})
	retain := corev1.PersistentVolumeReclaimRetain
	e.class("keeps", p.Name, func(sc *storagev1.StorageClass) { sc.ReclaimPolicy = &retain })
	pv := e.volume(e.claim("c", "keeps", "1Gi"))
	static := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "static-" + e.ns},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: p.Name, VolumeHandle: "h"}},
		},
	}
	if _, err := e.kube.CoreV1().PersistentVolumes().Create(e.ctx, static, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.kube.CoreV1().PersistentVolumes().Delete(context.Background(), static.Name, metav1.DeleteOptions{})
	})
	e.waitFor("provisioner finalizer", func() (bool, error) {
		cur, err := e.pav.Get(e.ctx, p.Name, metav1.GetOptions{})
		return err == nil && protocol.HasFinalizer(cur, protocol.FinalizerProvisioner), err
	})
	if err := e.pav.Delete(e.ctx, p.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitFor("provisioner gone while a retained and a static PV remain", func() (bool, error) {
		_, err := e.pav.Get(e.ctx, p.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	for _, name := range []string{pv.Name, static.Name} {
		if _, err := e.kube.CoreV1().PersistentVolumes().Get(e.ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("PV %s: %v (PaV must leave it)", name, err)
		}
	}
}

// PaV provisions a claim only once the PV controller handed it over
// (volume.kubernetes.io/storage-provisioner), so that it never races the
// binding of an existing PV.
func TestProvisioningWaitsForHandover(t *testing.T) {
	e := newEnv(t)
	e.startController()
	p := e.provisioner("handover", func(s *v1alpha1.PavProvisionerSpec) {
		s.VolumeCreation = &v1alpha1.VolumeCreation{Capacity: value("1Gi")}
	})
	e.class("handover", p.Name, nil)
	class := "handover"
	early := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "early", Namespace: e.ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &class,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	early, err := e.kube.CoreV1().PersistentVolumeClaims(e.ns).Create(e.ctx, early, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A claim handed over after it is provisioned: the controller has seen
	// (and passed over) the earlier one by then.
	e.volume(e.claim("later", "handover", "1Gi"))
	if protocol.HasFinalizer(e.getClaim("early"), protocol.FinalizerClaim) {
		t.Fatal("PaV started provisioning a claim the PV controller has not handed over")
	}
	e.noVolumeFor(early)
	patch := []byte(`{"metadata":{"annotations":{"volume.kubernetes.io/storage-provisioner":"` + p.Name + `"}}}`)
	if _, err := e.kube.CoreV1().PersistentVolumeClaims(e.ns).Patch(e.ctx, "early", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.volume(early)
}

// A failed attempt returns a WaitForFirstConsumer claim to the scheduler:
// PaV removes the selected node, so that another node can be chosen.
func TestWaitForFirstConsumerFailureReschedules(t *testing.T) {
	e := newEnv(t)
	e.startController()
	p := e.provisioner("resched", withPods(true, false, false))
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	e.class("resched", p.Name, func(sc *storagev1.StorageClass) { sc.VolumeBindingMode = &wffc })
	pvc := e.claim("c", "resched", "1Gi")
	patch := []byte(`{"metadata":{"annotations":{"volume.kubernetes.io/selected-node":"node-7"}}}`)
	if _, err := e.kube.CoreV1().PersistentVolumeClaims(e.ns).Patch(e.ctx, "c", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	val := e.pod(protocol.PhaseValidation, string(pvc.UID))
	e.finishPod(val, 1, "node-7 cannot host it", nil)
	e.waitEvent("c", "ValidationFailed", "node-7 cannot host it")
	e.waitFor("the selected node removed from the claim", func() (bool, error) {
		c, err := e.kube.CoreV1().PersistentVolumeClaims(e.ns).Get(e.ctx, "c", metav1.GetOptions{})
		return err == nil && c.Annotations["volume.kubernetes.io/selected-node"] == "", err
	})
}

// A node deleted while a volume is staged there: its node plugin can never
// release the staging pod, so the controller does (with an Event on the PV),
// and the volume's deletion goes on.
func TestNodeGoneReleasesItsStagings(t *testing.T) {
	e := newEnv(t)
	e.startController()
	p := e.provisioner("gone", func(s *v1alpha1.PavProvisionerSpec) {
		s.VolumeCreation = &v1alpha1.VolumeCreation{Capacity: value("1Gi")}
	})
	e.class("gone", p.Name, nil)
	pv := e.volume(e.claim("c", "gone", "1Gi"))
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gone-" + e.ns}}
	if _, err := e.kube.CoreV1().Nodes().Create(e.ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// What the node plugin of that node created when a client pod used the volume.
	staging := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "staging", Namespace: e.ns, Finalizers: []string{protocol.FinalizerStaging},
			Labels: map[string]string{protocol.LabelProvisioner: p.Name, protocol.LabelPhase: string(protocol.PhaseStaging), protocol.LabelVolume: pv.Name}},
		Spec: corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{{Name: "c", Image: "img"}}},
	}
	if _, err := e.kube.CoreV1().Pods(e.ns).Create(e.ctx, staging, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.kube.CoreV1().PersistentVolumeClaims(e.ns).Delete(e.ctx, "c", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.release(pv)
	if err := e.kube.CoreV1().Nodes().Delete(e.ctx, node.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitEvent(pv.Name, "NodeGone", "released without unstaging")
	e.waitFor("the staging pod of the gone node deleted", func() (bool, error) {
		_, err := e.kube.CoreV1().Pods(e.ns).Get(e.ctx, "staging", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	e.waitVolumeGone(pv.Name)
}

func skipWithLiteralEngine(t *testing.T) {
	if os.Getenv("PAV_IT_ENGINE") == "literal" {
		t.Skip("needs template evaluation")
	}
}

// Issue 10 item 12: the PV is built from what the attempt evaluated before
// its creation pod ran, even if the claim changed meanwhile; the deletion
// pod sees the PV and its handle (a PaV-Go addition).
func TestOneEvaluationPerAttemptAndDeletionContext(t *testing.T) {
	skipWithLiteralEngine(t)
	e := newEnv(t)
	e.startController()
	deletion := podTemplate(e.ns)
	deletion["spec"].(map[string]interface{})["containers"].([]interface{})[0].(map[string]interface{})["command"] =
		[]interface{}{"echo", "{{ handle }}", "{{ pv.metadata.name }}", "{{ pv.spec.capacity.storage }}"}
	p := e.provisioner("once", func(s *v1alpha1.PavProvisionerSpec) {
		s.VolumeCreation = &v1alpha1.VolumeCreation{
			Handle:      value("{{ pvc.metadata.annotations.flavor }}"),
			Capacity:    value("{{ pvc.metadata.annotations.size }}"),
			PodTemplate: value(podTemplate(e.ns)),
		}
		s.VolumeDeletion = &v1alpha1.VolumeDeletion{PodTemplate: value(deletion)}
	})
	e.class("once", p.Name, nil)
	pvc := e.claim("c", "once", "1Gi")
	pvc.Annotations["flavor"], pvc.Annotations["size"] = "first", "2Gi"
	if _, err := e.kube.CoreV1().PersistentVolumeClaims(e.ns).Update(e.ctx, pvc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	cre := e.pod(protocol.PhaseCreation, string(pvc.UID))
	// The claim changes while the creation pod runs.
	cur := e.getClaim("c")
	cur.Annotations["flavor"], cur.Annotations["size"] = "second", "3Gi"
	if _, err := e.kube.CoreV1().PersistentVolumeClaims(e.ns).Update(e.ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.finishPod(cre, 0, "", nil)
	pv := e.volume(pvc)
	if pv.Spec.CSI.VolumeHandle != "first" {
		t.Errorf("handle %q, want the one the attempt evaluated before the claim changed", pv.Spec.CSI.VolumeHandle)
	}
	if q := pv.Spec.Capacity[corev1.ResourceStorage]; q.Cmp(resource.MustParse("2Gi")) != 0 {
		t.Errorf("capacity %s, want 2Gi", q.String())
	}

	if err := e.kube.CoreV1().PersistentVolumeClaims(e.ns).Delete(e.ctx, "c", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.release(pv)
	del := e.pod(protocol.PhaseDeletion, pv.Name)
	if got := strings.Join(del.Spec.Containers[0].Command, " "); got != "echo first "+pv.Name+" 2Gi" {
		t.Errorf("deletion pod command %q, want the PV's handle, name and capacity", got)
	}
	e.finishPod(del, 0, "", nil)
	e.waitVolumeGone(pv.Name)
}

// bind plays the PV controller: the claim is bound to its volume.
func (e *env) bind(pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) {
	e.t.Helper()
	// The controller may write the claim meanwhile (a clone's source gets
	// its finalizer): as the PV controller, bind the claim as it is then.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		return e.bindClaim(e.getClaim(pvc.Name), pv)
	}); err != nil {
		e.t.Fatal(err)
	}
}

// bindClaim is bind on the claim as it is now (cur, which it changes); unlike
// bind, it is safe in any goroutine. As the PV controller, it copies the
// volume's capacity and access modes to the claim's status.
func (e *env) bindClaim(cur *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) error {
	claims := e.kube.CoreV1().PersistentVolumeClaims(cur.Namespace)
	cur.Spec.VolumeName = pv.Name
	updated, err := claims.Update(e.ctx, cur, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("binding claim %s/%s: %w", cur.Namespace, cur.Name, err)
	}
	updated.Status.Phase = corev1.ClaimBound
	updated.Status.Capacity, updated.Status.AccessModes = pv.Spec.Capacity, pv.Spec.AccessModes
	if _, err := claims.UpdateStatus(e.ctx, updated, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("setting claim %s/%s Bound: %w", cur.Namespace, cur.Name, err)
	}
	return nil
}

func (e *env) claimFrom(name, class, size string, source *corev1.TypedLocalObjectReference) *corev1.PersistentVolumeClaim {
	e.t.Helper()
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns, Annotations: map[string]string{"volume.kubernetes.io/storage-provisioner": class}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &class,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
			DataSource:       source,
		},
	}
	out, err := e.kube.CoreV1().PersistentVolumeClaims(e.ns).Create(e.ctx, pvc, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// Issue 10 item 3: a claim whose dataSource is a claim of the same
// provisioner is a clone: provisioned with sourcePvc, sourcePv and
// sourceHandle in the context if the provisioner declares cloning, refused
// with an Event otherwise; other data sources are refused.
func TestCloning(t *testing.T) {
	skipWithLiteralEngine(t)
	e := newEnv(t)
	e.startController()
	cloner := e.provisioner("cloner", func(s *v1alpha1.PavProvisionerSpec) {
		s.VolumeCreation = &v1alpha1.VolumeCreation{
			Cloning:  true,
			Handle:   value("{% if sourceHandle is defined %}copy-of-{{ sourceHandle }}-{{ sourcePvc.metadata.name }}-{{ sourcePv.spec.capacity.storage }}{% else %}{{ pvc.metadata.name }}{% endif %}"),
			Capacity: value("{{ requestedMinCapacity }}"),
		}
	})
	plain := e.provisioner("plain", func(s *v1alpha1.PavProvisionerSpec) {
		s.VolumeCreation = &v1alpha1.VolumeCreation{Capacity: value("1Gi")}
	})
	// Class names equal to provisioner names (claimFrom's handover annotation).
	e.class(cloner.Name, cloner.Name, nil)
	e.class(plain.Name, plain.Name, nil)

	src := e.claim("src", cloner.Name, "1Gi")
	srcPV := e.volume(src)
	if srcPV.Spec.CSI.VolumeHandle != "src" {
		t.Fatalf("source handle %q", srcPV.Spec.CSI.VolumeHandle)
	}
	// A clone of a claim that is not bound yet waits for it.
	clone := e.claimFrom("clone", cloner.Name, "1Gi", &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "src"})
	e.waitEvent("clone", "ProvisioningFailed", `the claim "src" to clone is not bound to a volume yet`)
	e.bind(src, srcPV)
	pv := e.volume(clone)
	if want := "copy-of-src-src-1073741824"; pv.Spec.CSI.VolumeHandle != want {
		t.Errorf("clone handle %q, want %q", pv.Spec.CSI.VolumeHandle, want)
	}

	plainSrc := e.claim("plain-src", plain.Name, "1Gi")
	e.bind(plainSrc, e.volume(plainSrc))
	e.claimFrom("plain-clone", plain.Name, "1Gi", &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "plain-src"})
	e.waitEvent("plain-clone", "ProvisioningFailed", "cannot clone volumes (its spec.volumeCreation.cloning is not true)")

	e.claimFrom("cross", cloner.Name, "1Gi", &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "plain-src"})
	e.waitEvent("cross", "ProvisioningFailed", `claim "plain-src" is not a volume of PavProvisioner`)

	group := "snapshot.storage.k8s.io"
	e.claimFrom("snap", cloner.Name, "1Gi", &corev1.TypedLocalObjectReference{APIGroup: &group, Kind: "VolumeSnapshot", Name: "s"})
	e.waitEvent("snap", "ProvisioningFailed", "cannot restore snapshots (its spec.volumeCreation.restoring is not true)")
	for _, name := range []string{"plain-clone", "cross", "snap"} {
		if c := e.getClaim(name); c.Spec.VolumeName != "" {
			t.Errorf("claim %s was provisioned", name)
		}
	}
}

// A clone's source claim is kept while the clone is being created, even if
// deleted meanwhile (its finalizer, as external-provisioner's cloning
// protection), and goes once the clone's PV exists.
func TestCloneSourceKeptUntilTheCloneIsCreated(t *testing.T) {
	e := newEnv(t)
	e.startController()
	p := e.provisioner("guarded", func(s *v1alpha1.PavProvisionerSpec) {
		withPods(false, true, true)(s)
		s.VolumeCreation.Cloning = true
	})
	e.class(p.Name, p.Name, nil)
	results := map[string]string{protocol.AnnotationResultCapacity: "1Gi"}

	src := e.claim("src", p.Name, "1Gi")
	e.finishPod(e.pod(protocol.PhaseCreation, string(src.UID)), 0, "", results)
	e.bind(src, e.volume(src))
	e.waitNoPods(src.UID)

	clone := e.claimFrom("clone", p.Name, "1Gi", &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "src"})
	cre := e.pod(protocol.PhaseCreation, string(clone.UID))
	if !protocol.HasFinalizer(e.getClaim("src"), protocol.CloneFinalizer(string(clone.UID))) {
		t.Fatalf("the clone's creation pod runs and its source claim's finalizers are %v", e.getClaim("src").Finalizers)
	}
	// The source is deleted; no pod uses it, so kube-controller-manager's
	// pvc-protection (played here) lets it go.
	if err := e.kube.CoreV1().PersistentVolumeClaims(e.ns).Delete(e.ctx, "src", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.removeFinalizer("src", "kubernetes.io/pvc-protection")
	if got, err := e.kube.CoreV1().PersistentVolumeClaims(e.ns).Get(e.ctx, "src", metav1.GetOptions{}); err != nil || got.DeletionTimestamp == nil {
		t.Fatalf("the source claim while its clone is created: %v, %+v; want it kept, marked deleted", err, got)
	}

	e.finishPod(cre, 0, "", results)
	e.volume(clone)
	e.waitFor("the source claim to go", func() (bool, error) {
		_, err := e.kube.CoreV1().PersistentVolumeClaims(e.ns).Get(e.ctx, "src", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

// removeFinalizer removes finalizer f from claim name, as its owner would.
func (e *env) removeFinalizer(name, f string) {
	e.t.Helper()
	e.waitFor("finalizer "+f+" removed from claim "+name, func() (bool, error) {
		pvc, err := e.kube.CoreV1().PersistentVolumeClaims(e.ns).Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if !protocol.HasFinalizer(pvc, f) {
			return true, nil
		}
		pvc.Finalizers = protocol.WithoutFinalizer(pvc.Finalizers, f)
		_, err = e.kube.CoreV1().PersistentVolumeClaims(e.ns).Update(e.ctx, pvc, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return false, nil // read again
		}
		return err == nil, err
	})
}

// Issue 10 item 1: a bound claim asking for more runs the expansion pod,
// records the resize in its status while it runs, then gets the capacity
// the pod reported, on the PV and in its status; a failed pod is reported
// and retried; a provisioner without volumeExpansion says it cannot expand.
func TestExpansion(t *testing.T) {
	e := newEnv(t)
	e.startController()
	grow := e.provisioner("grow", func(s *v1alpha1.PavProvisionerSpec) {
		s.VolumeCreation = &v1alpha1.VolumeCreation{Capacity: value("1Gi")}
		s.VolumeExpansion = &v1alpha1.VolumeExpansion{PodTemplate: value(podTemplate(e.ns))}
	})
	fixed := e.provisioner("fixed", func(s *v1alpha1.PavProvisionerSpec) {
		s.VolumeCreation = &v1alpha1.VolumeCreation{Capacity: value("1Gi")}
	})
	expandable := func(sc *storagev1.StorageClass) { yes := true; sc.AllowVolumeExpansion = &yes }
	e.class("grow", grow.Name, expandable)
	e.class("fixed", fixed.Name, expandable)

	pvc := e.claim("c", "grow", "1Gi")
	pv := e.volume(pvc)
	e.bind(pvc, pv)
	request := func(name, size string) {
		t.Helper()
		patch := `{"spec":{"resources":{"requests":{"storage":"` + size + `"}}}}`
		if _, err := e.kube.CoreV1().PersistentVolumeClaims(e.ns).Patch(e.ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	request("c", "2Gi")
	pod := e.pod(protocol.PhaseExpansion, pv.Name)
	if pod.Annotations[protocol.AnnotationExpansionTarget] != "2Gi" {
		t.Errorf("expansion pod target %q", pod.Annotations[protocol.AnnotationExpansionTarget])
	}
	e.waitFor("the claim's status to record the resize", func() (bool, error) {
		st := e.getClaim("c").Status
		return st.AllocatedResourceStatuses[corev1.ResourceStorage] == corev1.PersistentVolumeClaimControllerResizeInProgress &&
			st.AllocatedResources.Storage().Cmp(resource.MustParse("2Gi")) == 0 && len(st.Conditions) == 1 &&
			st.Conditions[0].Type == corev1.PersistentVolumeClaimResizing, nil
	})

	// A failed expansion is reported and retried with a new pod.
	e.finishPod(pod, 1, "backend full", nil)
	e.waitEvent("c", "VolumeResizeFailed", "backend full")
	again := e.pod(protocol.PhaseExpansion, pv.Name)
	if again.UID == pod.UID {
		t.Fatal("retry reused the failed pod")
	}
	e.finishPod(again, 0, "", map[string]string{protocol.AnnotationResultCapacity: "3Gi\n"})
	e.waitFor("the PV and the claim to show 3Gi", func() (bool, error) {
		cur, err := e.kube.CoreV1().PersistentVolumes().Get(e.ctx, pv.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		st := e.getClaim("c").Status
		return cur.Spec.Capacity.Storage().Cmp(resource.MustParse("3Gi")) == 0 &&
			st.Capacity.Storage().Cmp(resource.MustParse("3Gi")) == 0 &&
			len(st.AllocatedResourceStatuses) == 0 && len(st.Conditions) == 0, nil
	})
	e.waitEvent("c", "VolumeResizeSuccessful", "expanded to 3Gi")

	other := e.claim("d", "fixed", "1Gi")
	otherPV := e.volume(other)
	e.bind(other, otherPV)
	request("d", "2Gi")
	e.waitEvent("d", "VolumeResizeFailed", `PavProvisioner "`+fixed.Name+`" cannot expand volumes`)
}

// An expansion beyond the provisioner's maxCapacity, and one its expansion
// pod finds infeasible, end with external-resizer's status for an
// infeasible resize and run no further pod; lowering the request (which the
// API server allows above status.capacity) starts an expansion to it.
func TestExpansionInfeasible(t *testing.T) {
	skipWithLiteralEngine(t)
	e := newEnv(t)
	e.startController()
	p := e.provisioner("capped", func(s *v1alpha1.PavProvisionerSpec) {
		s.VolumeValidation = &v1alpha1.VolumeValidation{MaxCapacity: value("10Gi")}
		s.VolumeCreation = &v1alpha1.VolumeCreation{Capacity: value("1Gi")}
		s.VolumeExpansion = &v1alpha1.VolumeExpansion{PodTemplate: value(podTemplate(e.ns))}
	})
	e.class("capped", p.Name, func(sc *storagev1.StorageClass) { yes := true; sc.AllowVolumeExpansion = &yes })
	pvc := e.claim("c", "capped", "1Gi")
	pv := e.volume(pvc)
	e.bind(pvc, pv)
	request := func(size string) {
		t.Helper()
		patch := `{"spec":{"resources":{"requests":{"storage":"` + size + `"}}}}`
		if _, err := e.kube.CoreV1().PersistentVolumeClaims(e.ns).Patch(e.ctx, "c", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	infeasible := func(size, reason string) {
		t.Helper()
		var cur *corev1.PersistentVolumeClaim
		e.waitFor("the claim's status to record "+size+" as infeasible", func() (bool, error) {
			cur = e.getClaim("c")
			st := cur.Status
			return st.AllocatedResourceStatuses[corev1.ResourceStorage] == corev1.PersistentVolumeClaimControllerResizeInfeasible &&
				st.AllocatedResources.Storage().Cmp(resource.MustParse(size)) == 0 && len(st.Conditions) == 1 &&
				st.Conditions[0].Type == corev1.PersistentVolumeClaimControllerResizeError && st.Conditions[0].Reason == reason, nil
		})
		// Whatever the controller decided on that claim, it has done: no expansion pod.
		e.waitSettled("claims", e.ns+"/c", cur)
		for _, pod := range e.pavPods(pvc.UID) {
			if pod.Labels[protocol.LabelPhase] == string(protocol.PhaseExpansion) {
				t.Errorf("expansion pod %s (target %s) exists", pod.Name, pod.Annotations[protocol.AnnotationExpansionTarget])
			}
		}
		if st := e.getClaim("c").Status; st.Capacity.Storage().Cmp(resource.MustParse("1Gi")) != 0 {
			t.Errorf("claim capacity %s, want 1Gi", st.Capacity.Storage())
		}
	}

	request("5Ti")
	infeasible("5Ti", "ExpansionNotAllowed")
	e.waitEvent("c", "VolumeResizeFailed", "above the maximum capacity 10Gi")

	request("2Gi")
	pod := e.pod(protocol.PhaseExpansion, pv.Name)
	if target := pod.Annotations[protocol.AnnotationExpansionTarget]; target != "2Gi" {
		t.Errorf("expansion pod target %s, want 2Gi", target)
	}
	e.finishPod(pod, 1, "", map[string]string{protocol.AnnotationResultInfeasible: "the pool is full"})
	infeasible("2Gi", "ExpansionPodInfeasible")
	e.waitEvent("c", "VolumeResizeFailed", "cannot grow to 2Gi: the pool is full")

	request("1500Mi")
	pod = e.pod(protocol.PhaseExpansion, pv.Name)
	e.finishPod(pod, 0, "", nil)
	e.waitFor("the PV and the claim to show 1500Mi", func() (bool, error) {
		cur, err := e.kube.CoreV1().PersistentVolumes().Get(e.ctx, pv.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		st := e.getClaim("c").Status
		return cur.Spec.Capacity.Storage().Cmp(resource.MustParse("1500Mi")) == 0 &&
			st.Capacity.Storage().Cmp(resource.MustParse("1500Mi")) == 0 && st.AllocatedResources.Storage().Cmp(resource.MustParse("1500Mi")) == 0 &&
			len(st.AllocatedResourceStatuses) == 0 && len(st.Conditions) == 0, nil
	})
}

// A whole section written as one template string is stored by the API server
// and evaluated by the controller (issue 10 item 9).
func TestWholeSectionTemplate(t *testing.T) {
	skipWithLiteralEngine(t)
	e := newEnv(t)
	e.startController()
	tmpl := "{% set yaml = true %}capacity: 2Gi\nhandle: whole-{{ pvc.metadata.name }}"
	p := e.provisioner("whole", func(s *v1alpha1.PavProvisionerSpec) {
		s.VolumeCreation = &v1alpha1.VolumeCreation{Section: v1alpha1.Section{Template: &tmpl}}
	})
	got, err := e.pav.Get(e.ctx, p.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.VolumeCreation == nil || got.Spec.VolumeCreation.Template == nil || *got.Spec.VolumeCreation.Template != tmpl {
		t.Fatalf("stored volumeCreation %+v", got.Spec.VolumeCreation)
	}
	e.class("whole", p.Name, nil)
	pvc := e.claim("c", "whole", "1Gi")
	pv := e.volume(pvc)
	if pv.Spec.CSI.VolumeHandle != "whole-c" || pv.Spec.Capacity.Storage().Cmp(resource.MustParse("2Gi")) != 0 {
		t.Errorf("PV handle %q capacity %s", pv.Spec.CSI.VolumeHandle, pv.Spec.Capacity.Storage())
	}
}

// An attempt keeps the StorageClass it started with: deleting the class
// while creation pods run neither strands a claim nor leaks what its
// creation pod made. One claim is provisioned from the recorded class (its
// PV carries the class's parameters and snapshot); a claim deleted meanwhile
// gets the deletion pod, which needs the class too.
func TestClassDeletedDuringAttempt(t *testing.T) {
	e := newEnv(t)
	e.startController()
	p := e.provisioner("gonecls", withPods(false, true, true))
	e.class("gonecls", p.Name, nil)
	kept, dropped := e.claim("kept", "gonecls", "1Gi"), e.claim("dropped", "gonecls", "1Gi")
	keptPod, droppedPod := e.pod(protocol.PhaseCreation, string(kept.UID)), e.pod(protocol.PhaseCreation, string(dropped.UID))
	if err := e.kube.StorageV1().StorageClasses().Delete(e.ctx, "gonecls", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.kube.CoreV1().PersistentVolumeClaims(e.ns).Delete(e.ctx, "dropped", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	e.finishPod(keptPod, 0, "", map[string]string{protocol.AnnotationResultCapacity: "1Gi"})
	pv := e.volume(kept)
	if got := pv.Spec.CSI.VolumeAttributes["color"]; got != "blue" {
		t.Errorf("PV volumeAttributes %v: want the class's parameters", pv.Spec.CSI.VolumeAttributes)
	}
	if !strings.Contains(pv.Annotations[protocol.AnnotationClassSnapshot], `"name":"gonecls"`) {
		t.Errorf("PV class snapshot %q: want the deleted class", pv.Annotations[protocol.AnnotationClassSnapshot])
	}

	e.finishPod(droppedPod, 0, "", map[string]string{protocol.AnnotationResultCapacity: "1Gi"})
	e.finishPod(e.pod(protocol.PhaseDeletion, string(dropped.UID)), 0, "", nil)
	e.waitFor("the deleted claim released by PaV", func() (bool, error) {
		c, err := e.kube.CoreV1().PersistentVolumeClaims(e.ns).Get(e.ctx, "dropped", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return err == nil && !protocol.HasFinalizer(c, protocol.FinalizerClaim), err
	})
	e.noVolumeFor(dropped)
}
