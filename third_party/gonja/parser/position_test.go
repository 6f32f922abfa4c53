package parser_test

import (
	"testing"

	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/parser"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

// The binary, filtered and test expressions the parser builds know where they
// start: Position answers without walking down the left-deep chain under
// them (asked of every node of a long chain, that walk was quadratic).
func TestPositionDoesNotWalkTheChain(t *testing.T) {
	cfg := config.New()
	p := parser.NewParser("test", tokens.LexAll("{{ a | f is t ~ b + c and d }}", cfg), cfg, nil, builtins.ControlStructures)
	root, err := p.Parse()
	if err != nil {
		t.Fatal(err)
	}
	top := root.Nodes[0].(*nodes.Output).Expression
	// Every node down the left spine, then cut each from its left operand:
	// a Position that walked down would now panic.
	var spine []nodes.Expression
	for e := top; ; {
		spine = append(spine, e)
		switch x := e.(type) {
		case *nodes.BinaryExpression:
			e = x.Left
			x.Left = nil
		case *nodes.FilteredExpression:
			e = x.Expression
			x.Expression = nil
		case *nodes.TestExpression:
			e = x.Expression
			x.Expression = nil
		default:
			if len(spine) != 6 {
				t.Fatalf("left spine of %d nodes, want and, +, ~, test, filter above a", len(spine))
			}
			for _, n := range spine[:5] {
				if pos := n.Position(); pos == nil || pos.Val != "a" || pos.Col != 4 {
					t.Errorf("%T starts at %v, want a at column 4", n, pos)
				}
			}
			return
		}
	}
}
