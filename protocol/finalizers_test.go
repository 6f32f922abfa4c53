package protocol

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/albertofaria/pav/kubeclient/generated/clientset/fake"
)

func TestFinalizers(t *testing.T) {
	ctx := context.Background()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", ResourceVersion: "7",
		Finalizers: []string{"other/a", FinalizerStaging, "other/b"}}}
	kube := fake.NewSimpleClientset(pod.DeepCopy())
	var patches []string
	kube.PrependReactor("patch", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		patches = append(patches, string(a.(k8stesting.PatchAction).GetPatch()))
		return false, nil, nil
	})
	pods := kube.CoreV1().Pods("ns")
	if _, err := RemoveFinalizer(ctx, pods.Patch, pod, FinalizerStaging); err != nil {
		t.Fatal(err)
	}
	got, err := pods.Get(ctx, "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"other/a", "other/b"}; !slices.Equal(got.Finalizers, want) {
		t.Errorf("finalizers %v, want %v", got.Finalizers, want)
	}
	if len(patches) != 1 || !strings.Contains(patches[0], `"resourceVersion":"7"`) {
		t.Errorf("the patch must apply to the version read only: %v", patches)
	}
	// Nothing to do: no call. A pod that is gone: not an error.
	if _, err := RemoveFinalizer(ctx, pods.Patch, got, FinalizerStaging); err != nil || len(patches) != 1 {
		t.Errorf("finalizer already gone: err %v, %d patches", err, len(patches))
	}
	if _, err := RemoveFinalizer(ctx, pods.Patch, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "gone", Namespace: "ns", Finalizers: []string{FinalizerStaging}}}, FinalizerStaging); err != nil {
		t.Errorf("pod gone: %v", err)
	}

	// Adding: appended, on the version read; a second add does nothing.
	added, err := AddFinalizer(ctx, pods.Patch, got, FinalizerClaim)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"other/a", "other/b", FinalizerClaim}; !slices.Equal(added.Finalizers, want) {
		t.Errorf("finalizers %v, want %v", added.Finalizers, want)
	}
	if !strings.Contains(patches[len(patches)-1], `"resourceVersion":"`+got.ResourceVersion+`"`) {
		t.Errorf("the patch must apply to the version read only: %v", patches)
	}
	n := len(patches)
	if again, err := AddFinalizer(ctx, pods.Patch, added, FinalizerClaim); err != nil || again != nil || len(patches) != n {
		t.Errorf("finalizer already there: %v %v, %d patches", again, err, len(patches)-n)
	}
	// Adding to a pod that is gone is an error.
	if _, err := AddFinalizer(ctx, pods.Patch, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "gone", Namespace: "ns"}}, FinalizerClaim); err == nil || !strings.Contains(err.Error(), "ns/gone") {
		t.Errorf("adding to a pod that is gone: %v", err)
	}
}
