package controlStructures_test

import (
	"sort"
	"strings"
	"testing"

	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/parser"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

func parse(t *testing.T, source string) *nodes.Template {
	t.Helper()
	cfg := config.New()
	p := parser.NewParser("test", tokens.LexAll(source, cfg), cfg, nil, builtins.ControlStructures)
	root, err := p.Parse()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// The Walker reaches the expressions inside control structures, where they
// are kept in unexported fields, and may replace them.
func TestWalkerReachesControlStructureChildren(t *testing.T) {
	root := parse(t, `{% set a = n1 %}{% for x in n2 if n3 %}{{ n4 }}{% else %}{{ n5 }}{% endfor %}`+
		`{% if n6 %}{{ n7 }}{% elif n8 %}{% endif %}{% with w = n9 %}{{ n10 }}{% endwith %}`+
		`{% filter upper %}{{ n11 }}{% endfilter %}{% macro m(k=n12) %}{{ n13 }}{% endmacro %}{{ f(n14, kw=n15) }}`)
	var names, keys []string
	w := &nodes.Walker{
		Replace: func(e nodes.Expression) nodes.Expression {
			if n, ok := e.(*nodes.Name); ok && strings.HasPrefix(n.Name.Val, "n") {
				return &nodes.Name{Name: &tokens.Token{Type: tokens.Name, Val: "seen_" + n.Name.Val}}
			}
			return e
		},
		Visit: func(n nodes.Node) {
			if x, ok := n.(*nodes.Name); ok && strings.HasPrefix(x.Name.Val, "seen_") {
				names = append(names, strings.TrimPrefix(x.Name.Val, "seen_"))
			}
		},
		Key: func(k string) { keys = append(keys, k) },
	}
	w.Walk(root)
	sort.Strings(names)
	sort.Strings(keys)
	want := []string{"n1", "n10", "n11", "n12", "n13", "n14", "n15", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("replaced and visited %v, want %v", names, want)
	}
	if strings.Join(keys, " ") != "kw w" {
		t.Errorf("keys %v, want [kw w]", keys)
	}
	// A second walk sees the replacements in place.
	var again int
	(&nodes.Walker{Visit: func(n nodes.Node) {
		if x, ok := n.(*nodes.Name); ok && strings.HasPrefix(x.Name.Val, "seen_") {
			again++
		}
	}}).Walk(root)
	if again != len(want) {
		t.Errorf("%d replaced names in the tree, want %d", again, len(want))
	}
}

// Jinja's literals are none and None; nil is an ordinary name (PaV).
func TestNoneLiterals(t *testing.T) {
	root := parse(t, `{{ none }}{{ None }}{{ nil }}`)
	var got []string
	for _, n := range root.Nodes {
		switch e := n.(*nodes.Output).Expression.(type) {
		case *nodes.None:
			got = append(got, "None")
		case *nodes.Name:
			got = append(got, "Name:"+e.Name.Val)
		}
	}
	if strings.Join(got, " ") != "None None Name:nil" {
		t.Errorf("parsed %v", got)
	}
}
