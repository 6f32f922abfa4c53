package protocol

import (
	"context"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

var managed = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{}}`)}}}

func testMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: name, UID: types.UID("uid-" + name), ResourceVersion: "7", Generation: 2,
		Labels:          map[string]string{"l": "v"},
		Annotations:     map[string]string{corev1.LastAppliedConfigAnnotation: "{}", "a": "b"},
		Finalizers:      []string{FinalizerVolume},
		OwnerReferences: []metav1.OwnerReference{{Name: "o"}},
		ManagedFields:   managed,
	}
}

// cached runs objs through a real informer (fake clientset) with transform
// and returns what its cache holds, by name.
func cached[T runtime.Object](t *testing.T, inf func(informers.SharedInformerFactory) cache.SharedIndexInformer, transform cache.TransformFunc, objs ...T) map[string]T {
	t.Helper()
	in := make([]runtime.Object, len(objs))
	for i, o := range objs {
		in[i] = o.DeepCopyObject()
	}
	factory := informers.NewSharedInformerFactory(fake.NewClientset(in...), 0)
	i := inf(factory)
	if err := i.SetTransform(transform); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	factory.Start(ctx.Done())
	defer factory.Shutdown() // after cancel: Shutdown waits for the informers to stop
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), i.HasSynced) {
		t.Fatal("cache did not sync")
	}
	out := map[string]T{}
	for _, o := range i.GetStore().List() {
		m, _ := o.(metav1.Object)
		out[m.GetName()] = o.(T)
	}
	return out
}

// withoutManagedFields is obj as the cache should hold it.
func withoutManagedFields[T runtime.Object](obj T) T {
	c := obj.DeepCopyObject().(T)
	any(c).(metav1.Object).SetManagedFields(nil)
	return c
}

func TestStripManagedFieldsKeepsTheRest(t *testing.T) {
	class := "sc"
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: func() metav1.ObjectMeta { m := testMeta("c"); m.Namespace = "ns"; return m }(),
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: &class, VolumeName: "pv",
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
	}
	got := cached(t, func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
		return f.Core().V1().PersistentVolumeClaims().Informer()
	}, StripManagedFields, pvc)["c"]
	if got == nil || got.ManagedFields != nil {
		t.Fatalf("cached claim %+v still has managedFields", got)
	}
	if want := withoutManagedFields(pvc); !reflect.DeepEqual(got, want) {
		t.Errorf("cached claim\n%+v\nwant\n%+v", got, want)
	}
	// anything that is not an object passes unchanged
	if o, err := StripManagedFields("x"); o != "x" || err != nil {
		t.Errorf("StripManagedFields(\"x\") = %v, %v", o, err)
	}
}

func TestStripVolumeToLookup(t *testing.T) {
	csi := &corev1.PersistentVolume{
		ObjectMeta: testMeta("csi"),
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			StorageClassName:              "sc",
			ClaimRef:                      &corev1.ObjectReference{Namespace: "ns", Name: "c", UID: "u", ResourceVersion: "9"},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: "p", VolumeHandle: "h", VolumeAttributes: map[string]string{"k": "v"}}},
		},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound},
	}
	other := &corev1.PersistentVolume{
		ObjectMeta: testMeta("nfs"),
		Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
			NFS: &corev1.NFSVolumeSource{Server: "s", Path: "/x"}}},
	}
	got := cached(t, func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
		return f.Core().V1().PersistentVolumes().Informer()
	}, StripVolumeToLookup, csi, other)
	want := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "csi", UID: csi.UID, ResourceVersion: got["csi"].ResourceVersion},
		Spec: corev1.PersistentVolumeSpec{
			Capacity: csi.Spec.Capacity,
			ClaimRef: &corev1.ObjectReference{Namespace: "ns", Name: "c", UID: "u"},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: "p", VolumeHandle: "h"}},
		},
	}
	if !reflect.DeepEqual(got["csi"], want) || got["csi"].ResourceVersion == "" {
		t.Errorf("cached CSI volume\n%+v\nwant\n%+v", got["csi"], want)
	}
	want = &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "nfs", UID: other.UID, ResourceVersion: got["nfs"].ResourceVersion}}
	if !reflect.DeepEqual(got["nfs"], want) || got["nfs"].ResourceVersion == "" {
		t.Errorf("cached non-CSI volume %+v, want only its name, UID and resourceVersion", got["nfs"])
	}
}
