package docs_test

import (
	"go/ast"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const troubleshooting = "troubleshooting.md"

// reasonConst: the names PaV gives the constants of its Event and
// condition reasons.
var reasonConst = regexp.MustCompile(`^[rR]eason[A-Z]`)

// TestTroubleshootingListsEveryEventReason: the Event reasons table of
// troubleshooting.md has a row for every reason PaV's processes emit, with
// its type, and no other; its conditions table names only reasons PaV
// declares.
//
// The reasons emitted are found in the sources: every call of an event
// recorder (Event, Eventf, AnnotatedEventf) whose reason is a string
// literal or constant, followed through the functions that pass their
// own parameter on as the reason (claimSync.event, claimSync.fail,
// Stager.eventOn, ...). A reason chosen at run time (nodeagent's
// VolumeStats.Reason) is not followed; so, beside, every constant named
// reason*/Reason* must be in the Events table or the conditions table.
func TestTroubleshootingListsEveryEventReason(t *testing.T) {
	b, err := os.ReadFile(troubleshooting)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	table := eventTable(t, sectionOf(t, doc, "## Event reasons", 2))
	conditions := map[string]bool{}
	for _, row := range tableRows(sectionOf(t, doc, "## PavProvisioner conditions", 2)) {
		if len(row) < 3 {
			t.Fatalf("%s: a conditions row with fewer than 3 cells: %v", troubleshooting, row)
		}
		conditions[strings.Trim(row[2], "`")] = true
	}

	src := scanEvents(t)
	if len(src.emitted) < 10 || src.emitted["ProvisioningFailed"] == nil {
		t.Fatalf("found too few Event reasons in the sources (the scan is broken?): %v", src.emitted)
	}
	for reason, types := range src.emitted {
		row, ok := table[reason]
		if !ok {
			t.Errorf("%s: the Event reasons table lacks %q (emitted at %s)", troubleshooting, reason, src.where[reason])
			continue
		}
		for typ := range types {
			if typ != "" && row != typ {
				t.Errorf("%s: %q is a %s Event (%s), its row says %q", troubleshooting, reason, typ, src.where[reason], row)
			}
		}
	}
	declared := map[string]bool{}
	for name, value := range src.reasonConsts {
		declared[value] = true
		if _, ok := table[value]; !ok && !conditions[value] {
			t.Errorf("%s: reason constant %s = %q is in neither the Event reasons table nor the conditions table", troubleshooting, name, value)
		}
	}
	for reason := range table {
		if src.emitted[reason] == nil && (!declared[reason] || conditions[reason]) {
			t.Errorf("%s: the Event reasons table lists %q, which PaV does not emit", troubleshooting, reason)
		}
	}
	for reason := range conditions {
		if !declared[reason] {
			t.Errorf("%s: the conditions table lists reason %q, which PaV does not declare", troubleshooting, reason)
		}
	}
	for _, u := range src.unresolved {
		t.Logf("an Event whose reason is chosen at run time (covered by the reason constants): %s", u)
	}
}

// eventTable: the Event reasons table, reason → its type cell.
func eventTable(t *testing.T, section string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, row := range tableRows(section) {
		if len(row) != 5 {
			t.Fatalf("%s: an Event reasons row without its 5 cells (reason, on, type, means, what to do): %v", troubleshooting, row)
		}
		reason := strings.Trim(row[0], "`")
		if _, dup := out[reason]; dup {
			t.Errorf("%s: two rows for %q", troubleshooting, reason)
		}
		if row[2] != "Normal" && row[2] != "Warning" {
			t.Errorf("%s: %q has type %q, want Normal or Warning", troubleshooting, reason, row[2])
		}
		out[reason] = row[2]
	}
	if len(out) == 0 {
		t.Fatalf("%s: no rows in the Event reasons table", troubleshooting)
	}
	return out
}

// tableRows: the cells of the body rows of the Markdown tables in section
// (header and delimiter rows left out).
func tableRows(section string) [][]string {
	var rows [][]string
	header := true
	for _, l := range strings.Split(section, "\n") {
		if !strings.HasPrefix(l, "|") {
			header = true
			continue
		}
		if header || strings.HasPrefix(l, "|---") {
			header = false
			continue
		}
		cells := strings.Split(strings.Trim(l, "|"), " | ")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows = append(rows, cells)
	}
	return rows
}

// eventSources is what scanEvents found.
type eventSources struct {
	emitted      map[string]map[string]bool // reason → types ("Normal", "Warning"; "" unknown)
	where        map[string]string          // reason → one call site
	reasonConsts map[string]string          // name → value of each reason constant
	unresolved   []string                   // recorder calls whose reason is neither literal nor constant
}

// eventSink: a function whose argument reasonArg is an Event's reason and
// typeArg its type (-1: the type is fixedType).
type eventSink struct {
	reasonArg, typeArg int
	fixedType          string
}

// scanEvents parses the non-test Go files of PaV's packages (not tests',
// not tools') and finds the reasons of the Events they emit.
func scanEvents(t *testing.T) eventSources {
	t.Helper()
	root := ".."
	type file struct {
		pkg string
		ast *ast.File
	}
	var files []file
	consts := map[string]map[string]string{} // package → name → value
	src := eventSources{emitted: map[string]map[string]bool{}, where: map[string]string{}, reasonConsts: map[string]string{}}
	for _, pkg := range goPackages(t, root) {
		if strings.HasPrefix(pkg, "test/") || strings.HasPrefix(pkg, "hack/") || pkg == "docs" {
			continue
		}
		names, err := filepath.Glob(filepath.Join(root, pkg, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range names {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f := parse(t, name)
			files = append(files, file{pkg, f})
			if consts[pkg] == nil {
				consts[pkg] = map[string]string{}
			}
			for n, v := range stringConstants(t, name) {
				consts[pkg][n] = v
				if reasonConst.MatchString(n) {
					src.reasonConsts[pkg+"."+n] = v
				}
			}
		}
	}
	// value resolves a literal or a constant of pkg (or, qualified, of any package).
	value := func(pkg string, e ast.Expr) (string, bool) {
		switch e := e.(type) {
		case *ast.BasicLit:
			if e.Kind == token.STRING {
				s, err := strconv.Unquote(e.Value)
				return s, err == nil
			}
		case *ast.Ident:
			v, ok := consts[pkg][e.Name]
			return v, ok
		case *ast.SelectorExpr:
			switch e.Sel.Name {
			case "EventTypeNormal":
				return "Normal", true
			case "EventTypeWarning":
				return "Warning", true
			}
			for _, c := range consts {
				if v, ok := c[e.Sel.Name]; ok {
					return v, true
				}
			}
		}
		return "", false
	}
	// The recorder's methods, in any package; then the wrappers found.
	recorder := map[string]eventSink{"Event": {2, 1, ""}, "Eventf": {2, 1, ""}, "AnnotatedEventf": {3, 2, ""}}
	wrappers := map[string]eventSink{} // package + "." + function name
	for pass := 0; ; pass++ {
		before := len(wrappers)
		src.emitted, src.unresolved = map[string]map[string]bool{}, nil
		for _, f := range files {
			for _, d := range f.ast.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if !ok || fn.Body == nil {
					continue
				}
				params := paramIndexes(fn)
				ast.Inspect(fn.Body, func(n ast.Node) bool {
					call, ok := n.(*ast.CallExpr)
					if !ok {
						return true
					}
					var name string
					switch fun := call.Fun.(type) {
					case *ast.SelectorExpr:
						name = fun.Sel.Name
					case *ast.Ident:
						name = fun.Name
					}
					sink, direct := recorder[name]
					if !direct {
						if sink, ok = wrappers[f.pkg+"."+name]; !ok {
							return true
						}
					}
					if len(call.Args) <= sink.reasonArg || (sink.typeArg >= 0 && len(call.Args) <= sink.typeArg) {
						return true
					}
					typ := sink.fixedType
					typeParam := -1
					if sink.typeArg >= 0 {
						typ, _ = value(f.pkg, call.Args[sink.typeArg])
						if id, ok := call.Args[sink.typeArg].(*ast.Ident); ok && typ == "" {
							if i, ok := params[id.Name]; ok {
								typeParam = i
							}
						}
					}
					arg := call.Args[sink.reasonArg]
					if reason, ok := value(f.pkg, arg); ok {
						if src.emitted[reason] == nil {
							src.emitted[reason] = map[string]bool{}
							src.where[reason] = filepath.Join(f.pkg, fn.Name.Name)
						}
						src.emitted[reason][typ] = true
						return true
					}
					if id, ok := arg.(*ast.Ident); ok {
						if i, ok := params[id.Name]; ok {
							// This function passes its parameter on as the reason.
							wrappers[f.pkg+"."+fn.Name.Name] = eventSink{i, typeParam, typ}
							return true
						}
					}
					if direct {
						src.unresolved = append(src.unresolved, filepath.Join(f.pkg, fn.Name.Name)+": "+exprString(arg))
					}
					return true
				})
			}
		}
		if len(wrappers) == before {
			return src
		}
		if pass > 10 {
			t.Fatalf("wrappers of the event recorder do not settle: %v", wrappers)
		}
	}
}

// paramIndexes: a function's string parameters (a reason or a type may be
// one) by name → position.
func paramIndexes(fn *ast.FuncDecl) map[string]int {
	out := map[string]int{}
	i := 0
	for _, field := range fn.Type.Params.List {
		isString := isIdent(field.Type, "string")
		if len(field.Names) == 0 {
			i++
		}
		for _, n := range field.Names {
			if isString {
				out[n.Name] = i
			}
			i++
		}
	}
	return out
}

// exprString describes an unresolved reason expression for the log.
func exprString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.SelectorExpr:
		return exprString(e.X) + "." + e.Sel.Name
	case *ast.Ident:
		return e.Name
	}
	return "an expression"
}
