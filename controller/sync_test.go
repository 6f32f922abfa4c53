package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	pavfake "github.com/albertofaria/pav/crds/generated/clientset/versioned/fake"
	groupsnapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapfake "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned/fake"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/kubeclient/fakeapi"
	"github.com/albertofaria/pav/kubeclient/generated/clientset/fake"
	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/templating"
)

// The sync functions driven directly, as sample-controller's tests do: a fake
// clientset holds the cluster, the informers' caches are filled from it before
// every sync (what the watches would do), PaV's pods are "run" by the test
// (terminated, results collected, as the node plugin would), and a fake clock
// lets backoff pass without waiting.

// stubEngine evaluates every phase to fixed pod templates: a validation pod,
// a creation pod whose /pav files give handle and capacity, a deletion pod,
// an expansion pod.
type stubEngine struct{}

func stubPod(app string) *corev1.PodTemplateSpec {
	return &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Namespace: "pav-pods", Labels: map[string]string{"app": app}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
}

func (stubEngine) Validate(*v1alpha1.PavProvisioner) field.ErrorList { return nil }
func (stubEngine) Validation(context.Context, *v1alpha1.PavProvisioner, templating.DynamicRequest) (*ValidationConfig, error) {
	return &ValidationConfig{PodTemplate: stubPod("validate")}, nil
}
func (stubEngine) Creation(context.Context, *v1alpha1.PavProvisioner, templating.DynamicRequest) (*templating.CreationConfig, error) {
	return &templating.CreationConfig{PodTemplate: stubPod("create")}, nil
}
func (stubEngine) Deletion(context.Context, *v1alpha1.PavProvisioner, templating.DynamicRequest) (*corev1.PodTemplateSpec, error) {
	return stubPod("delete"), nil
}
func (stubEngine) StorageCapacity(context.Context, *v1alpha1.PavProvisioner, templating.CapacityRequest) (*templating.CapacityConfig, error) {
	return nil, nil
}

func (stubEngine) Expansion(context.Context, *v1alpha1.PavProvisioner, templating.DynamicRequest) (*corev1.PodTemplateSpec, bool, error) {
	return stubPod("expand"), true, nil
}
func (stubEngine) Modification(context.Context, *v1alpha1.PavProvisioner, templating.DynamicRequest) (*corev1.PodTemplateSpec, bool, error) {
	return stubPod("modify"), true, nil
}
func (stubEngine) SnapshotCreation(context.Context, *v1alpha1.PavProvisioner, templating.SnapshotRequest) (*corev1.PodTemplateSpec, bool, error) {
	return stubPod("snapshot"), true, nil
}
func (stubEngine) SnapshotDeletion(context.Context, *v1alpha1.PavProvisioner, templating.SnapshotRequest) (*corev1.PodTemplateSpec, error) {
	return stubPod("snapshot-delete"), nil
}
func (stubEngine) GroupSnapshotCreation(context.Context, *v1alpha1.PavProvisioner, templating.GroupSnapshotRequest) (*corev1.PodTemplateSpec, bool, error) {
	return stubPod("group-snapshot"), true, nil
}
func (stubEngine) GroupSnapshotDeletion(context.Context, *v1alpha1.PavProvisioner, templating.GroupSnapshotRequest) (*corev1.PodTemplateSpec, error) {
	return stubPod("group-snapshot-delete"), nil
}
func (stubEngine) Forget(*v1alpha1.PavProvisioner) {}

const (
	testProvisioner = "prov"
	testClaimKey    = "ns/claim"
	resultHandle    = "vol-1"
	resultCapacity  = "2Gi"
	testVolume      = "pvc-claim-uid"
)

func testObjects() []runtime.Object {
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "sc", UID: "sc-uid"}, Provisioner: testProvisioner}
	class := "sc"
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "claim", UID: "claim-uid",
			Annotations: map[string]string{protocol.AnnotationStorageProvisioner: testProvisioner}},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &class,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	return []runtime.Object{sc, pvc}
}

type harness struct {
	t        *testing.T
	kube     *fake.Clientset
	pav      *pavfake.Clientset
	snap     *snapfake.Clientset
	c        *Controller
	now      time.Time
	events   *record.FakeRecorder
	prov     *v1alpha1.PavProvisioner
	restarts int
	// kubeletDir is the controller's Config.KubeletDir ("" for the default).
	kubeletDir string
	// poolDirs is the controller's Config.PoolKubeletDirs.
	poolDirs []PoolKubeletDir
	// engine is the controller's Engine (nil: stubEngine).
	engine Engine
	// backendMax, when set, is the most an expansion pod can grow a volume
	// to: above it the pod fails with /pav/infeasible.
	backendMax *resource.Quantity
	// infeasibleClass, when set, is the VolumeAttributesClass a
	// modification pod fails to give a volume, with /pav/infeasible.
	infeasibleClass string
	// notReadyChecks is how many snapshot creation pods, first, write
	// "false" to /pav/ready-to-use.
	notReadyChecks int
	// groupHandles, when set, is what group snapshot creation pods write to
	// /pav/snapshot-handles (else a line for each volume of the group).
	groupHandles *string
	// handle is what creation pods write to /pav/handle (resultHandle when "").
	handle string
	// attributes, when set, is what creation pods write to /pav/volume-attributes.
	attributes *string
	// failDeletions is how many deletion pods, first, fail.
	failDeletions int
	// creationCapacities is what the first creation pods write to
	// /pav/capacity, one each (then resultCapacity).
	creationCapacities []string
}

func newHarness(t *testing.T, objs ...runtime.Object) *harness {
	t.Helper()
	prov := provisionerFixture(testProvisioner)
	var kubeObjs, snapObjs []runtime.Object
	for _, o := range objs {
		if _, ok := o.(*snapshotv1.VolumeSnapshotContent); ok {
			snapObjs = append(snapObjs, o)
		} else if _, ok := o.(*snapshotv1.VolumeSnapshot); ok {
			snapObjs = append(snapObjs, o)
		} else if _, ok := o.(*snapshotv1.VolumeSnapshotClass); ok {
			snapObjs = append(snapObjs, o)
		} else if o.GetObjectKind().GroupVersionKind().Group == groupsnapshotv1.GroupName || isGroupSnapshotObject(o) {
			snapObjs = append(snapObjs, o)
		} else {
			kubeObjs = append(kubeObjs, o)
		}
	}
	h := &harness{t: t, kube: fake.NewSimpleClientset(kubeObjs...), pav: pavfake.NewSimpleClientset(prov),
		snap: snapfake.NewSimpleClientset(snapObjs...), now: time.Now(), prov: prov}
	h.finalizersAsTheAPIServer("persistentvolumes")
	h.finalizersAsTheAPIServer("persistentvolumeclaims")
	h.finalizersAsTheAPIServer("pods")
	finalizersAsTheAPIServer(h, &h.snap.Fake, h.snap.Tracker(), snapshotv1.SchemeGroupVersion.WithResource("volumesnapshotcontents"))
	finalizersAsTheAPIServer(h, &h.snap.Fake, h.snap.Tracker(), groupsnapshotv1.SchemeGroupVersion.WithResource("volumegroupsnapshotcontents"))
	h.restart()
	return h
}

