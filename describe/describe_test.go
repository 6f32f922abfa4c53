package describe

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

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

// What pods and tenants wrote reaches the terminal as text: no escape
// sequence, carriage return or bidirectional override acts on it; line
// breaks stay where describe's layout keeps them.
func TestPodWrittenTextIsEscaped(t *testing.T) {
	class := "hello"
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "data", UID: "uid-1"},
		Spec:       corev1.PersistentVolumeClaimSpec{StorageClassName: &class},
		Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending},
	}
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Provisioner: "hello-world"}
	labels := func(phase protocol.Phase) map[string]string {
		return map[string]string{protocol.LabelClaimUID: "uid-1", protocol.LabelPhase: string(phase), protocol.LabelProvisioner: "hello-world"}
	}
	creation := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pav-creation-uid-1", UID: "pod-1", Labels: labels(protocol.PhaseCreation),
			Annotations: map[string]string{protocol.AnnotationResultError: "\x1b]0;owned\x07disk full\r\x1b[2Kall fine\u202egnp.exe\nsecond\tline\xff"}},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "create"}}},
		Status: corev1.PodStatus{Phase: corev1.PodFailed},
	}
	validation := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pav-validation-uid-1", UID: "pod-2", Labels: labels(protocol.PhaseValidation)},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "validate"}}},
		Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: "validate",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: "\x1b[31mred\x1b[0m\x9b2J"}}}}},
	}
	event := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "e1"},
		InvolvedObject: corev1.ObjectReference{Kind: "PersistentVolumeClaim", Name: "data", UID: "uid-1"},
		Type:           corev1.EventTypeWarning, Reason: "ProvisioningFailed", Message: "up\x1b[1A\tover\bx",
		Source: corev1.EventSource{Component: "pav-controller"}, LastTimestamp: metav1.Now()}
	c := fakeClient{kubefake.NewSimpleClientset(pvc, sc, creation, validation, event), fake.NewSimpleClientset()}

	var out bytes.Buffer
	if err := Claim(context.Background(), c, "ns", "data", &out); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for i, r := range got {
		if (unicode.IsControl(r) && r != '\n') || unicode.Is(unicode.Bidi_Control, r) || r == utf8.RuneError {
			t.Errorf("output has %U at byte %d:\n%q", r, i, got)
		}
	}
	for _, want := range []string{
		`/pav/error: \x1b]0;owned\x07disk full\x0d\x1b[2Kall fine\u202egnp.exe` + "\n", // and its next line, indented
		`second\x09line\xff`,
		`\x1b[31mred\x1b[0m\x9b2J`,
		`up\x1b[1A\x09over\x08x`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}
