//go:build integration

package framework_test

import (
	"os"
	"testing"

	pavclient "github.com/albertofaria/pav/crds/generated/clientset/versioned"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/albertofaria/pav/crds"
	"github.com/albertofaria/pav/test/integration/framework"
)

func TestMain(m *testing.M) { os.Exit(framework.RunMain(m)) }

func TestNamespaceAndPod(t *testing.T) {
	env := framework.Shared(t)
	ctx := t.Context()
	c := kubernetes.NewForConfigOrDie(env.Config)
	ns, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "it-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// no ServiceAccount controller runs: pods must be accepted anyway
	_, err = c.CoreV1().Pods(ns.Name).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating a pod: %v", err)
	}
	pods, err := c.CoreV1().Pods(ns.Name).List(ctx, metav1.ListOptions{})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("listing pods: %v, %v", pods, err)
	}
}

func TestInstallPavProvisionerCRD(t *testing.T) {
	env := framework.Shared(t)
	env.InstallCRDs(t, crds.CustomResourceDefinition)
	env.InstallCRDs(t, crds.CustomResourceDefinition) // idempotent
	cs, err := pavclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	list, err := cs.PavV1alpha1().PavProvisioners().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing PavProvisioners after installing the CRD: %v", err)
	}
	if len(list.Items) != 0 {
		t.Fatalf("expected no PavProvisioners, got %d", len(list.Items))
	}
}

func TestSeparateEnv(t *testing.T) {
	env := framework.New(t)
	c := kubernetes.NewForConfigOrDie(env.Config)
	v, err := c.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kube-apiserver %s in %s", v.GitVersion, env.Dir)
}