// finalizersAsTheAPIServer gives the fake clientset the API server's
// finalizer rule for a resource: deleting an object that has finalizers only
// marks it deleted, and it goes when its last finalizer is removed.
func (h *harness) finalizersAsTheAPIServer(resource string) {
	finalizersAsTheAPIServer(h, &h.kube.Fake, h.kube.Tracker(), corev1.SchemeGroupVersion.WithResource(resource))
}

func finalizersAsTheAPIServer(h *harness, f *k8stesting.Fake, tracker k8stesting.ObjectTracker, gvr schema.GroupVersionResource) {
	fakeapi.HonorFinalizers(f, tracker, gvr, func() time.Time { return h.now })
}

// restart replaces the controller with a fresh one over the same cluster:
// what a crash and a new leader look like (nothing kept in memory).
func (h *harness) restart() {
	h.t.Helper()
	engine := h.engine
	if engine == nil {
		engine = stubEngine{}
	}
	c, err := New(Config{Kube: h.kube, Pav: h.pav, Snapshots: h.snap, Engine: engine, KubeletDir: h.kubeletDir, PoolKubeletDirs: h.poolDirs})
	if err != nil {
		h.t.Fatal(err)
	}
	h.events = record.NewFakeRecorder(1000)
	c.recorder = h.events
	clock := func() time.Time { return h.now }
	c.claimBackoff.now, c.volumeBackoff.now, c.contentBackoff.now, c.groupContentBackoff.now = clock, clock, clock, clock
	h.c = c
	h.restarts++
}

// refresh fills the informer caches from the fake cluster.
func (h *harness) refresh() {
	h.t.Helper()
	ctx := context.Background()
	replace := func(store interface {
		Replace([]interface{}, string) error
	}, list []interface{}) {
		if err := store.Replace(list, ""); err != nil {
			h.t.Fatal(err)
		}
	}
	pvcs, _ := h.kube.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{})
	pvs, _ := h.kube.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	scs, _ := h.kube.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
	pods, _ := h.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	var l []interface{}
	for i := range pvcs.Items {
		l = append(l, &pvcs.Items[i])
	}
	replace(h.c.claimIndexer, l)
	l = nil
	for i := range pvs.Items {
		l = append(l, &pvs.Items[i])
	}
	replace(h.c.pvIndexer, l)
	l = nil
	for i := range scs.Items {
		l = append(l, &scs.Items[i])
	}
	replace(h.c.classIndexer, l)
	l = nil
	for i := range pods.Items {
		l = append(l, &pods.Items[i])
	}
	replace(h.c.podIndexer, l)
	nodes, _ := h.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	l = nil
	for i := range nodes.Items {
		l = append(l, &nodes.Items[i])
	}
	replace(h.c.nodeIndexer, l)
	caps, _ := h.kube.StorageV1().CSIStorageCapacities("").List(ctx, metav1.ListOptions{})
	l = nil
	for i := range caps.Items {
		l = append(l, &caps.Items[i])
	}
	replace(h.c.capacityIndexer, l)
	drivers, _ := h.kube.StorageV1().CSIDrivers().List(ctx, metav1.ListOptions{})
	l = nil
	for i := range drivers.Items {
		l = append(l, &drivers.Items[i])
	}
	replace(h.c.csiDriverIndexer, l)
	replace(h.c.provInformer.GetStore(), []interface{}{h.prov})
	contents, _ := h.snap.SnapshotV1().VolumeSnapshotContents().List(ctx, metav1.ListOptions{})
	l = nil
	for i := range contents.Items {
		l = append(l, &contents.Items[i])
	}
	replace(h.c.contentIndexer, l)
	groups, _ := h.snap.GroupsnapshotV1().VolumeGroupSnapshotContents().List(ctx, metav1.ListOptions{})
	l = nil
	for i := range groups.Items {
		l = append(l, &groups.Items[i])
	}
	replace(h.c.groupContentInformer.GetStore(), l)
}

// runPods plays kubelet and the node plugin: every PaV pod terminates with
// success and its results are collected; the creation pod wrote its handle
// and capacity.
func (h *harness) runPods() {
	h.t.Helper()
	ctx := context.Background()
	pods, _ := h.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	for i := range pods.Items {
		pod := &pods.Items[i]
		if protocol.Terminated(pod) {
			continue
		}
		pod.Status.Phase = corev1.PodSucceeded
		exit := int32(0)
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[protocol.AnnotationResultsCollected] = "true"
		if target, err := resource.ParseQuantity(pod.Annotations[protocol.AnnotationExpansionTarget]); err == nil && h.backendMax != nil && target.Cmp(*h.backendMax) > 0 {
			pod.Status.Phase, exit = corev1.PodFailed, 1
			pod.Annotations[protocol.AnnotationResultInfeasible] = "the pool holds at most " + h.backendMax.String()
		}
		if phaseOf(pod) == protocol.PhaseDeletion && h.failDeletions > 0 {
			h.failDeletions--
			pod.Status.Phase, exit = corev1.PodFailed, 1
		}
		if target := pod.Annotations[protocol.AnnotationModificationTarget]; target != "" && target == h.infeasibleClass {
			pod.Status.Phase, exit = corev1.PodFailed, 1
			pod.Annotations[protocol.AnnotationResultInfeasible] = "the backend has no such tier"
		}
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: exit, FinishedAt: metav1.NewTime(h.now)}}}}
		if phaseOf(pod) == protocol.PhaseSnapshotCreation {
			pod.Annotations[protocol.AnnotationResultSnapshotHandle] = resultSnapshotHandle + "\n"
			pod.Annotations[protocol.AnnotationResultRestoreSize] = resultCapacity
			if h.notReadyChecks > 0 {
				h.notReadyChecks--
				pod.Annotations[protocol.AnnotationResultReadyToUse] = "false\n"
			}
		}
		if phaseOf(pod) == protocol.PhaseGroupSnapshotCreation {
			h.groupSnapshotResults(pod)
		}
		if phaseOf(pod) == protocol.PhaseCreation {
			handle := resultHandle
			if h.handle != "" {
				handle = h.handle
			}
			pod.Annotations[protocol.AnnotationResultHandle] = handle + "\n"
			pod.Annotations[protocol.AnnotationResultCapacity] = resultCapacity
			if len(h.creationCapacities) > 0 {
				pod.Annotations[protocol.AnnotationResultCapacity], h.creationCapacities = h.creationCapacities[0], h.creationCapacities[1:]
			}
			if h.attributes != nil {
				pod.Annotations[protocol.AnnotationResultVolumeAttributes] = *h.attributes
			}
		}
		if _, err := h.kube.CoreV1().Pods(pod.Namespace).Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
			h.t.Fatal(err)
		}
	}
}

