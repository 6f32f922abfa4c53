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

// Handles go into templates' shell commands: what real drivers' handles look
// like passes, anything a shell expands, splits or reads as an option is
// refused with the character named.
func TestCheckHandleCharacters(t *testing.T) {
	for _, h := range []string{
		"node-1/5f0c2b9e-8d1a-4c3e-9b7a-0a1b2c3d4e5f", // node/uuid
		"nfs.example.com:/exports/vol",                // host:/path
		"bucket-name", "my_bucket.v2",
		"csi-" + strings.Repeat("0123456789abcdef", 4), // csi-<sha256>, kubelet's inline IDs
		"dGVzdA+/x==", "YWJj=", // base64
		"server#share#subdir#", "0001-0009-rook-ceph-0000000000000002-uuid", "vol@2024,a%20b",
	} {
		if err := CheckHandle(h); err != nil {
			t.Errorf("CheckHandle(%q) = %v, want nil", h, err)
		}
	}
	for h, named := range map[string]string{
		"$(reboot)": `'$'`, "a`id`": "'`'", "a;rm": `';'`, "a|b": `'|'`, "a&b": `'&'`,
		"a b": "a space", "a\tb": "U+0009", "a\nb": "U+000A", `a"b`: `'"'`, "a'b": `'\''`,
		`a\b`: `'\\'`, "a*": `'*'`, "a?": `'?'`, "a[b]": `'['`, "{a,b}": `'{'`, "~root": `'~'`,
		"a!b": `'!'`, "a<b": `'<'`, "a>b": `'>'`, "a(b)": `'('`, "é": `'é'`, "a\x00b": "U+0000",
		"a\xffb": "invalid UTF-8", "-rf": "starts with '-'",
	} {
		err := CheckHandle(h)
		if err == nil || !strings.Contains(err.Error(), named) {
			t.Errorf("CheckHandle(%q) = %v, want an error naming %s", h, err, named)
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
