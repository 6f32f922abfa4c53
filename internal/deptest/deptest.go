// Package deptest lists a package's dependencies with the go command, for
// the tests that pin what a package may link.
package deptest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Deps is `go list -deps` of the package in the test's directory (with its
// tests' dependencies if withTests), with cgo off as `make build` builds.
func Deps(t testing.TB, withTests bool) []string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command lists the package's dependencies: %v", err)
	}
	args := []string{"list", "-deps"}
	if withTests {
		args = append(args, "-test")
	}
	cmd := exec.Command(goTool, append(args, ".")...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 {
		t.Fatal("go list -deps listed nothing")
	}
	return deps
}

// NoClientGo fails t if the package in the test's directory, or its tests,
// depend on client-go.
func NoClientGo(t testing.TB) {
	t.Helper()
	for _, dep := range Deps(t, true) {
		if dep == "k8s.io/client-go" || strings.HasPrefix(dep, "k8s.io/client-go/") {
			t.Errorf("the package depends on %s", dep)
		}
	}
}
