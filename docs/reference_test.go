// Package docs holds PaV's documentation. Its test keeps reference.md
// complete: every field of the CRD, every variable of each phase's context
// and every /pav file, each taken from the code that defines it.
package docs_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/albertofaria/pav/crds"
	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/templating"
)

const reference = "reference.md"

// The parts of reference.md the test reads: each a "## " section.
const (
	fieldsSection   = "## PavProvisioner fields"
	contextsSection = "## Template contexts"
	filesSection    = "## The /pav directory"
)

// contextBuilders names, for a phase that templating.ContextVariables does
// not describe, the functions of package templating that build its context
// (the keys they write into their vars map are its variables).
var contextBuilders = map[protocol.Phase][]string{
	protocol.PhaseSnapshotCreation:      {"snapshotVars"},
	protocol.PhaseSnapshotDeletion:      {"snapshotVars"},
	protocol.PhaseGroupSnapshotCreation: {"groupSnapshotVars"},
	protocol.PhaseGroupSnapshotDeletion: {"groupSnapshotVars"},
	protocol.PhaseCapacity:              {"StorageCapacity"},
}

// TestReferenceListsEveryCRDField walks the CRD's schema: every property
// under spec and status is a row of the fields table, and every row is a
// property.
func TestReferenceListsEveryCRDField(t *testing.T) {
	crd, err := crds.Unstructured()
	if err != nil {
		t.Fatal(err)
	}
	versions, _ := crd.Object["spec"].(map[string]interface{})["versions"].([]interface{})
	if len(versions) == 0 {
		t.Fatal("the CRD has no versions")
	}
	want := map[string]bool{}
	for _, v := range versions {
		schema := dig(v, "schema", "openAPIV3Schema")
		for _, top := range []string{"spec", "status"} {
			walkSchema(dig(schema, "properties", top), top, want)
			delete(want, top)
		}
	}
	section := sectionOf(t, readReference(t), fieldsSection, 2)
	documented := rowKeys(section)
	for _, path := range sortedKeys(want) {
		if !documented[path] {
			t.Errorf("%s: the CRD field %s has no row \"| `%s` |\" under %q", reference, path, path, fieldsSection)
		}
	}
	for _, path := range sortedKeys(documented) {
		if !want[path] {
			t.Errorf("%s: %q lists %s, which the CRD does not have", reference, fieldsSection, path)
		}
	}
}

// walkSchema adds path and every property below it; list items are "[]".
func walkSchema(node interface{}, path string, out map[string]bool) {
	if node == nil {
		return
	}
	out[path] = true
	if props, ok := dig(node, "properties").(map[string]interface{}); ok {
		for name, p := range props {
			walkSchema(p, path+"."+name, out)
		}
	}
	if items := dig(node, "items"); items != nil {
		if props, ok := dig(items, "properties").(map[string]interface{}); ok {
			for name, p := range props {
				walkSchema(p, path+"[]."+name, out)
			}
		}
	}
}

func dig(node interface{}, keys ...string) interface{} {
	for _, k := range keys {
		m, ok := node.(map[string]interface{})
		if !ok {
			return nil
		}
		node = m[k]
	}
	return node
}

// TestReferenceListsEveryContextVariable: each phase of package protocol has
// a "### `<phase>`" section under the template contexts, with a row for
// each variable of its context; and every name a context builder of package
// templating writes is documented in some phase.
func TestReferenceListsEveryContextVariable(t *testing.T) {
	contexts := sectionOf(t, readReference(t), contextsSection, 2)
	builders := contextKeysByFunction(t, filepath.Join("..", "templating"))
	documentedAnywhere := map[string]bool{}
	for _, phase := range phases(t) {
		names := templating.ContextVariables(protocol.Phase(phase), []v1alpha1.ProvisioningMode{v1alpha1.Dynamic, v1alpha1.Static})
		if len(names) == 0 {
			fns, ok := contextBuilders[protocol.Phase(phase)]
			if !ok {
				t.Errorf("phase %q: templating.ContextVariables has no names for it, and contextBuilders in this test names no function building its context: add one, and document the context in %s", phase, reference)
				continue
			}
			for _, fn := range fns {
				keys, ok := builders[fn]
				if !ok {
					t.Errorf("phase %q: templating has no function %s writing a vars map (renamed? update contextBuilders)", phase, fn)
				}
				names = append(names, keys...)
			}
		}
		section := sectionOf(t, contexts, "### `"+phase+"`", 3)
		documented := rowKeys(section)
		for k := range documented {
			documentedAnywhere[k] = true
		}
		for _, n := range names {
			if !documented[n] {
				t.Errorf("%s: the %s context's variable %s has no row \"| `%s` |\" under \"### `%s`\"", reference, phase, n, n, phase)
			}
		}
	}
	for fn, keys := range builders {
		for _, k := range keys {
			if !documentedAnywhere[k] {
				t.Errorf("%s: templating.%s puts %s into a context, which no phase documents", reference, fn, k)
			}
		}
	}
}

