package nodeagent

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	mount "k8s.io/mount-utils"

	"github.com/albertofaria/pav/internal/testwait"
	"github.com/albertofaria/pav/kubeclient"
	"github.com/albertofaria/pav/kubeclient/generated/clientset/fake"
	"github.com/albertofaria/pav/nodeagent/collector"
	"github.com/albertofaria/pav/nodeagent/containerd"
	"github.com/albertofaria/pav/protocol"
)

func pavPod(name string, phase protocol.Phase, podPhase corev1.PodPhase, hostDir string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "default",
			Labels: map[string]string{protocol.LabelPhase: string(phase)},
		},
		Spec: corev1.PodSpec{
			NodeName: "node1",
			Volumes: []corev1.Volume{{
				Name:         protocol.PavVolumeName,
				VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: hostDir}},
			}},
		},
		Status: corev1.PodStatus{Phase: podPhase},
	}
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// newTestCollectorWithExits is a Collector with Exits, of which the test
// records what the container runtime reports.
func newTestCollectorWithExits(t testing.TB, root string, pods ...*corev1.Pod) (*collector.Collector, *fake.Clientset, *Exits) {
	t.Helper()
	var objs []runtime.Object
	for _, p := range pods {
		objs = append(objs, p)
	}
	kube := fake.NewSimpleClientset(objs...)
	inf := kubeclient.NewInformer(kube, kube.CoreV1().Pods(metav1.NamespaceAll), &corev1.Pod{}, 0, kubeclient.Selector{})
	if err := inf.AddIndexers(PodIndexers()); err != nil {
		t.Fatal(err)
	}
	exits := NewExits(inf)
	c := collector.New(kube, inf, mount.NewFakeMounter(nil), root, exits)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	kubeclient.Run(ctx, inf)
	cache.WaitForCacheSync(ctx.Done(), inf.HasSynced)
	return c, kube, exits
}

// The runtime reports that every container of a creation pod kubelet still
// says runs exited 0: its results are collected at once, and the success
// recorded in the same write. An exit status 1 collects nothing.
func TestCollectOnRuntimeExit(t *testing.T) {
	for _, code := range []uint32{0, 1} {
		t.Run(fmt.Sprintf("exit status %d", code), func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "pod")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(dir, "handle"), "vol-1\n")
			pod := pavPod("p", protocol.PhaseCreation, corev1.PodRunning, dir)
			pod.UID = "uid-p"
			pod.Spec.RestartPolicy = corev1.RestartPolicyNever
			pod.Spec.Containers = []corev1.Container{{Name: "create"}}
			c, kube, exits := newTestCollectorWithExits(t, root, pod)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go c.Run(ctx, 1)
			exits.record(containerd.Exit{PodUID: pod.UID, Container: "create", Status: code})
			if code != 0 {
				// Collect is what the worker would run: it must do nothing.
				if err := c.Collect(ctx, pod); err != nil {
					t.Fatal(err)
				}
				if got, _ := kube.CoreV1().Pods("default").Get(ctx, "p", metav1.GetOptions{}); len(got.Annotations) != 0 {
					t.Errorf("annotations = %v, want none", got.Annotations)
				}
				return
			}
			want := map[string]string{
				protocol.AnnotationResultsCollected: "true",
				protocol.AnnotationSucceeded:        "true",
				protocol.AnnotationResultHandle:     "vol-1",
			}
			for deadline := time.Now().Add(testwait.Timeout); ; time.Sleep(time.Millisecond) {
				got, err := kube.CoreV1().Pods("default").Get(ctx, "p", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if len(got.Annotations) > 0 {
					if !maps.Equal(got.Annotations, want) {
						t.Errorf("annotations = %v, want %v", got.Annotations, want)
					}
					if got.Status.Phase != corev1.PodRunning {
						t.Errorf("phase %s changed", got.Status.Phase)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("results never collected")
				}
			}
		})
	}
}
