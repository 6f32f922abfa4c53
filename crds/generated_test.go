package crds_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/albertofaria/pav/crds/generated/clientset/versioned/fake"
	pavlisters "github.com/albertofaria/pav/crds/generated/listers/crds/v1alpha1"
	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/kubeclient"
)

// The generated fake clientset, wired through an informer as the processes
// build theirs (kubeclient.NewInformer), serves the generated lister the
// PavProvisioners created, updated and deleted through it, template values
// included.
func TestFakeClientsetThroughInformerToLister(t *testing.T) {
	existing := &v1alpha1.PavProvisioner{
		ObjectMeta: metav1.ObjectMeta{Name: "existing"},
		Spec:       v1alpha1.PavProvisionerSpec{ProvisioningModes: []v1alpha1.ProvisioningMode{v1alpha1.Static}},
	}
	client := fake.NewSimpleClientset(existing)
	pavs := client.PavV1alpha1().PavProvisioners()
	inf := kubeclient.NewInformer(client, pavs, &v1alpha1.PavProvisioner{}, 0, kubeclient.Selector{})
	lister := pavlisters.NewPavProvisionerLister(inf.GetIndexer())

	// Each event the informer delivers, in order: the test waits on them, not on time.
	seen := make(chan string, 10)
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o interface{}) { seen <- "add " + o.(*v1alpha1.PavProvisioner).Name },
		UpdateFunc: func(_, n interface{}) { seen <- "update " + n.(*v1alpha1.PavProvisioner).Name },
		DeleteFunc: func(o interface{}) { seen <- "delete " + o.(*v1alpha1.PavProvisioner).Name },
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer kubeclient.Run(ctx, inf)()
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("cache not synced")
	}
	expect := func(event string) {
		t.Helper()
		if got := <-seen; got != event {
			t.Fatalf("informer event %q, want %q", got, event)
		}
	}
	expect("add existing")

	created := &v1alpha1.PavProvisioner{
		ObjectMeta: metav1.ObjectMeta{Name: "created", Labels: map[string]string{"team": "a"}},
		Spec: v1alpha1.PavProvisionerSpec{
			ProvisioningModes: []v1alpha1.ProvisioningMode{v1alpha1.Dynamic},
			VolumeCreation:    &v1alpha1.VolumeCreation{Capacity: v1alpha1.NewValue("{{ pvc.spec.resources.requests.storage }}")},
			VolumeStaging:     &v1alpha1.VolumeStaging{PodTemplate: v1alpha1.NewValue(map[string]interface{}{"spec": map[string]interface{}{}})},
		},
	}
	if _, err := pavs.Create(ctx, created, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("add created")
	got, err := lister.Get("created")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Spec, created.Spec) {
		t.Errorf("lister's spec %+v, want %+v", got.Spec, created.Spec)
	}
	if list, err := lister.List(labels.SelectorFromSet(labels.Set{"team": "a"})); err != nil || len(list) != 1 || list[0].Name != "created" {
		t.Errorf("List(team=a) = %v, %v; want [created]", list, err)
	}
	if list, err := lister.List(labels.Everything()); err != nil || len(list) != 2 {
		t.Errorf("List(everything) = %d PavProvisioners, %v; want 2", len(list), err)
	}

	got = got.DeepCopy()
	got.Status.ObservedGeneration = 3
	if _, err := pavs.UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("update created")
	if got, err := lister.Get("created"); err != nil || got.Status.ObservedGeneration != 3 {
		t.Errorf("after UpdateStatus the lister has %+v, %v; want observedGeneration 3", got, err)
	}

	if err := pavs.Delete(ctx, "existing", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("delete existing")
	if _, err := lister.Get("existing"); !apierrors.IsNotFound(err) {
		t.Errorf("lister.Get of a deleted PavProvisioner: %v, want NotFound", err)
	}
}