// step lets backoff pass, runs the pods, fills the caches and syncs the claim.
func (h *harness) step() error {
	h.now = h.now.Add(time.Hour)
	h.runPods()
	h.refresh()
	return h.c.syncClaim(context.Background(), testClaimKey)
}

// provisioned reports whether the claim's provisioning is complete: the PV
// exists, PaV's pods are gone and the claim has no PaV finalizer.
func (h *harness) provisioned() bool {
	ctx := context.Background()
	pvs, _ := h.kube.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	pods, _ := h.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	pvc, err := h.kube.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "claim", metav1.GetOptions{})
	return err == nil && len(pvs.Items) == 1 && len(pods.Items) == 0 && !protocol.HasFinalizer(pvc, protocol.FinalizerClaim)
}

// checkVolume checks the PV made from the creation pod's /pav files.
func (h *harness) checkVolume() {
	h.t.Helper()
	pv, err := h.kube.CoreV1().PersistentVolumes().Get(context.Background(), testVolume, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	if got := pv.Spec.CSI.VolumeHandle; got != resultHandle {
		h.t.Errorf("PV handle %q, want %q", got, resultHandle)
	}
	if got := pv.Spec.Capacity[corev1.ResourceStorage]; got.Cmp(resource.MustParse(resultCapacity)) != 0 {
		h.t.Errorf("PV capacity %s, want %s", got.String(), resultCapacity)
	}
	if ref := pv.Spec.ClaimRef; ref == nil || ref.UID != "claim-uid" {
		h.t.Errorf("PV claimRef %+v", ref)
	}
	if !protocol.HasFinalizer(pv, protocol.FinalizerVolume) {
		h.t.Errorf("PV finalizers %v", pv.Finalizers)
	}
}

// actions are the actions of both fake clientsets.
func (h *harness) actions() []k8stesting.Action {
	return append(h.kube.Actions(), h.snap.Actions()...)
}

func (h *harness) clearActions() {
	h.kube.ClearActions()
	h.snap.ClearActions()
}

// fakeOf is the fake clientset an action goes to.
func (h *harness) fakeOf(a k8stesting.Action) *k8stesting.Fake {
	if g := a.GetResource().Group; g == snapshotv1.GroupName || g == groupsnapshotv1.GroupName {
		return &h.snap.Fake
	}
	return &h.kube.Fake
}

func (h *harness) describe() string {
	var b strings.Builder
	for _, a := range h.actions() {
		if a.GetVerb() == "list" || a.GetVerb() == "watch" || a.GetVerb() == "get" {
			continue
		}
		fmt.Fprintf(&b, "  %s %s %s\n", a.GetVerb(), a.GetResource().Resource, objectName(a))
	}
	return b.String()
}

func objectName(a k8stesting.Action) string {
	switch a := a.(type) {
	case k8stesting.CreateAction:
		if m, ok := a.GetObject().(metav1.Object); ok {
			return m.GetName()
		}
	case k8stesting.UpdateAction:
		if m, ok := a.GetObject().(metav1.Object); ok {
			return m.GetName()
		}
	case k8stesting.DeleteAction:
		return a.GetName()
	case k8stesting.PatchAction:
		return a.GetName()
	}
	return ""
}

// writes are the actions of the controller that change the cluster (the
// test's own pod updates excluded).
func isControllerWrite(a k8stesting.Action) bool {
	switch a.GetVerb() {
	case "create", "update", "patch", "delete":
	default:
		return false
	}
	if a.GetResource().Resource == "events" {
		return false
	}
	if u, ok := a.(k8stesting.UpdateAction); ok && a.GetResource().Resource == "pods" {
		if p, ok := u.GetObject().(*corev1.Pod); ok && protocol.Terminated(p) && a.GetSubresource() == "" {
			return false // the test playing kubelet
		}
	}
	return true
}

func TestSyncClaimProvisionsThroughValidationAndCreation(t *testing.T) {
	h := newHarness(t, testObjects()...)

	// First sync: finalizer on the claim, the validation pod created.
	if err := h.step(); err != nil {
		t.Fatal(err)
	}
	pvc, _ := h.kube.CoreV1().PersistentVolumeClaims("ns").Get(context.Background(), "claim", metav1.GetOptions{})
	if !protocol.HasFinalizer(pvc, protocol.FinalizerClaim) {
		t.Fatalf("claim finalizers %v", pvc.Finalizers)
	}
	val, err := h.kube.CoreV1().Pods("pav-pods").Get(context.Background(), protocol.PodName(protocol.PhaseValidation, "claim-uid"), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("no validation pod: %v\n%s", err, h.describe())
	}
	if val.Labels["app"] != "validate" || val.Annotations[protocol.AnnotationClaim] != testClaimKey || val.Annotations[protocol.AnnotationClassSnapshot] == "" {
		t.Errorf("validation pod labels %v annotations %v", val.Labels, val.Annotations)
	}

	// Validation done: the creation pod replaces it, with the evaluation recorded.
	if err := h.step(); err != nil {
		t.Fatal(err)
	}
	cre, err := h.kube.CoreV1().Pods("pav-pods").Get(context.Background(), protocol.PodName(protocol.PhaseCreation, "claim-uid"), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("no creation pod: %v\n%s", err, h.describe())
	}
	if cre.Annotations[protocol.AnnotationCreationConfig] == "" {
		t.Errorf("creation pod annotations %v", cre.Annotations)
	}
	if _, err := h.kube.CoreV1().Pods("pav-pods").Get(context.Background(), val.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("validation pod not deleted: %v", err)
	}

	// Creation done: PV from the pod's /pav files, pods gone, finalizer gone.
	provisioning.run(t, h, 1)
	if !strings.Contains(strings.Join(drain(h.events), "\n"), reasonProvisioningSucceeded) {
		t.Errorf("no %s event", reasonProvisioningSucceeded)
	}
}

func drain(r *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// A scenario is a piece of the protocol driven to its end: setup brings the
// cluster to its start (its writes are not counted), step is one round of
// the controller's work, done says whether the end is reached, and check
// looks at the end state.
type scenario struct {
	setup func(h *harness)
	step  func(h *harness) error
	done  func(h *harness) bool
	check func(h *harness)
	// once is the pod phase whose pod must run exactly once, even under
	// faults (its work, e.g. creating or deleting the volume, is not to be
	// done twice or skipped).
	once protocol.Phase
	// attempts is how many pods of phase once the scenario runs, each once
	// (0: one).
	attempts int
	// ranInSetup: the once pod ran during setup, so it must not run again.
	ranInSetup bool
	// objects is the cluster the scenario starts from (nil: testObjects).
	objects func() []runtime.Object
}

func (sc scenario) harness(t *testing.T) *harness {
	if sc.objects == nil {
		return newHarness(t, testObjects()...)
	}
	return newHarness(t, sc.objects()...)
}

func (sc scenario) run(t *testing.T, h *harness, steps int) {
	t.Helper()
	for i := 0; i < steps && !sc.done(h); i++ {
		_ = sc.step(h) // errors are retried, as the workqueue would
	}
	if !sc.done(h) {
		t.Fatalf("not done after %d steps:\n%s", steps, h.describe())
	}
	sc.check(h)
}

// testEveryFault runs the scenario cleanly, then once per controller write of
// the clean run and per fault: a crash just before the write and just after
// it (the controller is replaced by a fresh one, with nothing in memory), and
// a conflict. Each run must reach the same end, running sc.once's pod once.
func testEveryFault(t *testing.T, sc scenario) {
	clean := sc.harness(t)
	sc.setup(clean)
	clean.clearActions()
	sc.run(t, clean, 10)
	var writes, updates int
	for _, a := range clean.actions() {
		if isControllerWrite(a) {
			writes++
			if isUpdate(a) {
				updates++
			}
		}
	}
	if writes < 3 {
		t.Fatalf("only %d writes in a clean run:\n%s", writes, clean.describe())
	}

	// A fault decides what the n-th write does; done says whether the write
	// took effect.
	type fault func(h *harness, a k8stesting.Action) (done bool, err error)
	injected := errors.New("injected: the controller died here")
	faults := map[string]fault{
		"crash before": func(h *harness, a k8stesting.Action) (bool, error) {
			return false, apierrors.NewInternalError(injected)
		},
		"crash after": func(h *harness, a k8stesting.Action) (bool, error) {
			// Through the whole reactor chain but this one, as the write would have gone.
			for _, r := range h.fakeOf(a).ReactionChain[1:] {
				if !r.Handles(a) {
					continue
				}
				if handled, _, err := r.React(a); handled {
					if err != nil {
						h.t.Fatalf("performing %s %s: %v", a.GetVerb(), a.GetResource().Resource, err)
					}
					break
				}
			}
			return true, apierrors.NewInternalError(injected)
		},
		"conflict": func(h *harness, a k8stesting.Action) (bool, error) {
			return false, apierrors.NewConflict(schema.GroupResource{Resource: a.GetResource().Resource}, objectName(a), errors.New("injected conflict"))
		},
	}
	for _, kind := range []string{"crash before", "crash after", "conflict"} {
		fault := faults[kind]
		// Conflicts answer updates (optimistic concurrency); a create or a
		// delete with a UID precondition has its own answers.
		faulty, count := isControllerWrite, writes
		if kind == "conflict" {
			faulty, count = func(a k8stesting.Action) bool { return isControllerWrite(a) && isUpdate(a) }, updates
		}
		for n := 1; n <= count; n++ {
			t.Run(fmt.Sprintf("%s write %d", kind, n), func(t *testing.T) {
				h := sc.harness(t)
				sc.setup(h)
				h.clearActions()
				seen, injected, refused := 0, false, 0
				reactor := func(a k8stesting.Action) (bool, runtime.Object, error) {
					if injected || !faulty(a) {
						return false, nil, nil
					}
					if seen++; seen < n {
						return false, nil, nil
					}
					injected = true
					done, err := fault(h, a)
					if isPodCreate(a, sc.once) && !done && !sc.ranInSetup {
						refused = 1 // does not count as run
					}
					return true, nil, err
				}
				h.kube.PrependReactor("*", "*", reactor)
				h.snap.PrependReactor("*", "*", reactor)
				for i := 0; i < 20 && !injected; i++ {
					_ = sc.step(h)
				}
				if !injected {
					t.Fatalf("write %d never happened:\n%s", n, h.describe())
				}
				if strings.HasPrefix(kind, "crash") {
					h.restart()
				}
				sc.run(t, h, 20)
				runs, want := -refused, max(sc.attempts, 1)
				if sc.ranInSetup {
					want = 0
				}
				for _, a := range h.actions() {
					if isPodCreate(a, sc.once) {
						runs++
					}
				}
				if runs != want {
					t.Errorf("%d %s pods created, want %d:\n%s", runs, sc.once, want, h.describe())
				}
			})
		}
	}
}

var provisioning = scenario{
	setup: func(h *harness) {},
	step:  (*harness).step,
	done:  (*harness).provisioned,
	check: (*harness).checkVolume,
	once:  protocol.PhaseCreation,
}

// TestSyncClaimSurvivesAFaultAtEveryWrite: provisioning under faults; a
// volume is created once, and its PV made.
func TestSyncClaimSurvivesAFaultAtEveryWrite(t *testing.T) {
	testEveryFault(t, provisioning)
}

// deletion starts from a provisioned volume whose claim was deleted (the PV
// controller marked the PV Released) and ends when the PV is gone.
var deletion = scenario{
	setup: func(h *harness) {
		h.t.Helper()
		provisioning.run(h.t, h, 10)
		ctx := context.Background()
		if err := h.kube.CoreV1().PersistentVolumeClaims("ns").Delete(ctx, "claim", metav1.DeleteOptions{}); err != nil {
			h.t.Fatal(err)
		}
		pv, err := h.kube.CoreV1().PersistentVolumes().Get(ctx, testVolume, metav1.GetOptions{})
		if err != nil {
			h.t.Fatal(err)
		}
		pv.Status.Phase = corev1.VolumeReleased
		if _, err := h.kube.CoreV1().PersistentVolumes().UpdateStatus(ctx, pv, metav1.UpdateOptions{}); err != nil {
			h.t.Fatal(err)
		}
	},
	step: func(h *harness) error {
		h.now = h.now.Add(time.Hour)
		h.runPods()
		h.refresh()
		return h.c.syncVolume(context.Background(), testVolume)
	},
	done: func(h *harness) bool {
		ctx := context.Background()
		_, err := h.kube.CoreV1().PersistentVolumes().Get(ctx, testVolume, metav1.GetOptions{})
		pods, _ := h.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		return apierrors.IsNotFound(err) && len(pods.Items) == 0
	},
	check: func(h *harness) {},
	once:  protocol.PhaseDeletion,
}

// TestSyncVolumeSurvivesAFaultAtEveryWrite: deletion under faults; the
// deletion pod runs once and the PV goes, finalizer and all.
// Every pod the controller creates keeps /pav under the kubelet directory it
// was given, where the node plugin of a node with that kubelet root reads it.
func TestPodsKeepPavUnderTheKubeletDir(t *testing.T) {
	const kubeletDir = "/var/lib/k0s/kubelet"
	root := protocol.PodDirRoot(kubeletDir) + "/"
	for name, sc := range map[string]scenario{"claim pods": deletedDuringCreation, "volume pods": deletion} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, testObjects()...)
			h.kubeletDir = kubeletDir
			h.restart()
			created := map[protocol.Phase]string{}
			h.kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
				pod := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
				for _, v := range pod.Spec.Volumes {
					if v.Name == protocol.PavVolumeName && v.HostPath != nil {
						created[phaseOf(pod)] = v.HostPath.Path
					}
				}
				return false, nil, nil
			})
			sc.setup(h)
			sc.run(t, h, 20)
			if created[sc.once] == "" {
				t.Fatalf("no %s pod with a /pav host directory created: %v", sc.once, created)
			}
			for phase, dir := range created {
				if !strings.HasPrefix(dir, root) || strings.Contains(strings.TrimPrefix(dir, root), "/") {
					t.Errorf("the %s pod's /pav is %s, not a directory of %s", phase, dir, root)
				}
			}
		})
	}
}

