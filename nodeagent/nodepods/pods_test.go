package nodepods

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/albertofaria/pav/internal/testwait"
	"github.com/albertofaria/pav/kubeclient"
	"github.com/albertofaria/pav/kubeclient/generated/clientset/fake"
	"github.com/albertofaria/pav/protocol"
)

func stagingPod(name string, age time.Duration, deleted bool) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name),
			CreationTimestamp: metav1.NewTime(time.Unix(1000, 0).Add(-age)),
			Labels:            map[string]string{protocol.LabelPhase: string(protocol.PhaseStaging), protocol.LabelStagingID: "id"}},
		Spec: corev1.PodSpec{NodeName: "node1"},
	}
	if deleted {
		pod.DeletionTimestamp = &metav1.Time{Time: time.Unix(1000, 0)}
		pod.Finalizers = []string{protocol.FinalizerStaging}
	}
	return pod
}

// newPods serves objs from a fake API through a running, synced informer
// when cached, else from the API only.
func newPods(t *testing.T, cached bool, objs ...*corev1.Pod) *Pods {
	t.Helper()
	kube := fake.NewSimpleClientset()
	for _, pod := range objs {
		if err := kube.Tracker().Add(pod); err != nil {
			t.Fatal(err)
		}
	}
	informer := kubeclient.NewInformer(kube, kube.CoreV1().Pods(metav1.NamespaceAll), &corev1.Pod{}, 0, kubeclient.Selector{})
	if err := informer.AddIndexers(cache.Indexers{ByStaging: IndexByStaging}); err != nil {
		t.Fatal(err)
	}
	p := New(kube, "node1", t.TempDir(), informer, nil)
	if cached {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		kubeclient.Run(ctx, informer)
		cache.WaitForCacheSync(ctx.Done(), informer.HasSynced)
	}
	return p
}

// Of a staging's pods, Find takes the one that serves: not being deleted
// (a recovery keeps the pod it replaces), else the newest; from the cache,
// or from the API when the cache has not seen them.
func TestFindTakesTheServingPod(t *testing.T) {
	for _, cached := range []bool{true, false} {
		p := newPods(t, cached, stagingPod("new-deleted-1", 0, true), stagingPod("old-2", 2*time.Minute, false), stagingPod("newer-3", time.Minute, false))
		got, err := p.Find(context.Background(), protocol.PhaseStaging, "id")
		if err != nil || got == nil || got.Name != "newer-3" {
			name := "none"
			if got != nil {
				name = got.Name
			}
			t.Errorf("cached %v: found %s, %v; want newer-3", cached, name, err)
		}
		if got, err := p.Find(context.Background(), protocol.PhaseUnstaging, "id"); err != nil || got != nil {
			t.Errorf("cached %v: found an unstaging pod (%v), %v; want none", cached, got != nil, err)
		}
	}
}

// Wait returns nil once the pod is gone, woken by the informer's delete.
func TestWaitSeesThePodGo(t *testing.T) {
	pod := stagingPod("pod-1", 0, false)
	p := newPods(t, true, pod)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		last, err := p.Wait(ctx, pod, "", func(p *corev1.Pod) bool { return p == nil })
		if err == nil && last != nil {
			err = context.Canceled
		}
		done <- err
	}()
	testwait.Until(t, "Wait to begin", func() bool { return p.Waiters(pod.Namespace, pod.Name) > 0 })
	if err := p.kube.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("Wait: %v", err)
	}
}
