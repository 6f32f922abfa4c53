// Package framework is the small toolkit PaV's end-to-end tests (build tag e2e,
// under test/e2e) use against the live local cluster:
//
//	func TestSomething(t *testing.T) {
//		f := framework.New(t) // clientset + a fresh namespace, deleted when the test ends
//		pod := f.CreatePod(&corev1.Pod{...})
//		f.WaitForPod(pod.Name, 2*time.Minute, framework.PodSucceeded)
//		t.Log(f.PodLogs(pod.Name, ""))
//	}
//
// The kubeconfig is $PAV_KUBECONFIG, else /var/lib/pav-cluster/kubeconfig. The API
// server is only reachable inside the cluster's network namespace: `make e2e` runs
// the test binaries there (hack/cluster/netns-exec). Waits use watches, never
// sleep loops, and fail with the object's last state and the namespace's events.
package framework

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	pavclient "github.com/albertofaria/pav/crds/generated/clientset/versioned"
	pavtyped "github.com/albertofaria/pav/crds/generated/clientset/versioned/typed/crds/v1alpha1"
	"github.com/albertofaria/pav/protocol"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// DefaultKubeconfig is where `make cluster-up` writes the admin kubeconfig.
const DefaultKubeconfig = "/var/lib/pav-cluster/kubeconfig"

// Images imported by `make images cluster-load` (imagePullPolicy must not be Always:
// there is no registry).
const (
	// TestImage is busybox-static plus bash; also imported as busybox:latest,
	// ubuntu:20.04 and alpine:3.15.
	TestImage = "docker.io/library/pav-test:latest"
	// PavImage is PaV's own image, built from cmd/pav.
	PavImage = "docker.io/library/pav:latest"
)

// PaV's install (deployment.yaml): its namespace and the label selector of
// its node plugin pods (on the local cluster also those of node 3's pool).
const (
	PavNamespace   = "pav"
	NodePluginPods = "app.kubernetes.io/component=node-agent"
)

// KubeconfigPath returns $PAV_KUBECONFIG, else DefaultKubeconfig.
func KubeconfigPath() string {
	if p := os.Getenv("PAV_KUBECONFIG"); p != "" {
		return p
	}
	return DefaultKubeconfig
}

// LoadConfig loads the cluster's admin rest.Config from KubeconfigPath.
func LoadConfig() (*rest.Config, error) {
	path := KubeconfigPath()
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig %s (is the cluster up? `make cluster-up`): %w", path, err)
	}
	// Tests create objects in bursts; the client-side default (5 qps) only slows them down.
	cfg.QPS, cfg.Burst = 50, 100
	return cfg, nil
}

// Framework bundles a test, a clientset and the test's own namespace.
type Framework struct {
	T         testing.TB
	Config    *rest.Config
	Client    kubernetes.Interface
	Namespace string
	// Ctx is cancelled when the test ends.
	Ctx context.Context
}

// New connects to the cluster and creates a namespace for the test, deleted (with
// everything in it) when the test ends, without waiting unless PAV_E2E_WAIT_CLEANUP
// is set; PAV_E2E_KEEP_NAMESPACES keeps it. If the test failed, the namespace's
// pods, their logs and events are logged first.
func New(t testing.TB) *Framework {
	t.Helper()
	cfg, err := LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("creating clientset: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &Framework{T: t, Config: cfg, Client: client, Ctx: ctx}
	ns, err := CreateNamespace(ctx, client, NamespacePrefix(t.Name()))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	f.Namespace = ns
	t.Cleanup(func() {
		defer cancel()
		if t.Failed() {
			f.Dump()
		}
		if os.Getenv("PAV_E2E_KEEP_NAMESPACES") != "" {
			t.Logf("keeping namespace %s (PAV_E2E_KEEP_NAMESPACES is set)", ns)
			return
		}
		// Waiting for the namespace to go costs 5 s or more (the namespace controller,
		// pods' grace periods) and tests do not share names: only wait if asked to.
		wait := os.Getenv("PAV_E2E_WAIT_CLEANUP") != ""
		dctx, dcancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer dcancel()
		if err := DeleteNamespace(dctx, client, ns, wait); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return f
}

var nonName = regexp.MustCompile(`[^a-z0-9-]+`)

// NamespacePrefix turns a test name into a DNS-label prefix: "e2e-<name>-".
func NamespacePrefix(testName string) string {
	s := strings.Trim(nonName.ReplaceAllString(strings.ToLower(testName), "-"), "-")
	if len(s) > 40 {
		s = strings.TrimRight(s[:40], "-")
	}
	return "e2e-" + s + "-"
}

// CreateNamespace creates a namespace named prefix plus a random suffix and waits
// for its default ServiceAccount (pods are refused until it exists). PaV may
// run its pods there (the tests' provisioners run them in the test's
// namespace): it is labelled as an admin allows that.
func CreateNamespace(ctx context.Context, c kubernetes.Interface, prefix string) (string, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   fmt.Sprintf("%s%05d", prefix, rand.IntN(100000)),
		Labels: map[string]string{"pav.albertofaria.github.io/e2e": "true", protocol.LabelAllowPods: "true"},
	}}
	ns, err := c.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("creating test namespace: %w", err)
	}
	if err := WaitForServiceAccount(ctx, c, ns.Name, "default", time.Minute); err != nil {
		return "", err
	}
	return ns.Name, nil
}