func TestSyncVolumeSurvivesAFaultAtEveryWrite(t *testing.T) {
	testEveryFault(t, deletion)
}

func isPodCreate(a k8stesting.Action, phase protocol.Phase) bool {
	c, ok := a.(k8stesting.CreateAction)
	if !ok || a.GetVerb() != "create" || a.GetResource().Resource != "pods" {
		return false
	}
	p, ok := c.GetObject().(*corev1.Pod)
	return ok && phaseOf(p) == phase
}

// deletedDuringCreation: the claim is deleted while its creation pod runs;
// the creation is allowed to end, then reverted by one deletion pod, and the
// claim goes without a PV.
var deletedDuringCreation = scenario{
	setup: func(h *harness) {
		h.t.Helper()
		ctx := context.Background()
		for i := 0; i < 5; i++ {
			if _, err := h.kube.CoreV1().Pods("pav-pods").Get(ctx, protocol.PodName(protocol.PhaseCreation, "claim-uid"), metav1.GetOptions{}); err == nil {
				break
			}
			_ = h.step()
		}
		if err := h.kube.CoreV1().PersistentVolumeClaims("ns").Delete(ctx, "claim", metav1.DeleteOptions{}); err != nil {
			h.t.Fatal(err)
		}
	},
	step: (*harness).step,
	done: func(h *harness) bool {
		ctx := context.Background()
		_, err := h.kube.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "claim", metav1.GetOptions{})
		pods, _ := h.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		return apierrors.IsNotFound(err) && len(pods.Items) == 0
	},
	check: func(h *harness) {
		pvs, _ := h.kube.CoreV1().PersistentVolumes().List(context.Background(), metav1.ListOptions{})
		if len(pvs.Items) != 0 {
			h.t.Errorf("%d PVs left", len(pvs.Items))
		}
	},
	once: protocol.PhaseDeletion,
}

