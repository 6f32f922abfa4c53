package controller

import (
	"context"
	"reflect"
	"testing"
	"time"

	pavfake "github.com/albertofaria/pav/crds/generated/clientset/versioned/fake"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/kubeclient"
	"github.com/albertofaria/pav/kubeclient/generated/clientset/fake"
	"github.com/albertofaria/pav/protocol"
)

// The controller's caches hold every object as the API server has it but
// for managedFields (templates see claims, PVs and classes whole), and of
// Nodes only the name.
func TestCachesDropOnlyManagedFields(t *testing.T) {
	managed := []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}}
	md := func(name, ns string) metav1.ObjectMeta {
		return metav1.ObjectMeta{
			Name: name, Namespace: ns, UID: "u-" + "x", ResourceVersion: "3",
			Labels:        map[string]string{protocol.LabelPhase: string(protocol.PhaseCreation), "l": "v"},
			Annotations:   map[string]string{corev1.LastAppliedConfigAnnotation: "{}", "a": "b"},
			Finalizers:    []string{"f"},
			ManagedFields: managed,
		}
	}
	class := "sc"
	objs := []runtime.Object{
		&corev1.PersistentVolumeClaim{ObjectMeta: md("c", "ns"), Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &class, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}},
		&corev1.PersistentVolume{ObjectMeta: md("pv", ""), Spec: corev1.PersistentVolumeSpec{
			ClaimRef:               &corev1.ObjectReference{Namespace: "ns", Name: "c"},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "p", VolumeHandle: "h"}}}},
		&storagev1.StorageClass{ObjectMeta: md("sc", ""), Provisioner: "p", Parameters: map[string]string{"k": "v"}},
		&storagev1.CSIDriver{ObjectMeta: md("p", ""), Spec: storagev1.CSIDriverSpec{PodInfoOnMount: new(true)}},
		&corev1.Pod{ObjectMeta: md("pod", "ns"), Spec: corev1.PodSpec{NodeName: "n", Containers: []corev1.Container{{Name: "c", Image: "i"}}},
			Status: corev1.PodStatus{Phase: corev1.PodSucceeded}},
		&corev1.Node{ObjectMeta: md("n", ""), Spec: corev1.NodeSpec{PodCIDR: "10.0.0.0/24"}},
	}
	prov := &v1alpha1.PavProvisioner{ObjectMeta: md("p", ""), Spec: v1alpha1.PavProvisionerSpec{ProvisioningModes: []v1alpha1.ProvisioningMode{v1alpha1.Dynamic}}}
	kube := fake.NewSimpleClientset(objs...)
	c, err := New(Config{Kube: kube, Pav: pavfake.NewSimpleClientset(prov), Engine: stubEngine{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer kubeclient.Run(ctx, c.informers...)()
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		t.Fatal("caches did not sync")
	}

	stores := map[string]cache.Store{
		"PersistentVolumeClaim": c.claimIndexer,
		"PersistentVolume":      c.pvIndexer,
		"StorageClass":          c.classIndexer,
		"CSIDriver":             c.csiDriverIndexer,
		"Pod":                   c.podIndexer,
	}
	for _, obj := range append(objs[:len(objs)-1], prov) {
		kind := reflect.TypeOf(obj).Elem().Name()
		store := stores[kind]
		if kind == "PavProvisioner" {
			store = c.provInformer.GetStore()
		}
		key, _ := cache.MetaNamespaceKeyFunc(obj)
		got, ok, _ := store.GetByKey(key)
		if !ok {
			t.Errorf("%s %s not cached", kind, key)
			continue
		}
		want := obj.DeepCopyObject()
		want.(metav1.Object).SetManagedFields(nil)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("cached %s\n%+v\nwant\n%+v", kind, got, want)
		}
	}
	node, _ := c.nodes.Get("n")
	if node == nil || node.Name != "n" || node.Spec.PodCIDR != "" || node.Labels["l"] != "v" || node.Annotations != nil {
		t.Errorf("cached node %+v, want only its name, UID, resourceVersion and labels", node)
	}
}
