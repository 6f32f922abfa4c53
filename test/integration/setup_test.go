//go:build integration

package integration

import (
	"os"
	"sync"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/albertofaria/pav/controller"
	"github.com/albertofaria/pav/controller/enginetest"
	"github.com/albertofaria/pav/crds"
	"github.com/albertofaria/pav/kubeclient"
	"github.com/albertofaria/pav/test/integration/framework"
)

// One etcd + kube-apiserver for the package (framework.Shared); each test has
// its own namespace and its own cluster-scoped object names.
func TestMain(m *testing.M) { os.Exit(framework.RunMain(m)) }

var crdOnce sync.Once

func apiServer(t testing.TB) *rest.Config {
	t.Helper()
	env := framework.Shared(t)
	crdOnce.Do(func() { env.InstallCRDs(t, crds.CustomResourceDefinition) })
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 200, 400
	return cfg
}

// testEngine is the Engine the tests run the controller with: package
// templating's (real Jinja) unless PAV_IT_ENGINE=literal, which takes every
// field literally (controller/enginetest).
func testEngine(kube kubeclient.Interface) controller.Engine {
	if os.Getenv("PAV_IT_ENGINE") == "literal" {
		return enginetest.Literal{}
	}
	return controller.NewTemplatingEngine(kube)
}
