package protocol

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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

// Patcher is the Patch method of a typed client (of pods, claims, PVs,
// PavProvisioners...), whose objects have type T.
type Patcher[T any] func(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)

// AddFinalizer adds finalizer f to this version of obj and returns the
// object as updated (the zero T if obj already had f).
func AddFinalizer[T any](ctx context.Context, patch Patcher[T], obj metav1.Object, f string) (T, error) {
	var zero T
	if HasFinalizer(obj, f) {
		return zero, nil
	}
	return patchFinalizers(ctx, patch, obj, append(slices.Clone(obj.GetFinalizers()), f), "adding", f)
}

// RemoveFinalizer removes finalizer f from this version of obj and returns
// the object as updated. An object that is gone, or does not have f, is not
// an error (the zero T is returned).
func RemoveFinalizer[T any](ctx context.Context, patch Patcher[T], obj metav1.Object, f string) (T, error) {
	var zero T
	if !HasFinalizer(obj, f) {
		return zero, nil
	}
	got, err := patchFinalizers(ctx, patch, obj, WithoutFinalizer(obj.GetFinalizers(), f), "removing", f)
	if apierrors.IsNotFound(err) {
		return zero, nil
	}
	return got, err
}

// patchFinalizers sets obj's finalizers to list, conditionally on obj's
// resourceVersion; a conflict is wrapped so that apierrors.IsConflict sees it.
func patchFinalizers[T any](ctx context.Context, patch Patcher[T], obj metav1.Object, list []string, verb, f string) (T, error) {
	var zero T
	data, err := json.Marshal(map[string]interface{}{"metadata": map[string]interface{}{
		"resourceVersion": obj.GetResourceVersion(),
		"finalizers":      list,
	}})
	if err != nil {
		return zero, err
	}
	got, err := patch(ctx, obj.GetName(), types.MergePatchType, data, metav1.PatchOptions{})
	if err != nil {
		name := obj.GetName()
		if ns := obj.GetNamespace(); ns != "" {
			name = ns + "/" + name
		}
		return zero, fmt.Errorf("%s finalizer %s on %s: %w", verb, f, name, err)
	}
	return got, nil
}