func TestClaimDeletedDuringCreationSurvivesAFaultAtEveryWrite(t *testing.T) {
	testEveryFault(t, deletedDuringCreation)
}

// withFailedDeletion is sc with its first deletion pod failing: the pod
// goes, the failure is reported, and a second deletion pod runs after the
// backoff.
func withFailedDeletion(sc scenario) scenario {
	setup := sc.setup
	sc.setup = func(h *harness) {
		setup(h)
		h.failDeletions = 1
	}
	check := sc.check
	sc.check = func(h *harness) {
		check(h)
		if h.failDeletions != 0 {
			h.t.Errorf("the failing deletion pod never ran")
		}
	}
	sc.attempts = 2
	return sc
}

func TestFailedVolumeDeletionSurvivesAFaultAtEveryWrite(t *testing.T) {
	testEveryFault(t, withFailedDeletion(deletion))
}

func TestFailedClaimDeletionSurvivesAFaultAtEveryWrite(t *testing.T) {
	testEveryFault(t, withFailedDeletion(deletedDuringCreation))
}

func isUpdate(a k8stesting.Action) bool { return a.GetVerb() == "update" || a.GetVerb() == "patch" }

// boundAsking provisions the claim, binds it and has it ask for size.
func (h *harness) boundAsking(size string) {
	h.t.Helper()
	provisioning.run(h.t, h, 10)
	ctx := context.Background()
	pvcs := h.kube.CoreV1().PersistentVolumeClaims("ns")
	pvc, err := pvcs.Get(ctx, "claim", metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	pvc.Spec.VolumeName = testVolume // the PV controller binds
	pvc.Status.Phase = corev1.ClaimBound
	pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(resultCapacity)}
	if _, err = pvcs.UpdateStatus(ctx, pvc, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
	h.request(size)
}

// request changes the claim's request as its user does: through the
// tracker, so that it is neither a controller write nor a fault's target.
func (h *harness) request(size string) {
	h.t.Helper()
	gvr := corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")
	obj, err := h.kube.Tracker().Get(gvr, "ns", "claim")
	if err != nil {
		h.t.Fatal(err)
	}
	pvc := obj.(*corev1.PersistentVolumeClaim).DeepCopy()
	pvc.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse(size)
	if err := h.kube.Tracker().Update(gvr, pvc, "ns"); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) claim() *corev1.PersistentVolumeClaim {
	h.t.Helper()
	pvc, err := h.kube.CoreV1().PersistentVolumeClaims("ns").Get(context.Background(), "claim", metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return pvc
}

// expandedTo: the PV and the claim's status say size, with no resize under
// way and no pod left.
func expandedTo(size string) func(h *harness) bool {
	return func(h *harness) bool {
		ctx := context.Background()
		pv, err := h.kube.CoreV1().PersistentVolumes().Get(ctx, testVolume, metav1.GetOptions{})
		pvc, err2 := h.kube.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "claim", metav1.GetOptions{})
		pods, _ := h.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		want := resource.MustParse(size)
		return err == nil && err2 == nil && len(pods.Items) == 0 &&
			pv.Spec.Capacity.Storage().Cmp(want) == 0 && pvc.Status.Capacity.Storage().Cmp(want) == 0 &&
			len(pvc.Status.AllocatedResourceStatuses) == 0 && len(pvc.Status.Conditions) == 0
	}
}

// expansion starts from a provisioned volume bound to its claim, whose
// request then grows to 5Gi, and ends when the PV and the claim's status
// say 5Gi with no resize under way.
var expansion = scenario{
	setup: func(h *harness) { h.boundAsking("5Gi") },
	step:  (*harness).step,
	done:  expandedTo("5Gi"),
	check: func(h *harness) {},
	once:  protocol.PhaseExpansion,
}

func TestExpansionSurvivesAFaultAtEveryWrite(t *testing.T) {
	testEveryFault(t, expansion)
}

// limitedEngine is stubEngine for a provisioner whose volumeValidation
// allows at most max, checked by templating as the production engine does.
type limitedEngine struct {
	stubEngine
	max resource.Quantity
}

func (e limitedEngine) Validation(_ context.Context, _ *v1alpha1.PavProvisioner, req templating.DynamicRequest) (*ValidationConfig, error) {
	vr, err := templating.DynamicVolumeRequest(req.PVC)
	if err != nil {
		return nil, err
	}
	vc := templating.ValidationConfig{VolumeModes: []corev1.PersistentVolumeMode{corev1.PersistentVolumeFilesystem},
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, MaxCapacity: &e.max}
	return &ValidationConfig{Unsatisfied: vc.Check(vr), PodTemplate: stubPod("validate")}, nil
}

// infeasibleRecorded: the claim's status records growing to size as
// infeasible, for reason.
func (h *harness) infeasibleRecorded(size, reason string) bool {
	c := infeasibleRecord(h.claim(), resource.MustParse(size))
	return c != nil && c.Status == corev1.ConditionTrue && c.Reason == reason
}

// podsCreated lists the pods of phase the controller created, in order.
func (h *harness) podsCreated(phase protocol.Phase) []*corev1.Pod {
	var out []*corev1.Pod
	for _, a := range h.kube.Actions() {
		if isPodCreate(a, phase) {
			out = append(out, a.(k8stesting.CreateAction).GetObject().(*corev1.Pod))
		}
	}
	return out
}

// notAllowedThenLowered: a bound claim asks for 5Ti of a provisioner that
// allows 10Gi; once its status says the expansion is infeasible, the user
// lowers the request to 5Gi, which is expanded. One expansion pod runs, for
// 5Gi.
var notAllowedThenLowered = scenario{
	setup: func(h *harness) {
		h.engine = limitedEngine{max: resource.MustParse("10Gi")}
		h.restart()
		h.boundAsking("5Ti")
	},
	step: func(h *harness) error {
		err := h.step()
		if h.claim().Spec.Resources.Requests.Storage().Cmp(resource.MustParse("5Ti")) == 0 && h.infeasibleRecorded("5Ti", infeasibleNotAllowed) {
			h.request("5Gi")
		}
		return err
	},
	done: expandedTo("5Gi"),
	check: func(h *harness) {
		for _, pod := range h.podsCreated(protocol.PhaseExpansion) {
			if target := pod.Annotations[protocol.AnnotationExpansionTarget]; target != "5Gi" {
				h.t.Errorf("an expansion pod for %s", target)
			}
		}
	},
	once: protocol.PhaseExpansion,
}

func TestExpansionNotAllowedThenLoweredSurvivesAFaultAtEveryWrite(t *testing.T) {
	testEveryFault(t, notAllowedThenLowered)
}

// podInfeasibleThenLowered: the expansion pod finds 5Gi infeasible (the
// backend holds 3Gi); once the claim's status says so, the user lowers the
// request to 3Gi. Two expansion pods run, one per size.
var podInfeasibleThenLowered = scenario{
	setup: func(h *harness) {
		h.backendMax = ptr(resource.MustParse("3Gi"))
		h.boundAsking("5Gi")
	},
	step: func(h *harness) error {
		err := h.step()
		if h.claim().Spec.Resources.Requests.Storage().Cmp(resource.MustParse("5Gi")) == 0 && h.infeasibleRecorded("5Gi", infeasibleByPod) {
			h.request("3Gi")
		}
		return err
	},
	done:     expandedTo("3Gi"),
	check:    func(h *harness) {},
	once:     protocol.PhaseExpansion,
	attempts: 2,
}

func TestExpansionPodInfeasibleThenLoweredSurvivesAFaultAtEveryWrite(t *testing.T) {
	testEveryFault(t, podInfeasibleThenLowered)
}

func ptr[T any](v T) *T { return &v }

// An expansion the provisioner does not allow gets external-resizer's
// infeasible status and one Event, runs no pod and is not retried, however
// often the claim is synced; lowering the request expands to the new size.
func TestExpansionNotAllowed(t *testing.T) {
	for _, tt := range []struct {
		name, request, limit, message string
	}{
		{"above the provisioner's maxCapacity", "5Ti", "", "above the maximum capacity 10Gi"},
		{"above the claim's limit", "5Gi", "4Gi", "exceeds the claim's limit of 4Gi"},
		{"more bytes than an int64 holds", "1e19", "", "too large"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, testObjects()...)
			h.engine = limitedEngine{max: resource.MustParse("10Gi")}
			h.restart()
			h.boundAsking(tt.request)
			if tt.limit != "" {
				pvc := h.claim()
				pvc.Spec.Resources.Limits = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(tt.limit)}
				if err := h.kube.Tracker().Update(corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims"), pvc, "ns"); err != nil {
					t.Fatal(err)
				}
			}
			h.kube.ClearActions()
			drain(h.events)
			for i := 0; i < 5; i++ {
				if err := h.step(); err != nil {
					t.Fatalf("sync %d: %v (an infeasible expansion is not an error to retry)", i, err)
				}
			}
			if pods := h.podsCreated(protocol.PhaseExpansion); len(pods) != 0 {
				t.Errorf("%d expansion pods created:\n%s", len(pods), h.describe())
			}
			pvc := h.claim()
			st := pvc.Status
			if st.AllocatedResourceStatuses[corev1.ResourceStorage] != corev1.PersistentVolumeClaimControllerResizeInfeasible ||
				st.AllocatedResources.Storage().Cmp(resource.MustParse(tt.request)) != 0 {
				t.Errorf("claim status %+v, want allocatedResources %s, ControllerResizeInfeasible", st, tt.request)
			}
			c := infeasibleRecord(pvc, resource.MustParse(tt.request))
			if c == nil || c.Reason != infeasibleNotAllowed || !strings.Contains(c.Message, tt.message) || len(st.Conditions) != 1 {
				t.Errorf("conditions %+v, want one ControllerResizeError saying %q", st.Conditions, tt.message)
			}
			if st.Capacity.Storage().Cmp(resource.MustParse(resultCapacity)) != 0 {
				t.Errorf("capacity %s, want %s", st.Capacity.Storage(), resultCapacity)
			}
			var failed []string
			for _, e := range drain(h.events) {
				if strings.Contains(e, reasonResizeFailed) {
					failed = append(failed, e)
				}
			}
			if len(failed) != 1 || !strings.Contains(failed[0], tt.message) {
				t.Errorf("%s events %q, want one saying %q", reasonResizeFailed, failed, tt.message)
			}
			if d := h.c.claimBackoff.wait(testClaimKey); d != 0 {
				t.Errorf("the claim is backed off for %v, want no wait: nothing failed to retry", d)
			}

			// Lowering the request (Kubernetes' recovery from a failed expansion) expands to it.
			if tt.limit != "" {
				h.request("3Gi")
			} else {
				h.request("5Gi")
			}
			want := h.claim().Spec.Resources.Requests.Storage().String()
			(scenario{step: (*harness).step, done: expandedTo(want), check: func(*harness) {}}).run(t, h, 10)
			if pods := h.podsCreated(protocol.PhaseExpansion); len(pods) != 1 || pods[0].Annotations[protocol.AnnotationExpansionTarget] != want {
				t.Errorf("expansion pods %d, want one for %s", len(pods), want)
			}
		})
	}
}

