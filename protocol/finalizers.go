package protocol

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

// PaV's finalizers change with optimistic concurrency, everywhere: a change
// applies only to the version of the object it was computed from (its
// resourceVersion), so it never undoes another writer's change; on a
// conflict the caller reads the object again and retries.

// HasFinalizer reports whether obj carries finalizer f.
func HasFinalizer(obj metav1.Object, f string) bool {
	return slices.Contains(obj.GetFinalizers(), f)
}

// WithoutFinalizer returns list without f.
func WithoutFinalizer(list []string, f string) []string {
	return slices.DeleteFunc(slices.Clone(list), func(x string) bool { return x == f })
}

// RemovePodFinalizer removes finalizer f from this version of pod. A pod
// that is gone, or no longer has f, is not an error; a conflict (the pod
// changed since it was read) is, wrapped so that apierrors.IsConflict sees it.
func RemovePodFinalizer(ctx context.Context, pods typedcorev1.PodInterface, pod *corev1.Pod, f string) error {
	if !HasFinalizer(pod, f) {
		return nil
	}
	patch, err := json.Marshal(map[string]interface{}{"metadata": map[string]interface{}{
		"resourceVersion": pod.ResourceVersion,
		"finalizers":      WithoutFinalizer(pod.Finalizers, f),
	}})
	if err != nil {
		return err
	}
	_, err = pods.Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing finalizer %s from pod %s/%s: %w", f, pod.Namespace, pod.Name, err)
	}
	return nil
}
