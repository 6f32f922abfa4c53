package crds_test

import (
	"context"
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
