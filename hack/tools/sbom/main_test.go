package main

import (
	"runtime/debug"
	"testing"
)

// A module replaced by a directory (a fork in third_party) is named, and
// given a purl, as the module it forks at its version, marked modified; one
// replaced by another module is that module.
func TestGoModule(t *testing.T) {
	for _, c := range []struct {
		m                   *debug.Module
		name, version, purl string
		modified            bool
	}{
		{&debug.Module{Path: "k8s.io/api", Version: "v0.37.2"}, "k8s.io/api", "v0.37.2", "pkg:golang/k8s.io/api@v0.37.2", false},
		{&debug.Module{Path: "github.com/nikolalohinski/gonja/v2", Version: "v2.9.1", Replace: &debug.Module{Path: "./third_party/gonja"}},
			"github.com/nikolalohinski/gonja/v2", "v2.9.1", "pkg:golang/github.com/nikolalohinski/gonja/v2@v2.9.1", true},
		{&debug.Module{Path: "example.com/a", Version: "v1.0.0", Replace: &debug.Module{Path: "example.com/b", Version: "v1.0.1"}},
			"example.com/b", "v1.0.1", "pkg:golang/example.com/b@v1.0.1", false},
	} {
		p := goModule(c.m)
		if p.Name != c.name || p.VersionInfo != c.version || len(p.ExternalRefs) != 1 || p.ExternalRefs[0].Locator != c.purl || (p.Comment != "") != c.modified {
			t.Errorf("%s: %+v, want %s %s %s modified=%v", c.m.Path, p, c.name, c.version, c.purl, c.modified)
		}
	}
}
