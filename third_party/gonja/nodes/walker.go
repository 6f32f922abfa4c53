package nodes

// PaV: a traversal of the whole tree that may replace expressions, for
// programs that check or rewrite parsed templates (PaV's Jinja dialect
// does both). Walk (walk.go) only descends into templates and wrappers.

// Walker visits every node reachable from a template once, in the order of
// the fields that hold them, each node after its children (post-order).
// Before it descends into a slot that holds an expression (a field, list
// element or map value of type Expression or Node), it calls Replace with
// the expression and puts the result in the slot; the walk then continues
// into what the slot holds.
//
// Nodes defined outside this package (control structures) take part by
// implementing ChildWalker.
type Walker struct {
	// Replace, if set, returns what a slot holding e is to hold.
	Replace func(e Expression) Expression
	// Visit, if set, is called with every node after its children.
	Visit func(n Node)
	// Key, if set, is called with the keys of the maps of names to
	// expressions (keyword arguments, names bound by `with` and `trans`).
	Key func(name string)

	seen map[Node]bool
}

// ChildWalker is implemented by nodes that hold other nodes, so that a
// Walker reaches them: WalkChildren calls the Walker's Walk, Expression,
// Node and Expressions methods for each child, in field order.
type ChildWalker interface {
	WalkChildren(w *Walker)
}

// Walk visits n and every node under it that was not visited yet.
func (w *Walker) Walk(n Node) {
	if isNil(n) {
		return
	}
	if w.seen == nil {
		w.seen = map[Node]bool{}
	}
	if w.seen[n] {
		return
	}
	w.seen[n] = true
	w.children(n)
	if w.Visit != nil {
		w.Visit(n)
	}
}

// Expression walks the expression in slot, after replacing it.
func (w *Walker) Expression(slot *Expression) {
	if isNil(*slot) {
		return
	}
	if w.Replace != nil {
		*slot = w.Replace(*slot)
	}
	w.Walk(*slot)
}

// Node walks the node in slot, after replacing it if it is an expression.
func (w *Walker) Node(slot *Node) {
	if isNil(*slot) {
		return
	}
	if e, ok := (*slot).(Expression); ok && w.Replace != nil {
		*slot = w.Replace(e)
	}
	w.Walk(*slot)
}

// Expressions walks the expressions of a list, each in its slot.
func (w *Walker) Expressions(list []Expression) {
	for i := range list {
		w.Expression(&list[i])
	}
}

// ExpressionMap walks the values of a map of names to expressions, each in
// its slot, after telling Key the name.
func (w *Walker) ExpressionMap(m map[string]Expression) {
	for k, v := range m {
		if w.Key != nil {
			w.Key(k)
		}
		w.Expression(&v)
		m[k] = v
	}
}

func (w *Walker) children(n Node) {
	switch n := n.(type) {
	case *Template:
		for i := range n.Nodes {
			w.Node(&n.Nodes[i])
		}
		for _, b := range n.Blocks {
			w.Walk(b)
		}
		for _, m := range n.Macros {
			w.Walk(m)
		}
		w.Walk(n.Parent)
	case *Wrapper:
		for i := range n.Nodes {
			w.Node(&n.Nodes[i])
		}
	case *Output:
		w.Expression(&n.Expression)
	case *Conditional:
		w.Expression(&n.Expression)
		w.Expression(&n.Condition)
		w.Expression(&n.Alternative)
	case *FilteredExpression:
		w.Expression(&n.Expression)
		for _, f := range n.Filters {
			w.Walk(f)
		}
	case *FilterCall:
		w.Expressions(n.Args)
		w.ExpressionMap(n.Kwargs)
	case *TestExpression:
		w.Expression(&n.Expression)
		w.Walk(n.Test)
	case *TestCall:
		w.Expressions(n.Args)
		w.ExpressionMap(n.Kwargs)
	case *List:
		w.Expressions(n.Val)
	case *Tuple:
		w.Expressions(n.Val)
	case *Dict:
		for _, p := range n.Pairs {
			w.Walk(p)
		}
	case *Pair:
		w.Expression(&n.Key)
		w.Expression(&n.Value)
	default:
		w.accessChildren(n)
	}
}

// accessChildren walks the children of variables, calls, item, slice and
// attribute accesses, operators, control structures and macros.
func (w *Walker) accessChildren(n Node) {
	switch n := n.(type) {
	case *Variable:
		for _, p := range n.Parts {
			w.Expressions(p.Args)
			w.ExpressionMap(p.Kwargs)
		}
	case *Call:
		w.Node(&n.Func)
		w.Expressions(n.Args)
		w.Node(&n.Parent)
		w.ExpressionMap(n.Kwargs)
	case *GetItem:
		w.Node(&n.Node)
		w.Node(&n.Arg)
	case *GetSlice:
		w.Node(&n.Node)
		w.Node(&n.Start)
		w.Node(&n.End)
		w.Node(&n.Step)
	case *GetAttribute:
		w.Node(&n.Node)
	case *Negation:
		w.Expression(&n.Term)
	case *UnaryExpression:
		w.Expression(&n.Term)
	case *BinaryExpression:
		w.Expression(&n.Left)
		w.Expression(&n.Right)
	case *ControlStructureBlock:
		if !isNil(n.ControlStructure) {
			w.Walk(n.ControlStructure)
		}
	case *Macro:
		for _, p := range n.Kwargs {
			w.Walk(p)
		}
		w.Walk(n.Wrapper)
	case ChildWalker:
		n.WalkChildren(w)
	}
}

// isNil reports whether n is nil or a nil pointer in an interface.
func isNil(n Node) bool {
	if n == nil {
		return true
	}
	switch p := n.(type) {
	case *Template:
		return p == nil
	case *Wrapper:
		return p == nil
	case *Macro:
		return p == nil
	case *FilterCall:
		return p == nil
	case *TestCall:
		return p == nil
	case *Pair:
		return p == nil
	case *Data:
		return p == nil
	case *Call:
		return p == nil
	}
	return false
}
