package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	mount "k8s.io/mount-utils"

	"github.com/albertofaria/pav/crds/v1alpha1"
	pavcsi "github.com/albertofaria/pav/csi"
	"github.com/albertofaria/pav/internal/testwait"
	"github.com/albertofaria/pav/kubeclient"
	"github.com/albertofaria/pav/kubeclient/fakeapi"
	"github.com/albertofaria/pav/kubeclient/generated/clientset/fake"
	"github.com/albertofaria/pav/nodeagent/mounts"
	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/templating"
)

// literalEngine evaluates nothing: its templates are fixed.
type literalEngine struct {
	staging       *corev1.PodTemplateSpec
	unstaging     *corev1.PodTemplateSpec
	staticErr     error
	mu            sync.Mutex
	stagingReqs   []templating.StagingRequest
	unstagingReqs []templating.StagingRequest
	// inline volumes' creation and deletion
	creation, deletion *corev1.PodTemplateSpec
	capacity           *resource.Quantity
	inlineReqs         []templating.DynamicRequest
	// validation is the evaluated volumeValidation inline volumes get
	// (nil: the defaults).
	validation *templating.ValidationConfig
}

func (e *literalEngine) InlineValidation(context.Context, *v1alpha1.PavProvisioner, templating.DynamicRequest) (*templating.ValidationConfig, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.validation != nil {
		return e.validation, nil
	}
	return &templating.ValidationConfig{VolumeModes: []corev1.PersistentVolumeMode{corev1.PersistentVolumeFilesystem}}, nil
}

func (e *literalEngine) CheckStatic(context.Context, *v1alpha1.PavProvisioner, *corev1.PersistentVolume) error {
	return e.staticErr
}

func (e *literalEngine) Staging(_ context.Context, _ *v1alpha1.PavProvisioner, req templating.StagingRequest) (*corev1.PodTemplateSpec, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stagingReqs = append(e.stagingReqs, req)
	return e.staging, nil
}

func (e *literalEngine) Unstaging(_ context.Context, _ *v1alpha1.PavProvisioner, req templating.StagingRequest) (*corev1.PodTemplateSpec, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.unstagingReqs = append(e.unstagingReqs, req)
	return e.unstaging, nil
}

func (e *literalEngine) Creation(_ context.Context, _ *v1alpha1.PavProvisioner, r templating.DynamicRequest) (*templating.CreationConfig, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.inlineReqs = append(e.inlineReqs, r)
	return &templating.CreationConfig{PodTemplate: e.creation, Capacity: e.capacity}, nil
}

func (e *literalEngine) Deletion(_ context.Context, _ *v1alpha1.PavProvisioner, r templating.DynamicRequest) (*corev1.PodTemplateSpec, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.inlineReqs = append(e.inlineReqs, r)
	return e.deletion, nil
}

func (e *literalEngine) Forget(*v1alpha1.PavProvisioner) {}

func podTemplate(name string) *corev1.PodTemplateSpec {
	return &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: name, Image: "busybox"}}}}
}

type stagerFixture struct {
	t       testing.TB
	kube    *fake.Clientset
	stager  *Stager
	engine  *literalEngine
	mounter *mount.FakeMounter
	root    string
	target  string
	exits   *Exits // what the container runtime reported (tests record exits themselves)
	provs   cache.Indexer
	cfg     StagerConfig // the stager's, for a restart
}

const (
	testDriver = "prov"
	testHandle = "handle-1"
)

