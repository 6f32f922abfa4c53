package describe

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/albertofaria/pav/crds/generated/clientset/versioned/fake"
	"github.com/albertofaria/pav/crds/v1alpha1"
	kubefake "github.com/albertofaria/pav/kubeclient/generated/clientset/fake"
	"github.com/albertofaria/pav/protocol"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/ with what describe prints now")

// The time the golden cases are described at.
var goldenNow = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func ago(d time.Duration) metav1.Time { return metav1.NewTime(goldenNow.Add(-d)) }

// A bound claim whose staging fails: the client pod waits, and kubelet's
// FailedMount Event on it says why; its other Events are not shown.
func stagingFailed() (objs []runtime.Object, provs []runtime.Object) {
	class := "hello"
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "data", UID: "claim-uid", CreationTimestamp: ago(10 * time.Minute)},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class, VolumeName: "pvc-claim-uid",
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
	}
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-claim-uid", UID: "pv-uid"}}
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Provisioner: "hello-world"}
	staging := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pav-staging-0123", UID: "staging-uid", CreationTimestamp: ago(2 * time.Minute),
			Labels:      map[string]string{protocol.LabelVolume: "pvc-claim-uid", protocol.LabelPhase: string(protocol.PhaseStaging), protocol.LabelProvisioner: "hello-world"},
			Annotations: map[string]string{protocol.AnnotationResultError: "mkdir: /pav/volume: Read-only file system\n"}},
		Spec:   corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "greeter"}}},
		Status: corev1.PodStatus{Phase: corev1.PodFailed},
	}
	client := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app", UID: "app-uid", CreationTimestamp: ago(3 * time.Minute)},
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "app"}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	bystander := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "other", UID: "other-uid"},
		Spec: corev1.PodSpec{NodeName: "node-2", Containers: []corev1.Container{{Name: "other"}}}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	event := func(name string, obj *corev1.Pod, typ, reason, from, msg string, at time.Duration) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: obj.Name, UID: obj.UID},
			Type:           typ, Reason: reason, Message: msg, Source: corev1.EventSource{Component: from, Host: obj.Spec.NodeName}, LastTimestamp: ago(at)}
	}
	provisioned := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "provisioned"},
		InvolvedObject: corev1.ObjectReference{Kind: "PersistentVolumeClaim", Name: "data", UID: "claim-uid"},
		Type:           corev1.EventTypeNormal, Reason: "ProvisioningSucceeded", Message: "Successfully provisioned volume pvc-claim-uid",
		Source: corev1.EventSource{Component: "pav-controller"}, LastTimestamp: ago(9 * time.Minute)}
	failedMount := event("failed-mount", client, corev1.EventTypeWarning, "FailedMount", "kubelet",
		"MountVolume.SetUp failed for volume \"pvc-claim-uid\" : rpc error: code = Internal desc = staging pod ns/pav-staging-0123 failed: mkdir: /pav/volume: Read-only file system", 90*time.Second)
	failedMount.Count = 3
	prov := &v1alpha1.PavProvisioner{ObjectMeta: metav1.ObjectMeta{Name: "hello-world", UID: "prov-uid", CreationTimestamp: ago(time.Hour)},
		Spec:   v1alpha1.PavProvisionerSpec{ProvisioningModes: []v1alpha1.ProvisioningMode{v1alpha1.Dynamic}},
		Status: v1alpha1.PavProvisionerStatus{Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Serving", Message: "serving on every node"}}}}
	return []runtime.Object{pvc, pv, sc, staging, client, bystander, provisioned, failedMount,
			event("scheduled", client, corev1.EventTypeNormal, "Scheduled", "default-scheduler", "Successfully assigned ns/app to node-1", 3*time.Minute),
			event("bystander", bystander, corev1.EventTypeWarning, "BackOff", "kubelet", "Back-off restarting failed container", time.Minute)},
		[]runtime.Object{prov}
}

// describe's output for each case is its golden file, testdata/<case>.golden
// (go test ./describe -run TestGolden -update rewrites them).
func TestGolden(t *testing.T) {
	defer func(f func() time.Time) { now = f }(now)
	now = func() time.Time { return goldenNow }
	objs, provs := stagingFailed()
	c := fakeClient{kubefake.NewSimpleClientset(objs...), fake.NewSimpleClientset(provs...)}
	for _, tt := range []struct {
		name     string
		describe func(*bytes.Buffer) error
	}{
		{"claim-staging-failed", func(b *bytes.Buffer) error { return Claim(context.Background(), c, "ns", "data", b) }},
		{"provisioner", func(b *bytes.Buffer) error { return Provisioner(context.Background(), c, "hello-world", b) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := tt.describe(&out); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", tt.name+".golden")
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to write it)", err)
			}
			if out.String() != string(want) {
				t.Errorf("output differs from %s (run with -update if the change is meant):\n--- got\n%s\n--- want\n%s", golden, out.String(), want)
			}
		})
	}
}