// A size recorded as not allowed is judged again: once the provisioner
// allows it, the expansion runs.
func TestExpansionGoesOnceTheProvisionerAllowsIt(t *testing.T) {
	h := newHarness(t, testObjects()...)
	h.engine = limitedEngine{max: resource.MustParse("10Gi")}
	h.restart()
	h.boundAsking("20Gi")
	for i := 0; i < 3; i++ {
		_ = h.step()
	}
	if !h.infeasibleRecorded("20Gi", infeasibleNotAllowed) {
		t.Fatalf("claim status %+v, want 20Gi recorded infeasible", h.claim().Status)
	}
	h.engine = limitedEngine{max: resource.MustParse("1Ti")} // the admin raises maxCapacity
	h.restart()
	(scenario{step: (*harness).step, done: expandedTo("20Gi"), check: func(*harness) {}}).run(t, h, 10)
}

// A size the expansion pod found infeasible is recorded as external-resizer
// does, and no pod runs for it again however often the claim is synced.
func TestExpansionPodInfeasibleIsNotRetried(t *testing.T) {
	h := newHarness(t, testObjects()...)
	h.backendMax = ptr(resource.MustParse("3Gi"))
	h.boundAsking("5Gi")
	h.kube.ClearActions()
	drain(h.events)
	for i := 0; i < 6; i++ {
		if err := h.step(); err != nil {
			t.Fatalf("sync %d: %v", i, err)
		}
	}
	if pods := h.podsCreated(protocol.PhaseExpansion); len(pods) != 1 {
		t.Errorf("%d expansion pods created, want 1:\n%s", len(pods), h.describe())
	}
	if !h.infeasibleRecorded("5Gi", infeasibleByPod) {
		t.Errorf("claim status %+v, want 5Gi recorded infeasible by the pod", h.claim().Status)
	}
	if c := infeasibleRecord(h.claim(), resource.MustParse("5Gi")); c == nil || !strings.Contains(c.Message, "the pool holds at most 3Gi") {
		t.Errorf("condition %+v, want the pod's reason", c)
	}
	var failed []string
	for _, e := range drain(h.events) {
		if strings.Contains(e, reasonResizeFailed) {
			failed = append(failed, e)
		}
	}
	if len(failed) != 1 || !strings.Contains(failed[0], "cannot grow to 5Gi: the pool holds at most 3Gi") {
		t.Errorf("%s events %q, want one with the pod's reason", reasonResizeFailed, failed)
	}
	pods, _ := h.kube.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	if len(pods.Items) != 0 {
		t.Errorf("%d pods left", len(pods.Items))
	}
}