// A lister's object is the cache's: callers that change one change a
// DeepCopy. Every deep copy of a PavProvisioner (the generated ones, and
// Value's by hand) shares no memory with what it copied, down to the JSON
// values of templates, so that a change of the copy never reaches the cache.
func TestDeepCopySharesNoMemory(t *testing.T) {
	p := &v1alpha1.PavProvisioner{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"team": "a"},
			Finalizers: []string{"f"}, OwnerReferences: []metav1.OwnerReference{{Name: "o"}}},
		Spec: v1alpha1.PavProvisionerSpec{
			ProvisioningModes: []v1alpha1.ProvisioningMode{v1alpha1.Dynamic},
			VolumeCreation: &v1alpha1.VolumeCreation{Capacity: v1alpha1.NewValue("1Gi"),
				Handle: v1alpha1.NewValue([]interface{}{"h", map[string]interface{}{"k": []interface{}{"v"}}})},
			VolumeStaging: &v1alpha1.VolumeStaging{PodTemplate: v1alpha1.NewValue(map[string]interface{}{
				"spec": map[string]interface{}{"containers": []interface{}{map[string]interface{}{"name": "c"}}}})},
		},
		Status: v1alpha1.PavProvisionerStatus{Conditions: []metav1.Condition{{Type: "Ready"}}},
	}
	client := fake.NewSimpleClientset(p)
	inf := kubeclient.NewInformer(client, client.PavV1alpha1().PavProvisioners(), &v1alpha1.PavProvisioner{}, 0, kubeclient.Selector{})
	ctx, cancel := context.WithCancel(context.Background())
	defer kubeclient.Run(ctx, inf)()
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("cache not synced")
	}
	cached, err := pavlisters.NewPavProvisionerLister(inf.GetIndexer()).Get("p")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cached.Spec, p.Spec) {
		t.Fatalf("lister's spec %+v, want %+v", cached.Spec, p.Spec)
	}
	cp := cached.DeepCopy()
	if shared := sharedMemory(reflect.ValueOf(cached), reflect.ValueOf(cp), "PavProvisioner"); len(shared) > 0 {
		t.Errorf("DeepCopy shares memory with the cached object at %v", shared)
	}
	if !reflect.DeepEqual(cp, cached) {
		t.Errorf("DeepCopy differs: %+v, want %+v", cp, cached)
	}
	// What the walk promises, seen from the cache: a change deep in the copy's
	// template stays in the copy.
	cp.Spec.VolumeStaging.PodTemplate.Object.(map[string]interface{})["spec"].(map[string]interface{})["containers"].([]interface{})[0].(map[string]interface{})["name"] = "changed"
	again, _ := pavlisters.NewPavProvisionerLister(inf.GetIndexer()).Get("p")
	if !reflect.DeepEqual(again.Spec, p.Spec) {
		t.Errorf("a change of the copy reached the cache: %+v", again.Spec.VolumeStaging.PodTemplate.Object)
	}
}

// sharedMemory lists the paths at which a and b, walked together, hold the
// same map, slice or pointer (the same memory, not only equal contents).
func sharedMemory(a, b reflect.Value, path string) []string {
	if a.Kind() != b.Kind() || !a.IsValid() {
		return nil
	}
	var shared []string
	switch a.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice:
		if a.IsNil() || b.IsNil() {
			return nil
		}
		if a.Kind() == reflect.Slice && a.Len() == 0 {
			return nil // no element to share
		}
		if a.UnsafePointer() == b.UnsafePointer() {
			shared = append(shared, path)
		}
	}
	switch a.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !a.IsNil() && !b.IsNil() {
			shared = append(shared, sharedMemory(a.Elem(), b.Elem(), path)...)
		}
	case reflect.Struct:
		for i := range a.NumField() {
			shared = append(shared, sharedMemory(a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name)...)
		}
	case reflect.Slice, reflect.Array:
		for i := range min(a.Len(), b.Len()) {
			shared = append(shared, sharedMemory(a.Index(i), b.Index(i), fmt.Sprintf("%s[%d]", path, i))...)
		}
	case reflect.Map:
		for _, k := range a.MapKeys() {
			if bv := b.MapIndex(k); bv.IsValid() {
				shared = append(shared, sharedMemory(a.MapIndex(k), bv, fmt.Sprintf("%s[%v]", path, k))...)
			}
		}
	}
	return shared
}