func newStagerFixture(t testing.TB, pvMutate func(*corev1.PersistentVolume), modes ...v1alpha1.ProvisioningMode) *stagerFixture {
	t.Helper()
	root := t.TempDir()
	if len(modes) == 0 {
		modes = []v1alpha1.ProvisioningMode{v1alpha1.Dynamic}
	}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "claim", Namespace: "ns", UID: "claim-uid"}}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pvc-claim-uid", UID: "pv-uid", Annotations: map[string]string{protocol.AnnotationProvisionedBy: testDriver}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")},
			ClaimRef:               &corev1.ObjectReference{Namespace: "ns", Name: "claim", UID: "claim-uid"},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: testDriver, VolumeHandle: testHandle}},
		},
	}
	if pvMutate != nil {
		pvMutate(pv)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node1"}}
	kube := fake.NewSimpleClientset(pvc, pv, node)
	pods := kubeclient.NewInformer(kube, kube.CoreV1().Pods(metav1.NamespaceAll), &corev1.Pod{}, 0, kubeclient.Selector{})
	if err := pods.AddIndexers(PodIndexers()); err != nil {
		t.Fatal(err)
	}
	pvs := kubeclient.NewInformer(kube, kube.CoreV1().PersistentVolumes(), &corev1.PersistentVolume{}, 0, kubeclient.Selector{})
	if err := pvs.AddIndexers(PVIndexers()); err != nil {
		t.Fatal(err)
	}
	provs := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	_ = provs.Add(&v1alpha1.PavProvisioner{ObjectMeta: metav1.ObjectMeta{Name: testDriver}, Spec: v1alpha1.PavProvisionerSpec{ProvisioningModes: modes}})
	engine := &literalEngine{staging: podTemplate("stage"), unstaging: podTemplate("unstage")}
	m := mount.NewFakeMounter(nil)
	// Without exits recorded, every test learns of exits from pod status.
	exits := NewExits(pods)
	cfg := StagerConfig{
		Kube: kube, Engine: engine, NodeName: "node1", PodDirRoot: root, Mounter: &mounts.FakeBinder{FakeMounter: m},
		Pods: pods, PVs: pvs, Provisioners: &indexerInformer{SharedIndexInformer: pods, indexer: provs}, Exits: exits,
	}
	s := NewStager(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	kubeclient.Run(ctx, pods, pvs)
	cache.WaitForCacheSync(ctx.Done(), pods.HasSynced, pvs.HasSynced)
	return &stagerFixture{t: t, kube: kube, stager: s, engine: engine, mounter: m, root: root, exits: exits, provs: provs, cfg: cfg,
		target: filepath.Join(t.TempDir(), "pods", "uid", "volumes", "kubernetes.io~csi", "pvc", "mount")}
}

// indexerInformer serves a fixed indexer where the stager wants an informer's.
type indexerInformer struct {
	cache.SharedIndexInformer
	indexer cache.Indexer
}

func (i *indexerInformer) GetIndexer() cache.Indexer { return i.indexer }

func (f *stagerFixture) publish(ctx context.Context) error {
	return f.stager.Publish(ctx, testDriver, &pavcsi.PublishRequest{VolumeID: testHandle, TargetPath: f.target})
}

// waitForPod waits until a pod of the phase exists and returns it.
func (f *stagerFixture) waitForPod(phase protocol.Phase) *corev1.Pod {
	f.t.Helper()
	for deadline := time.Now().Add(testwait.Timeout); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		list, err := f.kube.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			f.t.Fatal(err)
		}
		for i := range list.Items {
			if list.Items[i].Labels[protocol.LabelPhase] == string(phase) {
				return &list.Items[i]
			}
		}
	}
	f.t.Fatalf("no %s pod appeared", phase)
	return nil
}

// waitForPodOrFailure waits for a pod of phase, or for done to report a
// failure first (nil then); done succeeding first is fatal.
func (f *stagerFixture) waitForPodOrFailure(phase protocol.Phase, done <-chan error) *corev1.Pod {
	f.t.Helper()
	for deadline := time.Now().Add(testwait.Timeout); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		for _, p := range f.pods() {
			if p.Labels[protocol.LabelPhase] == string(phase) {
				return &p
			}
		}
		select {
		case err := <-done:
			if err == nil {
				f.t.Fatalf("succeeded without a %s pod", phase)
			}
			return nil
		default:
		}
	}
	f.t.Fatalf("no %s pod appeared", phase)
	return nil
}

func (f *stagerFixture) setPhase(pod *corev1.Pod, phase corev1.PodPhase, exitCode int32) {
	f.t.Helper()
	pod = pod.DeepCopy()
	pod.Status.Phase = phase
	if exitCode >= 0 {
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: pod.Spec.Containers[0].Name,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exitCode}}}}
	}
	if _, err := f.kube.CoreV1().Pods(pod.Namespace).UpdateStatus(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *stagerFixture) pods() []corev1.Pod {
	list, err := f.kube.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return list.Items
}