// A PV this controller created that its cache has not seen yet (the watch
// lags): the next sync must not start a second attempt, whose pods would
// create a second volume; it finishes the claim instead.
func TestSyncClaimRunsNoPodForAVolumeTheCacheLacks(t *testing.T) {
	h := newHarness(t, testObjects()...)
	ctx := context.Background()
	h.refresh()
	pvc, err := h.kube.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "claim", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := h.kube.StorageV1().StorageClasses().Get(ctx, "sc", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv, err := protocol.BuildVolume(protocol.VolumeSpec{Provisioner: testProvisioner, PVC: pvc, Class: sc, Handle: resultHandle, Capacity: resource.MustParse(resultCapacity)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.kube.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := h.c.syncClaim(ctx, testClaimKey); err != nil { // caches without the PV
		t.Fatal(err)
	}
	if !h.provisioned() {
		t.Errorf("the claim is not left alone with its one volume:\n%s", h.describe())
	}
}

// The PVs' watch lags the pods' one (after an API server restart, say): the
// cache still holds the released PV whose deletion just ended, while its
// deletion pod is already gone from the pods' cache. The next sync must not
// run the deletion a second time.
func TestSyncVolumeRunsNoDeletionPodForAVolumeTheCacheStillHas(t *testing.T) {
	h := newHarness(t, testObjects()...)
	deletion.setup(h)
	h.refresh()
	stale, err := h.c.volumes.Get(testVolume)
	if err != nil {
		t.Fatal(err)
	}
	stale = stale.DeepCopy()
	deletion.run(t, h, 20)
	created := 0
	for _, a := range h.kube.Actions() {
		if isPodCreate(a, protocol.PhaseDeletion) {
			created++
		}
	}
	if created != 1 {
		t.Fatalf("%d deletion pods before the stale sync, want 1:\n%s", created, h.describe())
	}

	h.refresh() // the pods' cache is current: no deletion pod
	if err := h.c.pvIndexer.Add(stale); err != nil {
		t.Fatal(err)
	}
	h.kube.ClearActions()
	if err := h.c.syncVolume(context.Background(), testVolume); err != nil {
		t.Fatal(err)
	}
	for _, a := range h.kube.Actions() {
		if isPodCreate(a, protocol.PhaseDeletion) {
			t.Errorf("a second deletion pod for a volume already deleted:\n%s", h.describe())
		}
	}
}

// requestRecorder is stubEngine that records the requests of creations and
// deletions.
type requestRecorder struct {
	stubEngine
	creations, requests []templating.DynamicRequest
}

func (e *requestRecorder) Creation(ctx context.Context, p *v1alpha1.PavProvisioner, r templating.DynamicRequest) (*templating.CreationConfig, error) {
	e.creations = append(e.creations, r)
	return e.stubEngine.Creation(ctx, p, r)
}

func (e *requestRecorder) Deletion(ctx context.Context, p *v1alpha1.PavProvisioner, r templating.DynamicRequest) (*corev1.PodTemplateSpec, error) {
	e.requests = append(e.requests, r)
	return e.stubEngine.Deletion(ctx, p, r)
}

// A creation pod's /pav/handle that is not a file name fails the creation
// with an Event, and the deletion pod reverting it does not get it: its
// template would remove <root>/.. .
func TestUnsafeHandleFailsCreationAndNeverReachesTheRevert(t *testing.T) {
	for _, handle := range []string{".", "..", "/", "../../etc"} {
		t.Run(handle, func(t *testing.T) {
			h := newHarness(t, testObjects()...)
			rec := &requestRecorder{}
			h.engine, h.handle = rec, handle
			h.restart()
			for i := 0; i < 4 && len(rec.requests) == 0; i++ {
				_ = h.step()
			}
			if len(rec.requests) != 1 {
				t.Fatalf("%d deletion evaluations, want 1:\n%s", len(rec.requests), h.describe())
			}
			if got := rec.requests[0].Handle; got != "" {
				t.Errorf("the deletion context has handle %q", got)
			}
			events := strings.Join(drain(h.events), "\n")
			if !strings.Contains(events, reasonProvisioningFailed) || !strings.Contains(events, "templates use handles as paths") {
				t.Errorf("events:\n%s", events)
			}
			if pvs, _ := h.kube.CoreV1().PersistentVolumes().List(context.Background(), metav1.ListOptions{}); len(pvs.Items) != 0 {
				t.Errorf("a PV was created: %+v", pvs.Items)
			}
		})
	}
}

// The StorageClass's secret references (parameters under csi.storage.k8s.io/)
// are in no snapshot PaV writes on pods and PVs, yet the creation and
// deletion contexts have the whole class while it exists.
func TestSecretParametersStayOutOfSnapshots(t *testing.T) {
	const secret = "csi.storage.k8s.io/provisioner-secret-name"
	objs := testObjects()
	objs[0].(*storagev1.StorageClass).Parameters = map[string]string{"k": "v", secret: "creds"}
	h := newHarness(t, objs...)
	rec := &requestRecorder{}
	h.engine = rec
	h.restart()
	written := map[string]string{}
	h.kube.PrependReactor("create", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if m, ok := a.(k8stesting.CreateAction).GetObject().(metav1.Object); ok {
			for k, v := range m.GetAnnotations() {
				written[a.GetResource().Resource+" "+m.GetName()+" "+k] = v
			}
		}
		return false, nil, nil
	})
	deletion.setup(h)
	if len(rec.creations) == 0 || rec.creations[len(rec.creations)-1].Class.Parameters[secret] != "creds" {
		t.Errorf("creation context class: %+v", rec.creations)
	}
	deletion.run(t, h, 20)
	if len(rec.requests) != 1 || rec.requests[0].Class.Parameters[secret] != "creds" || rec.requests[0].Class.Parameters["k"] != "v" {
		t.Errorf("deletion context class: %+v", rec.requests)
	}
	if len(written) == 0 {
		t.Fatal("no annotations written")
	}
	for k, v := range written {
		if strings.Contains(v, "csi.storage.k8s.io") || strings.Contains(v, "creds") {
			t.Errorf("%s carries a secret reference: %s", k, v)
		}
	}

	// The class is gone: the deletion context has what the snapshot kept.
	h = newHarness(t, objs...)
	rec = &requestRecorder{}
	h.engine = rec
	h.restart()
	deletion.setup(h)
	if err := h.kube.StorageV1().StorageClasses().Delete(context.Background(), "sc", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deletion.run(t, h, 20)
	if len(rec.requests) != 1 || rec.requests[0].Class.Parameters["k"] != "v" || rec.requests[0].Class.Parameters[secret] != "" {
		t.Errorf("deletion context class without the class: %+v", rec.requests)
	}
}

// A failed pod's log reaches the claim's Events only if its provisioner
// opted in with spec.podLogsInEvents: logs may hold secrets.
func TestPodLogsInEventsOnlyWhenOptedIn(t *testing.T) {
	for _, optIn := range []bool{false, true} {
		t.Run(fmt.Sprintf("podLogsInEvents %v", optIn), func(t *testing.T) {
			h := newHarness(t, testObjects()...)
			h.prov.Spec.PodLogsInEvents = optIn
			ctx := context.Background()
			h.refresh()
			if err := h.c.syncClaim(ctx, testClaimKey); err != nil {
				t.Fatal(err)
			}
			pod, err := h.kube.CoreV1().Pods("pav-pods").Get(ctx, protocol.PodName(protocol.PhaseValidation, "claim-uid"), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			pod.Status.Phase = corev1.PodFailed
			pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{
				Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, FinishedAt: metav1.NewTime(h.now)}}}}
			pod.Annotations[protocol.AnnotationResultsCollected] = "true"
			if _, err := h.kube.CoreV1().Pods(pod.Namespace).Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			h.refresh()
			_ = h.c.syncClaim(ctx, testClaimKey)
			events := strings.Join(drain(h.events), "\n")
			if !strings.Contains(events, `container "c" exited with code 1`) {
				t.Fatalf("events:\n%s", events)
			}
			if got := strings.Contains(events, "fake logs"); got != optIn {
				t.Errorf("log in the Events: %v, want %v:\n%s", got, optIn, events)
			}
		})
	}
}

// creationPodDeletedByTenant: the creation pod finished (its results
// collected), then a tenant deleted it before the controller made the PV.
// PaV's finalizer keeps it: the PV is made from its results, with no second
// creation, and the pod goes.
var creationPodDeletedByTenant = scenario{
	setup: func(h *harness) {
		h.t.Helper()
		ctx := context.Background()
		name := protocol.PodName(protocol.PhaseCreation, "claim-uid")
		for i := 0; i < 5; i++ {
			if _, err := h.kube.CoreV1().Pods("pav-pods").Get(ctx, name, metav1.GetOptions{}); err == nil {
				break
			}
			_ = h.step()
		}
		h.runPods()
		if err := h.kube.CoreV1().Pods("pav-pods").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			h.t.Fatal(err)
		}
		pod, err := h.kube.CoreV1().Pods("pav-pods").Get(ctx, name, metav1.GetOptions{})
		if err != nil || pod.DeletionTimestamp == nil {
			h.t.Fatalf("the deleted creation pod: %v, %+v", err, pod)
		}
	},
	step:       (*harness).step,
	done:       (*harness).provisioned,
	check:      (*harness).checkVolume,
	once:       protocol.PhaseCreation,
	ranInSetup: true,
}

