package docs_test

import (
	"go/ast"
	"go/token"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

var (
	// pavCommand is a pav command line in a code span or at the start of a
	// line of a code block (continued lines joined).
	pavCommand = regexp.MustCompile("(?m)(?:`|^\\s*(?:\\$ )?)(?:kubectl )?pav (validate|render|describe|controller|node|version)\\b([^`\\n]*)")
	longFlag   = regexp.MustCompile(`(?:^|\s)--([a-z][a-z0-9_-]*)`)
	// serverSideApply is a kubectl apply --server-side command line.
	serverSideApply = regexp.MustCompile(`kubectl apply --server-side[^\n` + "`" + `]*`)
)

// TestDocumentedPavFlagsExist: every --flag of a pav command line in the
// README and docs is a flag pav defines: a string literal of the non-test
// files of cmd/pav and authoring (where every flag of pav is declared by
// name), or
// component-base's logging flags. A documented flag that pav lacks fails.
func TestDocumentedPavFlagsExist(t *testing.T) {
	known := map[string]bool{}
	var files []string
	for _, dir := range []string{filepath.Join("..", "cmd", "pav"), filepath.Join("..", "authoring")} {
		found, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, found...)
	}
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		ast.Inspect(parse(t, file), func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil {
					known[s] = true
				}
			}
			return true
		})
	}
	// component-base's logging flags, registered by pav's logging options.
	for _, f := range []string{"v", "vmodule", "logging-format", "log-flush-frequency", "log_flush_frequency", "log_file", "logtostderr", "help"} {
		known[f] = true
	}
	checked := 0
	for _, file := range markdownFiles(t, "..") {
		text := joinContinuations(readText(t, file))
		for _, m := range pavCommand.FindAllStringSubmatch(text, -1) {
			for _, f := range longFlag.FindAllStringSubmatch(m[2], -1) {
				checked++
				if !known[f[1]] {
					rel, _ := filepath.Rel("..", file)
					t.Errorf("%s: `pav %s%s` uses --%s, which pav does not define", rel, m[1], m[2], f[1])
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("found no pav command line with a flag in the docs")
	}
}

// TestServerSideApplyForcesConflicts: a CRD installed by kubectl create or
// helm has other field managers, so a server-side apply of a new version
// fails on conflicts unless it takes the fields over.
func TestServerSideApplyForcesConflicts(t *testing.T) {
	var bad []string
	for _, file := range markdownFiles(t, "..") {
		for _, cmd := range serverSideApply.FindAllString(readText(t, file), -1) {
			if !strings.Contains(cmd, "--force-conflicts") {
				rel, _ := filepath.Rel("..", file)
				bad = append(bad, rel+": "+cmd)
			}
		}
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Errorf("%s: add --force-conflicts", b)
	}
}

// joinContinuations joins shell lines continued with a backslash.
func joinContinuations(s string) string {
	return regexp.MustCompile(`\\\n\s*`).ReplaceAllString(s, " ")
}
