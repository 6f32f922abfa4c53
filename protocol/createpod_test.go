package protocol

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/albertofaria/pav/kubeclient/generated/clientset/fake"
)

func creationPod(t *testing.T) *corev1.Pod {
	t.Helper()
	tmpl := &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant"}}
	return BuildPod(tmpl, PodOptions{Provisioner: "prov", Phase: PhaseCreation, Name: PodName(PhaseCreation, "uid"), ClaimUID: "uid", HostDir: "/d"})
}

// A tenant's pod with PaV's name (even with look-alike labels that are not
// PaV's full set) is never taken for PaV's; PaV's pod runs under another name,
// and a second call finds that pod instead of creating a third.
func TestCreatePodIgnoresSquatter(t *testing.T) {
	ctx := context.Background()
	want := creationPod(t)
	squat := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: want.Name,
		Labels:      map[string]string{LabelPhase: string(PhaseCreation), LabelClaimUID: "uid"},
		Annotations: map[string]string{AnnotationResultsCollected: "true", AnnotationResultHandle: "."}}}
	kube := fake.NewSimpleClientset(squat)
	pods := kube.CoreV1().Pods("tenant")

	got, squatter, err := CreatePod(ctx, pods, want)
	if err != nil {
		t.Fatal(err)
	}
	if squatter == nil || squatter.Name != want.Name {
		t.Errorf("squatter = %v, want the tenant's pod", squatter)
	}
	if got.Name == want.Name || !strings.HasPrefix(got.Name, want.Name+"-") || !SamePavPod(got, want) {
		t.Errorf("got pod %s with labels %v, want PaV's pod under an alternate name", got.Name, got.Labels)
	}
	again, _, err := CreatePod(ctx, pods, want)
	if err != nil {
		t.Fatal(err)
	}
	if again.Name != got.Name {
		t.Errorf("second call used %s, want the pod of the first call %s", again.Name, got.Name)
	}
	list, _ := pods.List(ctx, metav1.ListOptions{})
	if len(list.Items) != 2 {
		t.Errorf("%d pods exist, want the squatter and one PaV pod", len(list.Items))
	}
}

func TestCreatePodReusesOwnPod(t *testing.T) {
	ctx := context.Background()
	want := creationPod(t)
	kube := fake.NewSimpleClientset(want.DeepCopy())
	got, squatter, err := CreatePod(ctx, kube.CoreV1().Pods("tenant"), want)
	if err != nil || squatter != nil || got.Name != want.Name {
		t.Errorf("CreatePod = %v, %v, %v; want the existing PaV pod", got.Name, squatter, err)
	}
}

func TestAlternatePodNameIsALabel(t *testing.T) {
	name := AlternatePodName(PodName(PhaseUnstaging, strings.Repeat("x", 80)))
	if len(name) > 63 || !strings.HasPrefix(name, "pav-unstaging-") {
		t.Errorf("AlternatePodName = %q", name)
	}
	if AlternatePodName("a") == AlternatePodName("a") {
		t.Error("alternate names repeat")
	}
}
