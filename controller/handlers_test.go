package controller

import (
	"slices"
	"sort"
	"testing"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/albertofaria/pav/protocol"
)

// queued empties a queue and returns what it held, sorted.
func queued(q workqueue.TypedRateLimitingInterface[string]) []string {
	var out []string
	for q.Len() > 0 {
		k, _ := q.Get()
		q.Done(k)
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestEventHandlersEnqueue(t *testing.T) {
	class := "sc"
	pvcs := []*corev1.PersistentVolumeClaim{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pending"}, Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "bound"}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "infeasible"}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv2"},
			Status: corev1.PersistentVolumeClaimStatus{AllocatedResourceStatuses: map[corev1.ResourceName]corev1.ClaimResourceStatus{
				corev1.ResourceStorage: corev1.PersistentVolumeClaimControllerResizeInfeasible}}},
	}
	podWith := func(phase protocol.Phase, volume string) *corev1.Pod {
		return protocol.BuildPod(&corev1.PodTemplateSpec{}, protocol.PodOptions{Provisioner: "prov", Phase: phase, Volume: volume,
			Annotations: map[string]string{protocol.AnnotationClaim: "ns/c"}})
	}
	tests := []struct {
		name                   string
		handle                 func(c *Controller)
		claims, volumes, provs []string
	}{
		{"claim", func(c *Controller) { c.onClaim(pvcs[0]) }, []string{"ns/pending"}, nil, nil},
		{"deleted claim seen late", func(c *Controller) {
			c.funcs(c.onClaim).OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/pending", Obj: pvcs[0]})
		}, []string{"ns/pending"}, nil, nil},
		{"PV: itself, its driver, its claim", func(c *Controller) {
			c.onVolume(&corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv"}, Spec: corev1.PersistentVolumeSpec{
				ClaimRef:               &corev1.ObjectReference{Namespace: "ns", Name: "bound"},
				PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "prov"}}}})
		}, []string{"ns/bound"}, []string{"pv"}, []string{"prov"}},
		{"class: the claims that name it", func(c *Controller) {
			c.onClass(&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "sc"}})
		}, []string{"ns/pending"}, nil, nil},
		{"provisioner: unbound claims, and those whose expansion it did not allow", func(c *Controller) { c.onProvisioner(provisionerFixture("prov")) }, []string{"ns/infeasible", "ns/pending"}, nil, []string{"prov"}},
		{"provisioner's status written: only itself", func(c *Controller) {
			old := provisionerFixture("prov")
			p := old.DeepCopy()
			p.ResourceVersion = "2"
			p.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue}}
			c.provisionerFuncs().OnUpdate(old, p)
		}, nil, nil, []string{"prov"}},
		{"provisioner's finalizer added: only itself", func(c *Controller) {
			old := provisionerFixture("prov")
			p := old.DeepCopy()
			p.Finalizers = []string{protocol.FinalizerProvisioner}
			c.provisionerFuncs().OnUpdate(old, p)
		}, nil, nil, []string{"prov"}},
		{"provisioner's spec changed: the claims too", func(c *Controller) {
			old := provisionerFixture("prov")
			p := old.DeepCopy()
			p.Generation++
			c.provisionerFuncs().OnUpdate(old, p)
		}, []string{"ns/infeasible", "ns/pending"}, nil, []string{"prov"}},
		{"provisioner being deleted: the claims too", func(c *Controller) {
			old := provisionerFixture("prov")
			p := old.DeepCopy()
			now := metav1.Now()
			p.DeletionTimestamp = &now
			c.provisionerFuncs().OnUpdate(old, p)
		}, []string{"ns/infeasible", "ns/pending"}, nil, []string{"prov"}},
		{"provisioner deleted: the claims too", func(c *Controller) {
			c.provisionerFuncs().OnDelete(cache.DeletedFinalStateUnknown{Key: "prov", Obj: provisionerFixture("prov")})
		}, []string{"ns/infeasible", "ns/pending"}, nil, []string{"prov"}},
		{"content of a provisioner: not the provisioner", func(c *Controller) {
			c.onContent(contentFixture(snapshotv1.VolumeSnapshotContentDelete))
		}, nil, nil, nil},
		{"content of a provisioner being deleted: the provisioner (its contents hold it)", func(c *Controller) {
			p := provisionerFixture("prov")
			now := metav1.Now()
			p.DeletionTimestamp = &now
			if err := c.provInformer.GetStore().Update(p); err != nil {
				panic(err)
			}
			c.onContent(contentFixture(snapshotv1.VolumeSnapshotContentDelete))
		}, nil, nil, []string{"prov"}},
		{"CSIDriver", func(c *Controller) {
			c.onCSIDriver(&storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "prov"}})
		}, nil, nil, []string{"prov"}},
		{"creation pod: its claim", func(c *Controller) { c.onPod(podWith(protocol.PhaseCreation, "")) }, []string{"ns/c"}, nil, []string{"prov"}},
		{"deletion pod of a PV", func(c *Controller) { c.onPod(podWith(protocol.PhaseDeletion, "pv")) }, []string{"ns/c"}, []string{"pv"}, []string{"prov"}},
		{"staging pod: not the claim's business", func(c *Controller) { c.onPod(podWith(protocol.PhaseStaging, "pv")) }, nil, []string{"pv"}, []string{"prov"}},
		{"not a PaV pod", func(c *Controller) { c.onPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x"}}) }, nil, nil, nil},
		{"not an object", func(c *Controller) { c.onPod("junk"); c.onVolume(nil); c.onClaim(42) }, nil, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			for _, pvc := range pvcs {
				if err := h.c.claimIndexer.Add(pvc); err != nil {
					t.Fatal(err)
				}
			}
			tt.handle(h.c)
			for _, q := range []struct {
				name      string
				got, want []string
			}{
				{"claims", queued(h.c.claimQueue), tt.claims},
				{"volumes", queued(h.c.volumeQueue), tt.volumes},
				{"provisioners", queued(h.c.provisionerQueue), tt.provs},
			} {
				if !slices.Equal(q.got, q.want) {
					t.Errorf("%s queue: %v, want %v", q.name, q.got, q.want)
				}
			}
		})
	}
}
