//go:build integration

package integration

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/albertofaria/pav/controller"
	"github.com/albertofaria/pav/controller/enginetest"
	"github.com/albertofaria/pav/crds"
)

// The API server shared by all tests of this package (each test has its own
// namespace and its own cluster-scoped object names).
var sharedConfig *rest.Config
var setupErr error

func testEngine() controller.Engine { return enginetest.Literal{} }

func apiServer(t *testing.T) *rest.Config {
	t.Helper()
	if setupErr != nil {
		t.Fatalf("API server: %v", setupErr)
	}
	return rest.CopyConfig(sharedConfig)
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "pav-integration-")
	if err != nil {
		panic(err)
	}
	stop, cfg, err := startControlPlane(dir)
	sharedConfig, setupErr = cfg, err
	if err == nil {
		setupErr = installCRD(cfg)
	}
	code := m.Run()
	if stop != nil {
		stop()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func findAPIServer() (string, error) {
	if p := os.Getenv("KUBE_APISERVER"); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("kube-apiserver"); err == nil {
		return p, nil
	}
	cache := os.Getenv("PAV_CACHE")
	if cache == "" {
		cache = "/var/cache/pav"
	}
	matches, _ := filepath.Glob(filepath.Join(cache, "kube-*", "kube-apiserver"))
	if len(matches) > 0 {
		return matches[len(matches)-1], nil
	}
	return "", fmt.Errorf("kube-apiserver not found: set KUBE_APISERVER or run `make cluster-up` once (builds it into %s)", cache)
}

// startControlPlane runs etcd and kube-apiserver on loopback ports.
func startControlPlane(dir string) (func(), *rest.Config, error) {
	apiserver, err := findAPIServer()
	if err != nil {
		return nil, nil, err
	}
	etcdBin, err := exec.LookPath("etcd")
	if err != nil {
		return nil, nil, fmt.Errorf("etcd not found: %w", err)
	}
	var procs []*exec.Cmd
	stop := func() {
		for i := len(procs) - 1; i >= 0; i-- {
			_ = procs[i].Process.Kill()
			_ = procs[i].Wait()
		}
	}
	logf, _ := os.Create(filepath.Join(dir, "log"))
	etcdPort, peerPort := freePort(), freePort()
	etcd := exec.Command(etcdBin, "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", fmt.Sprintf("http://127.0.0.1:%d", etcdPort),
		"--advertise-client-urls", fmt.Sprintf("http://127.0.0.1:%d", etcdPort),
		"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peerPort),
		"--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peerPort),
		"--initial-cluster", fmt.Sprintf("default=http://127.0.0.1:%d", peerPort),
		"--unsafe-no-fsync")
	etcd.Stdout, etcd.Stderr = logf, logf
	if err := etcd.Start(); err != nil {
		return nil, nil, err
	}
	procs = append(procs, etcd)

	key, _ := rsa.GenerateKey(rand.Reader, 2048)
	keyFile := filepath.Join(dir, "sa.key")
	_ = os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600)
	token := "pav-integration-token"
	_ = os.WriteFile(filepath.Join(dir, "tokens.csv"), []byte(token+",admin,admin,system:masters\n"), 0o600)
	port := freePort()
	api := exec.Command(apiserver,
		"--etcd-servers", fmt.Sprintf("http://127.0.0.1:%d", etcdPort),
		"--bind-address", "127.0.0.1", "--secure-port", fmt.Sprint(port),
		"--cert-dir", filepath.Join(dir, "certs"),
		"--token-auth-file", filepath.Join(dir, "tokens.csv"),
		"--authorization-mode", "RBAC",
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-account-key-file", keyFile, "--service-account-signing-key-file", keyFile,
		"--service-cluster-ip-range", "10.0.0.0/24",
		// No controller-manager creates the "default" service accounts.
		"--disable-admission-plugins", "ServiceAccount",
	)
	api.Stdout, api.Stderr = logf, logf
	if err := api.Start(); err != nil {
		stop()
		return nil, nil, err
	}
	procs = append(procs, api)
	cfg := &rest.Config{
		Host:            fmt.Sprintf("https://127.0.0.1:%d", port),
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		QPS:             200, Burst: 400,
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		stop()
		return nil, nil, err
	}
	err = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		if _, err := kube.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
			return false, nil
		}
		_, err := kube.CoreV1().ServiceAccounts("default").List(ctx, metav1.ListOptions{})
		return err == nil, nil
	})
	if err != nil {
		stop()
		b, _ := os.ReadFile(filepath.Join(dir, "log"))
		return nil, nil, fmt.Errorf("API server did not come up: %v\n%s", err, tail(b, 3000))
	}
	return stop, cfg, nil
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

func installCRD(cfg *rest.Config) error {
	obj, err := crds.Unstructured()
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	gvr := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	ctx := context.Background()
	if _, err := dyn.Resource(gvr).Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("installing the CRD: %w", err)
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		cur, err := dyn.Resource(gvr).Get(ctx, crds.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		conds, _, _ := unstructuredConditions(cur.Object)
		for _, c := range conds {
			if c["type"] == "Established" && c["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
}

func unstructuredConditions(obj map[string]interface{}) ([]map[string]interface{}, bool, error) {
	status, _ := obj["status"].(map[string]interface{})
	list, _ := status["conditions"].([]interface{})
	var out []map[string]interface{}
	for _, c := range list {
		if m, ok := c.(map[string]interface{}); ok {
			out = append(out, m)
		}
	}
	return out, len(out) > 0, nil
}

