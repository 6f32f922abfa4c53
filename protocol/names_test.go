package protocol

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"slices"
	"strings"
	"testing"
)

// A handle is a path beneath its directory: slashes between names are fine,
// anything that steps out, back or aside is not.
func TestCheckHandle(t *testing.T) {
	for h, ok := range map[string]bool{
		"vol-1": true, "pool/vol-1": true, "a/b/c": true, "..a": true, "a..": true, "a.b": true,
		"": false, ".": false, "..": false, "/": false, "/data": false, "data/": false,
		"../../etc": false, "a/../b": false, "a/./b": false, "./a": false, "a//b": false,
		"a\nb": false, strings.Repeat("x", MaxHandleBytes+1): false,
	} {
		if err := CheckHandle(h); (err == nil) != ok {
			t.Errorf("CheckHandle(%q) = %v, want ok=%v", h, err, ok)
		}
	}
}

// Phases lists every Phase constant of the package: a phase left out would
// be a kind of PaV pod that policy pav-pod-exec does not guard (the
// integration test TestAccess checks the policy against Phases).
func TestPhasesListsEveryPhase(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	var consts []string
	for _, f := range pkgs["protocol"].Files {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				v := spec.(*ast.ValueSpec)
				if id, ok := v.Type.(*ast.Ident); ok && id.Name == "Phase" {
					for _, val := range v.Values {
						lit := val.(*ast.BasicLit)
						consts = append(consts, strings.Trim(lit.Value, `"`))
					}
				}
			}
		}
	}
	if len(consts) < 12 {
		t.Fatalf("found only %d Phase constants (%v): the parse misses some", len(consts), consts)
	}
	for _, c := range consts {
		if !slices.Contains(Phases, Phase(c)) {
			t.Errorf("phase %q is not in Phases", c)
		}
	}
	if len(Phases) != len(consts) {
		t.Errorf("Phases has %d phases, the package declares %d: %v", len(Phases), len(consts), consts)
	}
}
