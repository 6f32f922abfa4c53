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
	"github.com/albertofaria/pav/test/integration/framework"
)

// One etcd + kube-apiserver for the package (framework.Shared); each test has
// its own namespace and its own cluster-scoped object names.
func TestMain(m *testing.M) { os.Exit(framework.RunMain(m)) }

var crdOnce sync.Once

func apiServer(t *testing.T) *rest.Config {
	t.Helper()
	env := framework.Shared(t)
	crdOnce.Do(func() { env.InstallCRDs(t, crds.CustomResourceDefinition) })
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 200, 400
	return cfg
}

func testEngine() controller.Engine { return enginetest.Literal{} }