func hostDir(t testing.TB, pod *corev1.Pod, root string) string {
	t.Helper()
	dir, err := protocol.PodHostDir(pod, root)
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func async(fn func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- fn() }()
	return ch
}

func TestPublishRunToCompletionThenUnpublish(t *testing.T) {
	f := newStagerFixture(t, nil)
	ctx := context.Background()
	done := async(func() error { return f.publish(ctx) })
	pod := f.waitForPod(protocol.PhaseStaging)
	dir := hostDir(t, pod, f.root)
	if pod.Spec.NodeName != "node1" || pod.Annotations[protocol.AnnotationTargetPath] != f.target ||
		pod.Annotations[protocol.AnnotationClaim] != "ns/claim" || len(pod.Finalizers) != 1 {
		t.Errorf("staging pod = %+v", pod.ObjectMeta)
	}
	mkdir(t, dir, "volume")
	f.setPhase(pod, corev1.PodSucceeded, 0)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(f.mounter.MountPoints) != 1 || f.mounter.MountPoints[0].Path != f.target || f.mounter.MountPoints[0].Device != filepath.Join(dir, "volume") {
		t.Fatalf("mounts = %+v", f.mounter.MountPoints)
	}
	if len(f.engine.stagingReqs) != 1 || f.engine.stagingReqs[0].PVC.Name != "claim" || f.engine.stagingReqs[0].Node.Name != "node1" {
		t.Errorf("staging context = %+v", f.engine.stagingReqs)
	}
	// Idempotent: a second call reuses the pod and the mount.
	if err := f.publish(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(f.pods()); n != 1 {
		t.Errorf("%d pods after the second publish", n)
	}

	done = async(func() error { return f.stager.Unpublish(ctx, testDriver, testHandle, f.target) })
	un := f.waitForPod(protocol.PhaseUnstaging)
	if un.Annotations[protocol.AnnotationClaim] != "ns/claim" {
		t.Errorf("unstaging pod annotations = %v", un.Annotations)
	}
	f.setPhase(un, corev1.PodSucceeded, 0)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(f.mounter.MountPoints) != 0 {
		t.Errorf("mounts left: %+v", f.mounter.MountPoints)
	}
	if n := len(f.pods()); n != 0 {
		t.Errorf("%d pods left", n)
	}
	if entries, _ := os.ReadDir(f.root); len(entries) != 0 {
		t.Errorf("directories left: %v", entries)
	}
	if _, err := os.Stat(f.target); !os.IsNotExist(err) {
		t.Errorf("target left: %v", err)
	}
	// Idempotent.
	if err := f.stager.Unpublish(ctx, testDriver, testHandle, f.target); err != nil {
		t.Fatal(err)
	}
}

// A failed unstaging pod fails NodeUnpublishVolume with its message and is
// removed; the staging pod, the record of what to unstage, stays (its
// finalizer); kubelet's retry runs a new unstaging pod, and only its success
// completes the unpublish.
func TestFailedUnstagingPodIsRetried(t *testing.T) {
	f := newStagerFixture(t, nil)
	fakeapi.HonorFinalizers(&f.kube.Fake, f.kube.Tracker(), corev1.SchemeGroupVersion.WithResource("pods"), time.Now)
	ctx := context.Background()
	done := async(func() error { return f.publish(ctx) })
	pod := f.waitForPod(protocol.PhaseStaging)
	mkdir(t, hostDir(t, pod, f.root), "volume")
	f.setPhase(pod, corev1.PodSucceeded, 0)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	done = async(func() error { return f.stager.Unpublish(ctx, testDriver, testHandle, f.target) })
	un := f.waitForPod(protocol.PhaseUnstaging)
	if err := os.WriteFile(filepath.Join(hostDir(t, un, f.root), "error"), []byte("device busy"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.setPhase(un, corev1.PodFailed, 1)
	err := <-done
	if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "unstaging pod") || !strings.Contains(err.Error(), "device busy") {
		t.Fatalf("unpublish with a failed unstaging pod: %v", err)
	}
	staging := 0
	for _, p := range f.pods() {
		switch {
		case p.Labels[protocol.LabelPhase] == string(protocol.PhaseUnstaging):
			t.Fatalf("the failed unstaging pod is left: %+v", p.Status)
		case p.Labels[protocol.LabelPhase] == string(protocol.PhaseStaging) && protocol.HasFinalizer(&p, protocol.FinalizerStaging):
			staging++
		}
	}
	if staging != 1 {
		t.Fatalf("%d staging pods holding their finalizer after the failed unstaging: want its record kept", staging)
	}

	// Kubelet retries. The node plugin's pod cache may still hold the failed
	// pod when the first retry comes, which then reports that failure again
	// (and removes the pod): retry as kubelet does until one runs a new pod.
	var again *corev1.Pod
	for attempt := 1; again == nil; attempt++ {
		if attempt > 5 {
			t.Fatal("5 retried unpublishes ran no new unstaging pod")
		}
		done = async(func() error { return f.stager.Unpublish(ctx, testDriver, testHandle, f.target) })
		again = f.waitForPodOrFailure(protocol.PhaseUnstaging, done)
	}
	f.setPhase(again, corev1.PodSucceeded, 0)
	if err := <-done; err != nil {
		t.Fatalf("retried unpublish: %v", err)
	}
	if n := len(f.pods()); n != 0 {
		t.Errorf("%d pods left", n)
	}
}

// Kubelet's mount flags and fsType reach the staging context, and the
// unstaging context through the staging pod.
func TestMountOptionsReachStagingAndUnstaging(t *testing.T) {
	f := newStagerFixture(t, nil)
	ctx := context.Background()
	flags := []string{"noatime", `context="system_u:object_r:container_file_t:s0:c1,c2"`}
	done := async(func() error {
		return f.stager.Publish(ctx, testDriver, &pavcsi.PublishRequest{VolumeID: testHandle, TargetPath: f.target, MountFlags: flags, FSType: "xfs"})
	})
	pod := f.waitForPod(protocol.PhaseStaging)
	mkdir(t, hostDir(t, pod, f.root), "volume")
	f.setPhase(pod, corev1.PodSucceeded, 0)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if r := f.engine.stagingReqs; len(r) != 1 || !reflect.DeepEqual(r[0].MountOptions, flags) || r[0].FSType != "xfs" {
		t.Errorf("staging context = %+v", r)
	}
	done = async(func() error { return f.stager.Unpublish(ctx, testDriver, testHandle, f.target) })
	f.setPhase(f.waitForPod(protocol.PhaseUnstaging), corev1.PodSucceeded, 0)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if r := f.engine.unstagingReqs; len(r) != 1 || !reflect.DeepEqual(r[0].MountOptions, flags) || r[0].FSType != "xfs" {
		t.Errorf("unstaging context = %+v", r)
	}
}

// A SINGLE_NODE_SINGLE_WRITER (ReadWriteOncePod) volume published at one
// target is refused at another with FAILED_PRECONDITION, before any
// staging pod; the same target again is fine.
func TestPublishSingleWriterElsewhereRefused(t *testing.T) {
	f := newStagerFixture(t, nil)
	ctx := context.Background()
	req := &pavcsi.PublishRequest{VolumeID: testHandle, TargetPath: f.target, SingleWriter: true}
	done := async(func() error { return f.stager.Publish(ctx, testDriver, req) })
	pod := f.waitForPod(protocol.PhaseStaging)
	mkdir(t, hostDir(t, pod, f.root), "volume")
	f.setPhase(pod, corev1.PodSucceeded, 0)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	other := *req
	other.TargetPath = filepath.Join(t.TempDir(), "other", "mount")
	callCtx, cancel := context.WithTimeout(ctx, 30*time.Second) // without the check it waits for a staging pod
	err := f.stager.Publish(callCtx, testDriver, &other)
	cancel()
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "ReadWriteOncePod and already published on this node at "+f.target) {
		t.Errorf("second target: %v, want FAILED_PRECONDITION", err)
	}
	if n := len(f.pods()); n != 1 {
		t.Errorf("%d pods, want the first staging pod only", n)
	}
	if err := f.stager.Publish(ctx, testDriver, req); err != nil {
		t.Errorf("the same target again: %v", err)
	}
}

// A published Filesystem volume is nosuid,nodev unless the provisioner's
// spec.volumeStaging.allowSetuidAndDevices says otherwise.
func TestPublishNosuidNodevUnlessAllowed(t *testing.T) {
	for _, allow := range []bool{false, true} {
		t.Run(fmt.Sprintf("allowSetuidAndDevices %v", allow), func(t *testing.T) {
			f := newStagerFixture(t, nil)
			p, err := f.stager.provisioner(testDriver)
			if err != nil {
				t.Fatal(err)
			}
			p.Spec.VolumeStaging = &v1alpha1.VolumeStaging{AllowSetuidAndDevices: allow}
			done := async(func() error { return f.publish(context.Background()) })
			pod := f.waitForPod(protocol.PhaseStaging)
			mkdir(t, hostDir(t, pod, f.root), "volume")
			f.setPhase(pod, corev1.PodSucceeded, 0)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if len(f.mounter.MountPoints) != 1 {
				t.Fatalf("mounts = %+v", f.mounter.MountPoints)
			}
			opts := f.mounter.MountPoints[0].Opts
			if got := slices.Contains(opts, "nosuid") && slices.Contains(opts, "nodev"); got == allow {
				t.Errorf("mount options %v", opts)
			}
		})
	}
}

// publishLongRunning starts Publish with a staging pod that keeps running and
// has exposed /pav/volume, but not yet /pav/ready; it returns Publish's result
// channel and the pod's /pav directory on the host.
func (f *stagerFixture) publishLongRunning() (<-chan error, string) {
	f.t.Helper()
	f.engine.unstaging = nil
	done := async(func() error { return f.publish(context.Background()) })
	pod := f.waitForPod(protocol.PhaseStaging)
	dir := hostDir(f.t, pod, f.root)
	f.setPhase(pod, corev1.PodRunning, -1)
	mkdir(f.t, dir, "data")
	symlink(f.t, "/pav/data", dir, "volume")
	return done, dir
}

func TestPublishReadyFile(t *testing.T) {
	f := newStagerFixture(t, nil)
	done, dir := f.publishLongRunning()
	select {
	case err := <-done:
		t.Fatalf("publish returned before /pav/ready: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	writeFile(t, filepath.Join(dir, "ready"), "")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(f.mounter.MountPoints) != 1 || f.mounter.MountPoints[0].Device != filepath.Join(dir, "data") {
		t.Fatalf("mounts = %+v", f.mounter.MountPoints)
	}
}

// BenchmarkPublishReadyLatency measures how long Publish takes to return once
// a long-running staging pod creates /pav/ready: the delay PaV adds between
// "volume ready" and kubelet starting the client pod (file watch, checks of
// /pav/volume, bind mount with a fake mounter).
func BenchmarkPublishReadyLatency(b *testing.B) {
	var total time.Duration
	for i := 0; i < b.N; i++ {
		done, dir := newStagerFixture(b, nil).publishLongRunning()
		time.Sleep(20 * time.Millisecond) // let Publish start waiting
		start := time.Now()
		writeFile(b, filepath.Join(dir, "ready"), "")
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N), "µs-ready-to-return")
}

func TestPublishFailureRunsUnstaging(t *testing.T) {
	f := newStagerFixture(t, nil)
	done := async(func() error { return f.publish(context.Background()) })
	pod := f.waitForPod(protocol.PhaseStaging)
	writeFile(t, filepath.Join(hostDir(t, pod, f.root), "error"), "cannot reach the storage server\n")
	f.setPhase(pod, corev1.PodFailed, 3)
	un := f.waitForPod(protocol.PhaseUnstaging)
	f.setPhase(un, corev1.PodSucceeded, 0)
	err := <-done
	if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "cannot reach the storage server") {
		t.Fatalf("err = %v", err)
	}
	if n := len(f.pods()); n != 0 {
		t.Errorf("%d pods left", n)
	}
	if entries, _ := os.ReadDir(f.root); len(entries) != 0 {
		t.Errorf("directories left: %v", entries)
	}
	if len(f.mounter.MountPoints) != 0 {
		t.Errorf("mounts: %v", f.mounter.MountPoints)
	}
}

