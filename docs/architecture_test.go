package docs_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

const architecture = "architecture.md"

// codeSpan is a `...` span of a table cell.
var codeSpan = regexp.MustCompile("`([^`]+)`")

// TestArchitectureHasARowPerPackage: every Go package of the repository (a
// directory with .go files, test-only packages included) but third_party/
// and generated code (the trees under a directory named generated, written
// by make generate) is named in the first cell of a row of architecture.md's
// "## Packages" section, and each name there is a directory that exists.
func TestArchitectureHasARowPerPackage(t *testing.T) {
	b, err := os.ReadFile(architecture)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > 150 {
		t.Errorf("%s has %d lines: keep it one page (150 at most); details go to controller.md, nodeagent.md", architecture, n)
	}
	rows := map[string]bool{}
	for _, line := range strings.Split(sectionOf(t, string(b), "## Packages", 2), "\n") {
		cells := strings.Split(line, "|")
		if !strings.HasPrefix(line, "| `") || len(cells) < 3 {
			continue
		}
		for _, m := range codeSpan.FindAllStringSubmatch(cells[1], -1) {
			rows[m[1]] = true
		}
	}
	for _, p := range goPackages(t, "..") {
		if !rows[p] {
			t.Errorf("%s: package %s has no row in \"## Packages\" (name it in a row's first cell, in backquotes)", architecture, p)
		}
	}
	for r := range rows {
		if fi, err := os.Stat(filepath.Join("..", r)); err != nil || !fi.IsDir() {
			t.Errorf("%s: a row names %s, which is not a directory of the repository", architecture, r)
		}
	}
}

// goPackages are the directories under root holding .go files, outside
// third_party, generated trees, hidden directories, _output and testdata.
func goPackages(t *testing.T, root string) []string {
	t.Helper()
	dirs := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			name := d.Name()
			if rel == "third_party" || name == "generated" || name == "testdata" || name == "_output" || (strings.HasPrefix(name, ".") && rel != ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(rel, ".go") {
			dirs[filepath.ToSlash(filepath.Dir(rel))] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for dir := range dirs {
		out = append(out, dir)
	}
	sort.Strings(out)
	if len(out) == 0 {
		t.Fatal("found no Go packages")
	}
	return out
}