// DeleteNamespace deletes a namespace and, if wait is set, waits until it is gone.
func DeleteNamespace(ctx context.Context, c kubernetes.Interface, name string, wait bool) error {
	err := c.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("deleting namespace %s: %w", name, err)
	}
	if !wait {
		return nil
	}
	return WaitForDeletion(ctx, c.CoreV1().Namespaces(), name)
}

// CreatePod creates pod in the test namespace, failing the test on error.
func (f *Framework) CreatePod(pod *corev1.Pod) *corev1.Pod {
	f.T.Helper()
	pod.Namespace = f.Namespace
	created, err := f.Client.CoreV1().Pods(f.Namespace).Create(f.Ctx, pod, metav1.CreateOptions{})
	if err != nil {
		f.T.Fatalf("creating pod %s: %v", pod.Name, err)
	}
	return created
}

// DeletePod deletes a pod of the test namespace and waits until it is gone.
func (f *Framework) DeletePod(name string, timeout time.Duration) {
	f.T.Helper()
	ctx, cancel := context.WithTimeout(f.Ctx, timeout)
	defer cancel()
	err := f.Client.CoreV1().Pods(f.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		f.T.Fatalf("deleting pod %s: %v", name, err)
	}
	if err := WaitForDeletion(ctx, f.Client.CoreV1().Pods(f.Namespace), name); err != nil {
		f.T.Fatal(err)
	}
}

// WaitForPod waits until cond holds for the pod in the test namespace and returns
// it, failing the test (with the pod's state) on timeout or if cond errs.
func (f *Framework) WaitForPod(name string, timeout time.Duration, cond PodCondition) *corev1.Pod {
	f.T.Helper()
	pod, err := WaitForPod(f.Ctx, f.Client, f.Namespace, name, timeout, cond)
	if err != nil {
		f.T.Fatal(err)
	}
	return pod
}

// PodLogs returns the logs of a container of a pod in the test namespace
// (container may be empty for single-container pods).
func (f *Framework) PodLogs(name, container string) string {
	f.T.Helper()
	logs, err := PodLogs(f.Ctx, f.Client, f.Namespace, name, container)
	if err != nil {
		f.T.Fatal(err)
	}
	return logs
}

// PodLogs returns a container's logs.
func PodLogs(ctx context.Context, c kubernetes.Interface, ns, name, container string) (string, error) {
	b, err := c.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{Container: container}).DoRaw(ctx)
	if err != nil {
		return "", fmt.Errorf("getting logs of pod %s/%s: %w", ns, name, err)
	}
	return string(b), nil
}

// Kubectl runs kubectl against the cluster in the test namespace (add -n to
// override) and returns its stdout; stderr is part of the error.
func (f *Framework) Kubectl(args ...string) (string, error) {
	return Kubectl(f.Ctx, append([]string{"--namespace", f.Namespace}, args...)...)
}

// Kubectl runs kubectl with the cluster's kubeconfig: hack/cluster/kubectl of this
// repository if found (it works inside and outside the cluster's netns), else
// kubectl from PATH.
func Kubectl(ctx context.Context, args ...string) (string, error) {
	var cmd *exec.Cmd
	if root, err := RepoRoot(); err == nil {
		cmd = exec.CommandContext(ctx, filepath.Join(root, "hack/cluster/kubectl"), args...)
		cmd.Env = append(os.Environ(), "PAV_KUBECONFIG="+KubeconfigPath())
	} else {
		cmd = exec.CommandContext(ctx, "kubectl", append([]string{"--kubeconfig", KubeconfigPath()}, args...)...)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// KubectlManifest is Kubectl with manifest (if not empty) written to a
// file that takes the place of each argument "-" (as in "apply -f -").
func KubectlManifest(ctx context.Context, manifest string, args ...string) (string, error) {
	if manifest != "" {
		f, err := os.CreateTemp("", "manifest-*.yaml")
		if err != nil {
			return "", err
		}
		defer os.Remove(f.Name())
		if _, err := f.WriteString(manifest); err != nil {
			f.Close()
			return "", err
		}
		if err := f.Close(); err != nil {
			return "", err
		}
		args = slices.Clone(args)
		for i, a := range args {
			if a == "-" {
				args[i] = f.Name()
			}
		}
	}
	return Kubectl(ctx, args...)
}

// RepoRoot finds the repository root (the directory holding PaV's go.mod) from
// the working directory upwards; test binaries run in their package directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.Contains(b, []byte("module github.com/albertofaria/pav\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no PaV go.mod above the working directory")
		}
		dir = parent
	}
}

// Dump logs the test namespace's pods (with their containers' logs) and events,
// to explain a failure.
func (f *Framework) Dump() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, args := range [][]string{
		{"get", "pods,pvc,pv", "-o", "wide"},
		{"get", "events", "--sort-by=.lastTimestamp"},
	} {
		out, err := Kubectl(ctx, append([]string{"--namespace", f.Namespace}, args...)...)
		f.T.Logf("kubectl %s:\n%s%v", strings.Join(args, " "), out, errString(err))
	}
	pods, err := f.Client.CoreV1().Pods(f.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, p := range pods.Items {
		for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
			logs, err := PodLogs(ctx, f.Client, f.Namespace, p.Name, c.Name)
			f.T.Logf("logs of %s/%s:\n%s%v", p.Name, c.Name, logs, errString(err))
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// PavProvisioners is a client of PavProvisioners for the cluster of cfg.
func PavProvisioners(cfg *rest.Config) (pavtyped.PavProvisionerInterface, error) {
	cs, err := pavclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return cs.PavV1alpha1().PavProvisioners(), nil
}
