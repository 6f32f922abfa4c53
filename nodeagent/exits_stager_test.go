package nodeagent

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/albertofaria/pav/internal/testwait"
	"github.com/albertofaria/pav/kubelet"
	"github.com/albertofaria/pav/nodeagent/containerd"
	"github.com/albertofaria/pav/nodeagent/containerd/containerdtest"
	"github.com/albertofaria/pav/protocol"
)

// withUIDs makes the fake API server give every pod a UID, as a real one
// does: the runtime's reports are matched by pod UID.
func (f *stagerFixture) withUIDs() *stagerFixture {
	f.kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		a.(k8stesting.CreateAction).GetObject().(*corev1.Pod).UID = types.UID(uuid.NewString())
		return false, nil, nil
	})
	return f
}

// cached waits until the node plugin's pod cache holds pod: the runtime's
// reports only count for pods in it.
func (f *stagerFixture) cached(pod *corev1.Pod) {
	f.t.Helper()
	for deadline := time.Now().Add(testwait.Timeout); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if objs, _ := f.stager.pods.ByIndex(podsByUID, string(pod.UID)); len(objs) == 1 {
			return
		}
	}
	f.t.Fatalf("pod %s never reached the cache", pod.Name)
}

// cachedByName waits until the node plugin's pod cache holds a pod of pod's
// name (the fake API gives pods no UIDs unless withUIDs).
func (f *stagerFixture) cachedByName(pod *corev1.Pod) {
	f.t.Helper()
	for deadline := time.Now().Add(testwait.Timeout); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if _, ok, _ := f.stager.pods.GetByKey(pod.Namespace + "/" + pod.Name); ok {
			return
		}
	}
	f.t.Fatalf("pod %s never reached the cache", pod.Name)
}

// live reads pod again from the API.
func (f *stagerFixture) live(pod *corev1.Pod) *corev1.Pod {
	f.t.Helper()
	pod, err := f.kube.CoreV1().Pods(pod.Namespace).Get(context.Background(), pod.Name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return pod
}

// publishOnRuntimeExit publishes the volume, its staging pod's success
// told by the runtime alone (no pod phase is ever set), and returns the pod.
func (f *stagerFixture) publishOnRuntimeExit(ctx context.Context) *corev1.Pod {
	f.t.Helper()
	done := async(func() error { return f.publish(ctx) })
	pod := f.waitForPod(protocol.PhaseStaging)
	mkdir(f.t, hostDir(f.t, pod, f.root), "volume")
	f.cached(pod)
	f.exits.record(containerd.Exit{PodUID: pod.UID, Container: "stage", Status: 0})
	if err := <-done; err != nil {
		f.t.Fatal(err)
	}
	return pod
}

// waiting waits until a Publish waits for pod: it subscribed to the pod's
// changes (nodepods.Pods.Wait).
func (f *stagerFixture) waiting(pod *corev1.Pod) {
	f.t.Helper()
	key := pod.Namespace + "/" + pod.Name
	for deadline := time.Now().Add(testwait.Timeout); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if f.stager.nodePods.Waiters(pod.Namespace, pod.Name) > 0 {
			return
		}
	}
	f.t.Fatalf("nothing ever waited for pod %s", key)
}

// The runtime reports that the staging pod's container exited 0: Publish
// returns without any change of the pod status, having recorded the
// success on the pod; unstaging goes the same way.
func TestPublishOnRuntimeExit(t *testing.T) {
	f := newStagerFixture(t, nil).withUIDs()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a failure is reported, not hung
	defer cancel()
	pod := f.publishOnRuntimeExit(ctx)
	got := f.live(pod)
	if got.Status.Phase != "" || got.Annotations[protocol.AnnotationSucceeded] != "true" {
		t.Errorf("staging pod phase %q, annotations %v; want no phase and the success recorded", got.Status.Phase, got.Annotations)
	}
	if len(f.mounter.MountPoints) != 1 || f.mounter.MountPoints[0].Path != f.target {
		t.Fatalf("mounts = %+v", f.mounter.MountPoints)
	}

	done := async(func() error { return f.stager.Unpublish(ctx, testDriver, testHandle, f.target) })
	un := f.waitForPod(protocol.PhaseUnstaging)
	f.cached(un)
	f.exits.record(containerd.Exit{PodUID: un.UID, Container: "unstage", Status: 0})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := len(f.pods()); n != 0 {
		t.Errorf("%d pods left", n)
	}
}