func TestPublishFailureMessageFromTermination(t *testing.T) {
	f := newStagerFixture(t, nil)
	f.engine.unstaging = nil
	done := async(func() error { return f.publish(context.Background()) })
	pod := f.waitForPod(protocol.PhaseStaging).DeepCopy()
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "stage", State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: 7, Message: "mount: permission denied"}}}}
	pod.Status.Phase = corev1.PodRunning // a container failed; restartPolicy Never: no need to wait for the phase
	if _, err := f.kube.CoreV1().Pods(pod.Namespace).UpdateStatus(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := <-done
	if err == nil || !strings.Contains(err.Error(), `container "stage" exited with code 7: mount: permission denied`) {
		t.Fatalf("err = %v", err)
	}
}

// A staging pod's log reaches the client pod's Events (through the error
// kubelet reports) only if the provisioner opted in: logs may hold secrets.
func TestPublishFailureLogOnlyWhenOptedIn(t *testing.T) {
	for _, optIn := range []bool{false, true} {
		t.Run(fmt.Sprintf("podLogsInEvents %v", optIn), func(t *testing.T) {
			f := newStagerFixture(t, nil)
			f.engine.unstaging = nil
			p, err := f.stager.provisioner(testDriver)
			if err != nil {
				t.Fatal(err)
			}
			p.Spec.PodLogsInEvents = optIn
			done := async(func() error { return f.publish(context.Background()) })
			f.setPhase(f.waitForPod(protocol.PhaseStaging), corev1.PodFailed, 7)
			err = <-done
			if err == nil || !strings.Contains(err.Error(), `container "stage" exited with code 7`) {
				t.Fatalf("err = %v", err)
			}
			if got := strings.Contains(err.Error(), "fake logs"); got != optIn {
				t.Errorf("log in the error: %v, want %v: %v", got, optIn, err)
			}
		})
	}
}

