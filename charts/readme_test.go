package charts_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

var codeSpan = regexp.MustCompile("`([^`]+)`")

// TestReadmeListsEveryValue: the values table of the chart's README names
// every value of values.yaml (a row for a value, or for a map holding it)
// and no value values.yaml lacks. Needs no helm; with helm, `helm show
// readme` prints it (the packaged chart has it).
func TestReadmeListsEveryValue(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(chart, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	rows := valuesRows(t, readme)

	raw, err := os.ReadFile(filepath.Join(chart, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(raw, &values); err != nil {
		t.Fatal(err)
	}
	nodes, leaves := map[string]bool{}, []string{}
	walkValues(values, "", nodes, &leaves)
	if len(leaves) < 20 {
		t.Fatalf("values.yaml has only %d values: %v", len(leaves), leaves)
	}
	for _, leaf := range leaves {
		if !covered(leaf, rows) {
			t.Errorf("charts/pav/README.md: the values table lacks %s (a row for it, or for a map holding it)", leaf)
		}
	}
	for _, r := range sortedRows(rows) {
		if !nodes[r] {
			t.Errorf("charts/pav/README.md: the values table names %s, which values.yaml lacks", r)
		}
	}

	if os.Getenv("PAV_HELM") == "" {
		return
	}
	out, err := exec.Command(helmBin(t), "show", "readme", chart).Output()
	if err != nil {
		t.Fatalf("helm show readme: %v", err)
	}
	if string(out) != readme && string(out) != readme+"\n" {
		t.Errorf("helm show readme does not print charts/pav/README.md:\n%s", out)
	}
}

// valuesRows: the values each row of the "## Values" table names, every
// code span of its first cell.
func valuesRows(t *testing.T, readme string) map[string]bool {
	t.Helper()
	_, section, ok := strings.Cut(readme, "\n## Values\n")
	if !ok {
		t.Fatal("charts/pav/README.md has no section Values")
	}
	if next := strings.Index(section, "\n## "); next >= 0 {
		section = section[:next]
	}
	rows := map[string]bool{}
	for _, l := range strings.Split(section, "\n") {
		if !strings.HasPrefix(l, "| `") {
			continue
		}
		first, _, _ := strings.Cut(strings.TrimPrefix(l, "| "), " | ")
		for _, m := range codeSpan.FindAllStringSubmatch(first, -1) {
			rows[m[1]] = true
		}
	}
	if len(rows) == 0 {
		t.Fatal("charts/pav/README.md: no rows in the values table")
	}
	return rows
}

// walkValues records every key path of values (nodes) and the leaves: a
// value that is not a map, or an empty map (free-form, e.g. labels).
func walkValues(v map[string]any, prefix string, nodes map[string]bool, leaves *[]string) {
	for k, x := range v {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		nodes[p] = true
		if m, ok := x.(map[string]any); ok && len(m) > 0 {
			walkValues(m, p, nodes, leaves)
			continue
		}
		*leaves = append(*leaves, p)
	}
	sort.Strings(*leaves)
}

// covered: a row names leaf or a map holding it.
func covered(leaf string, rows map[string]bool) bool {
	for p := leaf; ; {
		if rows[p] {
			return true
		}
		i := strings.LastIndex(p, ".")
		if i < 0 {
			return false
		}
		p = p[:i]
	}
}

func sortedRows(rows map[string]bool) []string {
	out := make([]string, 0, len(rows))
	for r := range rows {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}
