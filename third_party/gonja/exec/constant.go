package exec

import "github.com/nikolalohinski/gonja/v2/nodes"

// contextFilters are Jinja's filters that take the template's context
// (pass_context): Jinja never folds them into constants.
var contextFilters = map[string]bool{"map": true, "random": true, "select": true, "reject": true, "selectattr": true, "rejectattr": true}

// jinjaConstant reports whether Jinja's compiler folds e into a constant
// (PaV). In an autoescape block Jinja escapes a constant before its finalize
// and any other expression after it, so a constant Markup (`'<'|e`) is
// printed as it is while a computed one is escaped again: PaV's finalize
// returns a plain string, as Python's str() does.
func jinjaConstant(e nodes.Node) bool {
	switch x := e.(type) {
	case *nodes.String, *nodes.Integer, *nodes.Float, *nodes.Bool, *nodes.None:
		return true
	case *nodes.List:
		return allConstant(x.Val)
	case *nodes.Tuple:
		return allConstant(x.Val)
	case *nodes.Dict:
		for _, p := range x.Pairs {
			if !jinjaConstant(p.Key) || !jinjaConstant(p.Value) {
				return false
			}
		}
		return true
	case *nodes.UnaryExpression:
		return jinjaConstant(x.Term)
	case *nodes.Negation:
		return jinjaConstant(x.Term)
	case *nodes.BinaryExpression:
		return jinjaConstant(x.Left) && jinjaConstant(x.Right)
	case *nodes.Conditional:
		return x.Alternative != nil && jinjaConstant(x.Expression) && jinjaConstant(x.Condition) && jinjaConstant(x.Alternative)
	case *nodes.GetItem:
		return jinjaConstant(x.Node) && jinjaConstant(x.Arg)
	case *nodes.GetAttribute:
		return jinjaConstant(x.Node)
	case *nodes.GetSlice:
		for _, n := range []nodes.Node{x.Start, x.End, x.Step} {
			if n != nil && !jinjaConstant(n) {
				return false
			}
		}
		return jinjaConstant(x.Node)
	case *nodes.FilteredExpression:
		for _, f := range x.Filters {
			if contextFilters[f.Name] || !allConstant(f.Args) || !kwargsConstant(f.Kwargs) {
				return false
			}
		}
		return jinjaConstant(x.Expression)
	case *nodes.TestExpression:
		return allConstant(x.Test.Args) && kwargsConstant(x.Test.Kwargs) && jinjaConstant(x.Expression)
	}
	return false
}

func allConstant(es []nodes.Expression) bool {
	for _, e := range es {
		if !jinjaConstant(e) {
			return false
		}
	}
	return true
}

func kwargsConstant(kw map[string]nodes.Expression) bool {
	for _, e := range kw {
		if !jinjaConstant(e) {
			return false
		}
	}
	return true
}