func TestPublishVolumeEscapingPav(t *testing.T) {
	f := newStagerFixture(t, nil)
	f.engine.unstaging = nil
	done := async(func() error { return f.publish(context.Background()) })
	pod := f.waitForPod(protocol.PhaseStaging)
	symlink(t, "/etc", hostDir(t, pod, f.root), "volume")
	f.setPhase(pod, corev1.PodSucceeded, 0)
	err := <-done
	if err == nil || !strings.Contains(err.Error(), "/pav/volume escapes /pav") {
		t.Fatalf("err = %v", err)
	}
	if len(f.mounter.MountPoints) != 0 {
		t.Errorf("mounted: %v", f.mounter.MountPoints)
	}
}

func TestPublishDeadlineThenResume(t *testing.T) {
	f := newStagerFixture(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := f.publish(ctx)
	if status.Code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), "not done yet") {
		t.Fatalf("err = %v", err)
	}
	pod := f.waitForPod(protocol.PhaseStaging)
	mkdir(t, hostDir(t, pod, f.root), "volume")
	f.setPhase(pod, corev1.PodSucceeded, 0)
	if err := f.publish(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(f.pods()); n != 1 {
		t.Errorf("%d pods, want the same single staging pod", n)
	}
}

func TestPublishStatic(t *testing.T) {
	static := func(pv *corev1.PersistentVolume) { pv.Annotations = nil }
	t.Run("provisioner without Static", func(t *testing.T) {
		f := newStagerFixture(t, static)
		err := f.publish(context.Background())
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "does not support static provisioning") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("rejected by static validation", func(t *testing.T) {
		f := newStagerFixture(t, static, v1alpha1.Static)
		f.engine.staticErr = errors.New("capacity 1Mi is below minCapacity 1Gi")
		err := f.publish(context.Background())
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "below minCapacity") {
			t.Fatalf("err = %v", err)
		}
		if n := len(f.pods()); n != 0 {
			t.Errorf("%d pods created", n)
		}
	})
	t.Run("accepted", func(t *testing.T) {
		f := newStagerFixture(t, static, v1alpha1.Static)
		done := async(func() error { return f.publish(context.Background()) })
		pod := f.waitForPod(protocol.PhaseStaging)
		mkdir(t, hostDir(t, pod, f.root), "volume")
		f.setPhase(pod, corev1.PodSucceeded, 0)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

func TestPublishUnknownVolume(t *testing.T) {
	f := newStagerFixture(t, nil)
	err := f.stager.Publish(context.Background(), testDriver, &pavcsi.PublishRequest{VolumeID: "other", TargetPath: f.target})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("err = %v", err)
	}
}

// Unstaging works from the staging pod's snapshot when the claim is gone.
func TestUnpublishWithClaimGone(t *testing.T) {
	f := newStagerFixture(t, nil)
	done := async(func() error { return f.publish(context.Background()) })
	pod := f.waitForPod(protocol.PhaseStaging)
	mkdir(t, hostDir(t, pod, f.root), "volume")
	f.setPhase(pod, corev1.PodSucceeded, 0)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := f.kube.CoreV1().PersistentVolumeClaims("ns").Delete(context.Background(), "claim", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	done = async(func() error { return f.stager.Unpublish(context.Background(), testDriver, testHandle, f.target) })
	un := f.waitForPod(protocol.PhaseUnstaging)
	f.setPhase(un, corev1.PodSucceeded, 0)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := len(f.pods()); n != 0 {
		t.Errorf("%d pods left", n)
	}
}

// While its PavProvisioner is being deleted, no new volume is staged: the
// client pod stays Pending with a FailedPrecondition message, and no staging
// pod is created.
func TestPublishRefusedWhileProvisionerIsDeleted(t *testing.T) {
	f := newStagerFixture(t, nil)
	now := metav1.Now()
	_ = f.provs.Update(&v1alpha1.PavProvisioner{
		ObjectMeta: metav1.ObjectMeta{Name: testDriver, DeletionTimestamp: &now, Finalizers: []string{protocol.FinalizerProvisioner}},
		Spec:       v1alpha1.PavProvisionerSpec{ProvisioningModes: []v1alpha1.ProvisioningMode{v1alpha1.Dynamic}},
	})
	err := f.publish(context.Background())
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "being deleted") {
		t.Fatalf("Publish = %v, want FailedPrecondition saying the provisioner is being deleted", err)
	}
	if pods := f.pods(); len(pods) != 0 {
		t.Errorf("a staging pod was created: %v", pods[0].Name)
	}
}

// CSI: publishing again at a target already published with another
// read-only flag, volume mode or volume is ALREADY_EXISTS; the same call
// again is fine (issue 10 item 11).
func TestPublishIncompatibleIsAlreadyExists(t *testing.T) {
	f := newStagerFixture(t, nil)
	ctx := context.Background()
	done := async(func() error { return f.publish(ctx) })
	pod := f.waitForPod(protocol.PhaseStaging)
	mkdir(t, hostDir(t, pod, f.root), "volume")
	f.setPhase(pod, corev1.PodSucceeded, 0)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for name, req := range map[string]*pavcsi.PublishRequest{
		"read-only":      {VolumeID: testHandle, TargetPath: f.target, ReadOnly: true},
		"block":          {VolumeID: testHandle, TargetPath: f.target, Block: true},
		"another volume": {VolumeID: "other-handle", TargetPath: f.target},
	} {
		// Without the check, Publish would wait for a staging pod: bound it
		// so that failure is reported rather than hung.
		callCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := f.stager.Publish(callCtx, testDriver, req)
		cancel()
		if status.Code(err) != codes.AlreadyExists {
			t.Errorf("%s: %v, want ALREADY_EXISTS", name, err)
		}
	}
	if err := f.publish(ctx); err != nil {
		t.Errorf("the same publish again: %v", err)
	}
	if n := len(f.mounter.MountPoints); n != 1 {
		t.Errorf("%d mounts at the target, want 1", n)
	}
}

// mkdir makes dir/rel, the staging pod's /pav/volume in most tests.
func mkdir(t testing.TB, dir, rel string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, rel), 0o755); err != nil {
		t.Fatal(err)
	}
}

func symlink(t testing.TB, target, dir, rel string) {
	t.Helper()
	if err := os.Symlink(target, filepath.Join(dir, rel)); err != nil {
		t.Fatal(err)
	}
}
