package mounts

import (
	"os/exec"
	"strings"
	"testing"
)

// Linux mount mechanics know nothing of the API server: the package and
// its tests import no client-go, so whoever reads or reuses them needs no
// cluster, and a Kubernetes rule cannot creep in here.
func TestImportsNoClientGo(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command lists the package's dependencies: %v", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", "-test", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 {
		t.Fatal("go list -deps listed nothing")
	}
	for _, dep := range deps {
		if dep == "k8s.io/client-go" || strings.HasPrefix(dep, "k8s.io/client-go/") {
			t.Errorf("package mounts depends on %s", dep)
		}
	}
}
