package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The Markdown files whose links TestLinksResolve checks, relative to the
// repository's root.
var linkedDocs = []string{"README.md", "CHANGELOG.md", "docs/*.md", "examples/*/README.md", "charts/*/README.md", "test/*/README.md"}

var (
	mdLink   = regexp.MustCompile(`\]\(([^()\s]+)\)`)
	fence    = regexp.MustCompile("(?m)^```.*$")
	slugDrop = regexp.MustCompile(`[^\p{L}\p{N} _-]`)
)

// TestLinksResolve: every relative link in the Markdown files resolves to a
// file of the repository and, with an #anchor into a Markdown file, to one
// of its headings (GitHub's anchors). Moving a section breaks the links
// into it: this finds them.
func TestLinksResolve(t *testing.T) {
	root := filepath.Join("..")
	anchors := map[string]map[string]bool{}
	anchorsOf := func(file string) map[string]bool {
		if a, ok := anchors[file]; ok {
			return a
		}
		a := headingAnchors(t, file)
		anchors[file] = a
		return a
	}
	for _, file := range markdownFiles(t, root) {
		rel, _ := filepath.Rel(root, file)
		for _, target := range links(t, file) {
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			dest := file
			if path != "" {
				dest = filepath.Join(filepath.Dir(file), path)
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s: link %q: %s does not exist", rel, target, path)
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(dest, ".md") {
				continue
			}
			if !anchorsOf(dest)[anchor] {
				t.Errorf("%s: link %q: %s has no heading with anchor #%s", rel, target, filepath.Base(dest), anchor)
			}
		}
	}
}

// TestReferenceAndSecurityStandAlone: the reference and the security model
// are whole pages; they do not send the reader back into the README for a
// part of themselves.
func TestReferenceAndSecurityStandAlone(t *testing.T) {
	for _, file := range []string{"reference.md", "security.md"} {
		for _, target := range links(t, file) {
			if strings.Contains(target, "README.md#") {
				t.Errorf("%s links into the README (%s): the README points here, not back", file, target)
			}
		}
	}
}

func markdownFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	for _, pattern := range linkedDocs {
		m, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m...)
	}
	if len(out) == 0 {
		t.Fatal("no Markdown files found")
	}
	return out
}

func readText(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// links are the targets of a file's Markdown links outside code blocks.
func links(t *testing.T, file string) []string {
	t.Helper()
	var out []string
	for i, part := range fence.Split(readText(t, file), -1) {
		if i%2 == 1 { // inside a fenced code block
			continue
		}
		for _, m := range mdLink.FindAllStringSubmatch(part, -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// headingAnchors are the anchors GitHub gives a file's headings: lowercased,
// punctuation dropped, spaces turned into hyphens, repeats numbered.
func headingAnchors(t *testing.T, file string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	seen := map[string]int{}
	for i, part := range fence.Split(string(b), -1) {
		if i%2 == 1 {
			continue
		}
		for _, line := range strings.Split(part, "\n") {
			text, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " ")
			if !ok || !strings.HasPrefix(line, "#") {
				continue
			}
			slug := strings.ReplaceAll(slugDrop.ReplaceAllString(strings.ToLower(strings.TrimSpace(text)), ""), " ", "-")
			if n := seen[slug]; n > 0 {
				out[slug+"-"+strconv.Itoa(n)] = true
			} else {
				out[slug] = true
			}
			seen[slug]++
		}
	}
	return out
}