// TestReferenceListsEveryPavFile: each File* constant of protocol/names.go
// is a row "| `/pav/<name>` |" of the /pav table, and every such row is one.
func TestReferenceListsEveryPavFile(t *testing.T) {
	want := map[string]bool{}
	for name, value := range stringConstants(t, filepath.Join("..", "protocol", "names.go")) {
		if strings.HasPrefix(name, "File") {
			want[protocol.PavMountPath+"/"+value] = true
		}
	}
	if len(want) == 0 {
		t.Fatal("protocol/names.go declares no File* constants")
	}
	section := sectionOf(t, readReference(t), filesSection, 2)
	documented := map[string]bool{}
	for k := range rowKeys(section) {
		if strings.HasPrefix(k, protocol.PavMountPath+"/") {
			documented[k] = true
		}
	}
	for _, f := range sortedKeys(want) {
		if !documented[f] {
			t.Errorf("%s: %s (protocol/names.go) has no row \"| `%s` |\" under %q", reference, f, f, filesSection)
		}
	}
	for _, f := range sortedKeys(documented) {
		if !want[f] {
			t.Errorf("%s: %q lists %s, which protocol/names.go does not name", reference, filesSection, f)
		}
	}
}

func readReference(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(reference)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sectionOf is the text from the heading line that starts with heading to
// the next heading of the same or a higher level.
func sectionOf(t *testing.T, doc, heading string, level int) string {
	t.Helper()
	lines := strings.Split(doc, "\n")
	start := -1
	for i, l := range lines {
		if start < 0 {
			if strings.HasPrefix(l, heading) {
				start = i
			}
			continue
		}
		if hashes := len(l) - len(strings.TrimLeft(l, "#")); hashes > 0 && hashes <= level && strings.HasPrefix(l[hashes:], " ") {
			return strings.Join(lines[start:i], "\n")
		}
	}
	if start < 0 {
		t.Fatalf("%s has no heading %q", reference, heading)
	}
	return strings.Join(lines[start:], "\n")
}

// rowKey is a table row's first cell, a code span: "| `name` | ...".
var rowKey = regexp.MustCompile("(?m)^\\| `([^`]+)` \\|")

func rowKeys(section string) map[string]bool {
	out := map[string]bool{}
	for _, m := range rowKey.FindAllStringSubmatch(section, -1) {
		out[m[1]] = true
	}
	return out
}

// phases are the values of package protocol's Phase constants.
func phases(t *testing.T) []string {
	t.Helper()
	var out []string
	f := parse(t, filepath.Join("..", "protocol", "names.go"))
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			v := s.(*ast.ValueSpec)
			if id, ok := v.Type.(*ast.Ident); !ok || id.Name != "Phase" {
				continue
			}
			for _, val := range v.Values {
				out = append(out, unquote(t, val))
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("protocol/names.go declares no Phase constants")
	}
	return out
}

// stringConstants are the untyped string constants a file declares.
func stringConstants(t *testing.T, file string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, d := range parse(t, file).Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			v := s.(*ast.ValueSpec)
			for i, val := range v.Values {
				if lit, ok := val.(*ast.BasicLit); ok && lit.Kind == token.STRING && v.Type == nil {
					out[v.Names[i].Name] = unquote(t, lit)
				}
			}
		}
	}
	return out
}

// contextKeysByFunction finds, in the non-test files of a package, the
// string keys each function writes into a map named vars
// (vars := map[string]interface{}{"k": ...}, vars["k"] = ...): PaV's
// context builders all build their context so.
func contextKeysByFunction(t *testing.T, dir string) map[string][]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		for _, d := range parse(t, file).Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			var keys []string
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				as, ok := n.(*ast.AssignStmt)
				if !ok {
					return true
				}
				for i, lhs := range as.Lhs {
					switch l := lhs.(type) {
					case *ast.IndexExpr:
						if isIdent(l.X, "vars") {
							if lit, ok := l.Index.(*ast.BasicLit); ok && lit.Kind == token.STRING {
								keys = append(keys, unquote(t, lit))
							}
						}
					case *ast.Ident:
						if l.Name != "vars" || i >= len(as.Rhs) {
							continue
						}
						if cl, ok := as.Rhs[i].(*ast.CompositeLit); ok {
							for _, e := range cl.Elts {
								if kv, ok := e.(*ast.KeyValueExpr); ok {
									if lit, ok := kv.Key.(*ast.BasicLit); ok && lit.Kind == token.STRING {
										keys = append(keys, unquote(t, lit))
									}
								}
							}
						}
					}
				}
				return true
			})
			if len(keys) > 0 {
				sort.Strings(keys)
				out[fn.Name.Name] = slices.Compact(keys)
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no function of %s writes a vars map", dir)
	}
	return out
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

func parse(t *testing.T, file string) *ast.File {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func unquote(t *testing.T, e ast.Expr) string {
	t.Helper()
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		t.Fatalf("expected a string literal, found %T", e)
	}
	s, err := strconv.Unquote(lit.Value)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