// A container that exited non-zero, or a container of a pod that is not
// PaV's, is no success: the staging stays pending (the decision Publish
// waits on, checked directly rather than by waiting for Publish's deadline)
// and nothing is recorded on the pod; Publish, cancelled, says not done yet.
func TestPublishNotOnOtherRuntimeExits(t *testing.T) {
	for name, exit := range map[string]func(pod *corev1.Pod) containerd.Exit{
		"exit status 1": func(pod *corev1.Pod) containerd.Exit {
			return containerd.Exit{PodUID: pod.UID, Container: "stage", Status: 1}
		},
		"a tenant's pod":    func(*corev1.Pod) containerd.Exit { return containerd.Exit{PodUID: "tenant-pod", Container: "stage"} },
		"another container": func(pod *corev1.Pod) containerd.Exit { return containerd.Exit{PodUID: pod.UID, Container: "other"} },
	} {
		t.Run(name, func(t *testing.T) {
			f := newStagerFixture(t, nil).withUIDs()
			f.engine.unstaging = nil
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a failure is reported, not hung
			defer cancel()
			publishCtx, stopPublish := context.WithCancel(ctx)
			done := async(func() error { return f.publish(publishCtx) })
			pod := f.waitForPod(protocol.PhaseStaging)
			dir := hostDir(t, pod, f.root)
			mkdir(t, dir, "volume")
			f.cached(pod)
			f.exits.record(exit(pod))
			if state := stagingStateOf(f.live(pod), dir, f.exits); state != stagingPending {
				t.Errorf("staging state %v after the exit, want pending", state)
			}
			if ok, err := f.stager.succeeded(ctx, f.live(pod)); ok || err != nil {
				t.Errorf("succeeded = %v, %v; want false", ok, err)
			}
			stopPublish()
			if err := <-done; status.Code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), "not done yet") {
				t.Fatalf("Publish = %v, want DeadlineExceeded: not done yet", err)
			}
			if got := f.live(pod); got.Annotations[protocol.AnnotationSucceeded] != "" {
				t.Errorf("success recorded: %v", got.Annotations)
			}
		})
	}
}

// Once recorded, the runtime's word holds: a Failed phase kubelet reports
// later (an eviction racing the exit, say) does not tear the volume down.
func TestPublishRecordedSuccessIsFinal(t *testing.T) {
	f := newStagerFixture(t, nil).withUIDs()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pod := f.publishOnRuntimeExit(ctx)
	f.setPhase(f.live(pod), corev1.PodFailed, 0)
	for deadline := time.Now().Add(testwait.Timeout); ; time.Sleep(time.Millisecond) {
		if p, err := f.stager.podLister.Pods(pod.Namespace).Get(pod.Name); err == nil && p.Status.Phase == corev1.PodFailed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the Failed phase never reached the cache")
		}
	}
	if err := f.publish(ctx); err != nil {
		t.Fatalf("Publish again = %v, want the volume still published", err)
	}
	if n := len(f.mounter.MountPoints); n != 1 {
		t.Errorf("%d mounts, want 1", n)
	}
}

// BenchmarkPublishRuntimeExitLatency measures how long Publish takes to
// return once containerd reports that the staging pod's container exited 0
// (through a fake containerd on a unix socket): the event, the container
// lookup, recording the success on the pod (fake API), the checks of
// /pav/volume and the bind mount (fake mounter). Kubelet would report the
// pod Succeeded only at its next relist, up to a second later.
func BenchmarkPublishRuntimeExitLatency(b *testing.B) {
	var total time.Duration
	for i := 0; i < b.N; i++ {
		f := newStagerFixture(b, nil).withUIDs()
		ctd := containerdtest.New(b)
		ctd.Watch(b, f.exits.record)
		<-ctd.Subscribed
		done := async(func() error { return f.publish(context.Background()) })
		pod := f.waitForPod(protocol.PhaseStaging)
		mkdir(b, hostDir(b, pod, f.root), "volume")
		f.cached(pod)
		ctd.AddContainer("c", string(pod.UID), "stage")
		f.waiting(pod)
		start := time.Now()
		ctd.Exit(b, kubelet.ContainerdNamespace, "c", "c", 0)
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N), "µs-exit-to-return")
}

// What the runtime reported of a pod is forgotten when the pod is gone.
func TestExitsForgetDeletedPods(t *testing.T) {
	f := newStagerFixture(t, nil).withUIDs()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pod := f.publishOnRuntimeExit(ctx)
	if err := f.kube.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(testwait.Timeout); ; time.Sleep(time.Millisecond) {
		f.exits.mu.Lock()
		n := len(f.exits.codes)
		f.exits.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("exits of %d pods kept after the pod was deleted", n)
		}
	}
}