func TestCreationPodDeletedByTenantSurvivesAFaultAtEveryWrite(t *testing.T) {
	testEveryFault(t, creationPodDeletedByTenant)
}

// A creation pod deleted before it was scheduled never runs: it counts as a
// failed creation (reverted by the deletion pod, then retried), not as a pod
// to wait for forever.
func TestCreationPodDeletedBeforeScheduling(t *testing.T) {
	h := newHarness(t, testObjects()...)
	ctx := context.Background()
	name := protocol.PodName(protocol.PhaseCreation, "claim-uid")
	h.refresh()
	for i := 0; i < 3; i++ { // the validation pod, then the creation pod
		h.now = h.now.Add(time.Hour)
		if i == 1 {
			h.runPods()
		}
		h.refresh()
		_ = h.c.syncClaim(ctx, testClaimKey)
		if _, err := h.kube.CoreV1().Pods("pav-pods").Get(ctx, name, metav1.GetOptions{}); err == nil {
			break
		}
	}
	if err := h.kube.CoreV1().Pods("pav-pods").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.refresh()
	_ = h.c.syncClaim(ctx, testClaimKey)
	if _, err := h.kube.CoreV1().Pods("pav-pods").Get(ctx, protocol.PodName(protocol.PhaseDeletion, "claim-uid"), metav1.GetOptions{}); err != nil {
		t.Fatalf("no deletion pod reverting the creation: %v\n%s", err, h.describe())
	}
	if !strings.Contains(strings.Join(drain(h.events), "\n"), "was deleted before it was scheduled") {
		t.Error("no Event says why the creation failed")
	}
	provisioning.run(t, h, 20)
}

// A class's csi.storage.k8s.io/fstype becomes the PV's fsType (so the
// CSIDriver's fsGroupPolicy applies), and is no volume attribute.
func TestProvisionedVolumeGetsTheClassFSType(t *testing.T) {
	objs := testObjects()
	objs[0].(*storagev1.StorageClass).Parameters = map[string]string{protocol.ParameterFSType: "ext4", "k": "v"}
	h := newHarness(t, objs...)
	for i := 0; i < 10 && !h.provisioned(); i++ {
		_ = h.step()
	}
	pv, err := h.kube.CoreV1().PersistentVolumes().Get(context.Background(), testVolume, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("not provisioned: %v\n%s", err, h.describe())
	}
	if pv.Spec.CSI.FSType != "ext4" || pv.Spec.CSI.VolumeAttributes[protocol.ParameterFSType] != "" {
		t.Errorf("PV fsType %q, attributes %v; want fsType ext4, not an attribute", pv.Spec.CSI.FSType, pv.Spec.CSI.VolumeAttributes)
	}
}
