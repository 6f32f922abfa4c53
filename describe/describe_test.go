package describe

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/albertofaria/pav/crds/generated/clientset/versioned/fake"
	pavv1alpha1 "github.com/albertofaria/pav/crds/generated/clientset/versioned/typed/crds/v1alpha1"
	"github.com/albertofaria/pav/crds/v1alpha1"
	kubefake "github.com/albertofaria/pav/kubeclient/generated/clientset/fake"
	"github.com/albertofaria/pav/protocol"
)

type fakeClient struct {
	*kubefake.Clientset
	pav *fake.Clientset
}

func (f fakeClient) PavV1alpha1() pavv1alpha1.PavV1alpha1Interface { return f.pav.PavV1alpha1() }

func TestClaimNamesFailedPodAndItsError(t *testing.T) {
	class := "hello"
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "data", UID: "uid-1"},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending},
	}
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Provisioner: "hello-world"}
	creation := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pav-creation-uid-1", UID: "pod-1", CreationTimestamp: metav1.NewTime(time.Now().Add(-time.Minute)),
			Labels:      map[string]string{protocol.LabelClaimUID: "uid-1", protocol.LabelPhase: string(protocol.PhaseCreation), protocol.LabelProvisioner: "hello-world"},
			Annotations: map[string]string{protocol.AnnotationResultError: "the backend is full\n"}},
		Spec:   corev1.PodSpec{NodeName: "node-2", Containers: []corev1.Container{{Name: "create"}}},
		Status: corev1.PodStatus{Phase: corev1.PodFailed},
	}
	other := creation.DeepCopy() // another claim's
	other.Name, other.UID, other.Labels = "pav-creation-uid-2", "pod-2", map[string]string{protocol.LabelClaimUID: "uid-2"}
	event := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "e1"},
		InvolvedObject: corev1.ObjectReference{Kind: "PersistentVolumeClaim", Name: "data", UID: "uid-1"},
		Type:           corev1.EventTypeWarning, Reason: "ProvisioningFailed", Message: "creation pod failed: the backend is full",
		Source: corev1.EventSource{Component: "pav-controller"}, LastTimestamp: metav1.Now()}
	prov := &v1alpha1.PavProvisioner{ObjectMeta: metav1.ObjectMeta{Name: "hello-world"}, Status: v1alpha1.PavProvisionerStatus{
		Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Serving", Message: "all good"}}}}
	c := fakeClient{kubefake.NewSimpleClientset(pvc, sc, creation, other, event), fake.NewSimpleClientset(prov)}

	var out bytes.Buffer
	if err := Claim(context.Background(), c, "ns", "data", &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Status:       Pending",
		"hello-world\n  Ready=True (Serving): all good",
		"creation pod ns/pav-creation-uid-1 on node node-2: Failed",
		"/pav/error: the backend is full",
		"log of create (last lines):",
		"ProvisioningFailed",
		"pav-controller",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if n := strings.Count(out.String(), "ProvisioningFailed"); n != 1 {
		t.Errorf("the Event is shown %d times, want once:\n%s", n, out.String())
	}
	if strings.Contains(out.String(), "pav-creation-uid-2") {
		t.Errorf("output shows another claim's pod:\n%s", out.String())
	}

	out.Reset()
	if err := Provisioner(context.Background(), c, "hello-world", &out); err != nil {
		t.Fatal(err)
	}
	if want := "creation pod ns/pav-creation-uid-1 on node node-2: the backend is full"; !strings.Contains(out.String(), want) {
		t.Errorf("provisioner output lacks %q:\n%s", want, out.String())
	}
}
