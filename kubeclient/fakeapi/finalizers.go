// Package fakeapi gives client-go's fake clientsets behaviour of the real
// API server that PaV's tests depend on.
package fakeapi

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
)

// HonorFinalizers gives a fake clientset the API server's finalizer rule for
// a resource: deleting an object that has finalizers only marks it deleted
// (at now()), and it goes when its last finalizer is removed.
func HonorFinalizers(f *k8stesting.Fake, tracker k8stesting.ObjectTracker, gvr schema.GroupVersionResource, now func() time.Time) {
	resource := gvr.Resource
	f.PrependReactor("delete", resource, func(a k8stesting.Action) (bool, runtime.Object, error) {
		d := a.(k8stesting.DeleteAction)
		obj, err := tracker.Get(gvr, d.GetNamespace(), d.GetName())
		if err != nil {
			return false, nil, nil
		}
		m := obj.(metav1.Object)
		if len(m.GetFinalizers()) == 0 {
			return false, nil, nil
		}
		if m.GetDeletionTimestamp() == nil {
			at := metav1.NewTime(now())
			m.SetDeletionTimestamp(&at)
			if err := tracker.Update(gvr, obj, d.GetNamespace()); err != nil {
				return true, nil, err
			}
		}
		return true, obj, nil
	})
	// An update or patch that removes the last finalizer of a deleted object deletes it.
	for _, verb := range []string{"update", "patch"} {
		f.PrependReactor(verb, resource, func(a k8stesting.Action) (bool, runtime.Object, error) {
			handled, obj, err := k8stesting.ObjectReaction(tracker)(a)
			if err != nil || obj == nil {
				return handled, obj, err
			}
			m := obj.(metav1.Object)
			if m.GetDeletionTimestamp() != nil && len(m.GetFinalizers()) == 0 {
				return true, obj, tracker.Delete(gvr, m.GetNamespace(), m.GetName())
			}
			return handled, obj, nil
		})
	}
}
