package jinja

import (
	"fmt"
	"sort"

	controlStructures "github.com/nikolalohinski/gonja/v2/builtins/control_structures"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

// prepare rewrites a parsed template for PaV and checks the names it uses:
//   - every {{ }} expression gets the finalize filter;
//   - arithmetic operators become the arith filter (Python semantics);
//   - attribute and item access, default, tojson, `is defined`/`undefined`/
//     `none` and for-loop iterables learn to tell undefined from none
//     (gonja has a single nil for both);
//   - loop and macro bodies count steps and depth (no hang, no stack overflow);
//   - unknown filters, tests and functions are compile errors (gonja would
//     only notice them at render).
//
// It returns the expressions that the inserted filters refer to by index,
// and the free names: those the template reads but neither binds itself
// (set, for, macro, with) nor gets from Jinja (globals, loop, caller).
//
// The walk is gonja's nodes.Walker (added by PaV's fork, third_party/gonja),
// which reaches every node, control structures' children included.
func prepare(root *nodes.Template) ([]nodes.Expression, []Name, error) {
	w := &walker{defined: map[string]bool{}}
	walk := &nodes.Walker{
		Replace: w.rewriteArith,
		Visit:   w.visitNode,
		Key:     func(name string) { w.defined[name] = true }, // names bound by `with` (and keyword names: harmless)
	}
	walk.Walk(root)
	if w.err != nil {
		return nil, nil, w.err
	}
	for _, c := range w.calls {
		if !globalFunctions[c.name] && !w.defined[c.name] {
			return nil, nil, &Error{Line: c.tok.Line, Column: c.tok.Col, Message: fmt.Sprintf("unknown function '%s'", c.name)}
		}
	}
	for _, body := range w.bodies {
		tok := body.Location
		body.Nodes = append(append([]nodes.Node{stepNode(tok, enterFilter)}, body.Nodes...), stepNode(tok, exitFilter))
	}
	return w.exprs, w.freeNames(), nil
}

// Name is a name a template reads, where it first does.
type Name struct {
	Name         string
	Line, Column int
}

// implicitNames are bound by Jinja itself: its global functions, loop in a
// for body, caller in a macro called by a call block, varargs and kwargs in
// a macro's body.
var implicitNames = map[string]bool{"loop": true, "caller": true, "varargs": true, "kwargs": true}

// freeNames are the names read that nothing in the template binds, each
// once, in the order of their first use. Bindings are not scoped (a name set
// anywhere counts as bound everywhere): a check on these never reports a
// name the template does bind.
func (w *walker) freeNames() []Name {
	var out []Name
	seen := map[string]bool{}
	for _, u := range w.uses {
		if seen[u.name] || w.defined[u.name] || globalFunctions[u.name] || implicitNames[u.name] {
			continue
		}
		seen[u.name] = true
		out = append(out, Name{Name: u.name, Line: u.tok.Line, Column: u.tok.Col})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Line != out[j].Line {
			return out[i].Line < out[j].Line
		}
		return out[i].Column < out[j].Column
	})
	return out
}

type namedUse struct {
	name string
	tok  *tokens.Token
}

type walker struct {
	defined map[string]bool // names a template binds itself (macros, set, for)
	calls   []namedUse
	uses    []namedUse         // every name read
	exprs   []nodes.Expression // referenced by index from inserted filters
	bodies  []*nodes.Wrapper   // loop and macro bodies, to get step counters
	err     error
}

// ref registers an expression that a filter or test inserted by prepare
// needs to inspect (not just its value) and returns its index.
func (w *walker) ref(e nodes.Expression) nodes.Expression {
	w.exprs = append(w.exprs, e)
	return &nodes.Integer{Location: position(e), Val: len(w.exprs) - 1}
}

// position is where e starts, or nil for the incomplete nodes gonja's parser
// sometimes accepts (a test expression without a tested value, for "{{ in }}").
func position(e nodes.Expression) (tok *tokens.Token) {
	defer func() {
		if recover() != nil {
			tok = nil
		}
	}()
	return nodes.Start(e)
}

// visitNode checks and rewrites a node once its children are done.
func (w *walker) visitNode(n nodes.Node) {
	if w.err != nil {
		return
	}
	switch n := n.(type) {
	case *nodes.Output:
		w.wrapOutput(n)
	case *nodes.FilterCall:
		f := n
		if !internalFilters[f.Name] && !filters.Exists(f.Name) {
			w.fail(f.Token, "unknown filter '%s'", f.Name)
		}
	case *nodes.FilteredExpression:
		// Only the first filter of a chain sees the original expression,
		// which may be undefined; later ones see filter results.
		fe := n
		if len(fe.Filters) > 0 {
			if name, ok := undefinedAwareFilters[fe.Filters[0].Name]; ok {
				f := fe.Filters[0]
				f.Name = name
				f.Args = append([]nodes.Expression{w.ref(fe.Expression)}, f.Args...)
			}
		}
	case *nodes.TestCall:
		tc := n
		if !tests.Exists(tc.Name) {
			w.fail(tc.Token, "unknown test '%s'", tc.Name)
		}
	case *nodes.TestExpression:
		te := n
		if te.Expression == nil || te.Test == nil {
			var tok *tokens.Token
			if te.Test != nil {
				tok = te.Test.Token
			}
			w.fail(tok, "invalid syntax: a test needs a value and a test name")
			return
		}
		if te.Test != nil {
			if name, ok := undefinedAwareTests[te.Test.Name]; ok {
				te.Test.Name = name
				te.Test.Args = append([]nodes.Expression{w.ref(te.Expression)}, te.Test.Args...)
			}
		}
	case *nodes.Name:
		if n.Name != nil {
			w.uses = append(w.uses, namedUse{name: n.Name.Val, tok: n.Name})
		}
	case *nodes.Call:
		if name, ok := n.Func.(*nodes.Name); ok {
			w.calls = append(w.calls, namedUse{name: name.Name.Val, tok: name.Name})
		}
	case *nodes.GetAttribute:
		n.Node = w.checkDefined(n.Node, true)
	case *nodes.GetItem:
		n.Node = w.checkDefined(n.Node, true)
	case *nodes.GetSlice:
		n.Node = w.checkDefined(n.Node, false)
	case *controlStructures.ForControlStructure:
		f := n
		w.defined[f.Key] = true
		if f.Value != "" {
			w.defined[f.Value] = true
		}
		if f.Recursive { // the body may call loop(children)
			w.defined["loop"] = true
		}
		if f.ObjectEvaluator != nil {
			f.ObjectEvaluator = &nodes.FilteredExpression{
				Location:   position(f.ObjectEvaluator),
				Expression: f.ObjectEvaluator,
				Filters:    []*nodes.FilterCall{{Token: position(f.ObjectEvaluator), Name: iterFilter, Args: []nodes.Expression{w.ref(f.ObjectEvaluator)}}},
			}
		}
		if f.BodyWrapper != nil {
			w.bodies = append(w.bodies, f.BodyWrapper)
		}
	case *nodes.Macro:
		m := n
		w.defined[m.Name] = true
		for _, kw := range m.Kwargs {
			if n, ok := kw.Key.(*nodes.Name); ok {
				w.defined[n.Name.Val] = true
			}
			if s, ok := kw.Key.(*nodes.String); ok {
				w.defined[s.Val] = true
			}
		}
		if m.Wrapper != nil {
			w.bodies = append(w.bodies, m.Wrapper)
			// A Jinja macro takes extra positional (keyword) arguments
			// when its body refers to varargs (kwargs); gonja wants them
			// declared as *varargs (**kwargs).
			if m.VarArgsName == "" && mentionsName(m.Wrapper, "varargs") {
				m.VarArgsName = "varargs"
			}
			if m.KwArgsName == "" && mentionsName(m.Wrapper, "kwargs") {
				m.KwArgsName = "kwargs"
			}
		}
	case *controlStructures.SetControlStructure:
		// A set binds a name; record it so that calls to it are not
		// reported as unknown.
		for _, t := range n.Targets() {
			if name, ok := t.(*nodes.Name); ok {
				w.defined[name.Name.Val] = true
			}
		}
	}
}

// checkDefined wraps the object of an attribute or item access: accessing an
// attribute of undefined is an error in Jinja; of none it gives undefined
// (gonja fails), so with noneIsEmpty the filter turns none into an empty
// mapping, whose attributes and items are undefined.
func (w *walker) checkDefined(n nodes.Node, noneIsEmpty bool) nodes.Node {
	e, ok := n.(nodes.Expression)
	if !ok || e == nil {
		return n
	}
	return &nodes.FilteredExpression{
		Location:   position(e),
		Expression: e,
		Filters:    []*nodes.FilterCall{{Token: position(e), Name: checkFilter, Args: []nodes.Expression{w.ref(e), &nodes.Bool{Location: position(e), Val: noneIsEmpty}}}},
	}
}

func (w *walker) fail(tok *tokens.Token, format string, args ...interface{}) {
	if w.err != nil {
		return
	}
	e := &Error{Message: fmt.Sprintf(format, args...)}
	if tok != nil {
		e.Line, e.Column = tok.Line, tok.Col
	}
	w.err = e
}

// wrapOutput applies PaV's finalize rule to an output's expression.
func (w *walker) wrapOutput(o *nodes.Output) {
	tok := o.Start
	line, col := 0, 0
	if tok != nil {
		line, col = tok.Line, tok.Col
	}
	e := o.Expression
	o.Expression = &nodes.FilteredExpression{
		Location:   position(e),
		Expression: e,
		Filters: []*nodes.FilterCall{{
			Token: tok,
			Name:  finalizeFilter,
			Args:  []nodes.Expression{&nodes.Integer{Location: tok, Val: line}, &nodes.Integer{Location: tok, Val: col}, w.ref(e)},
		}},
	}
}

// stepNode is an output node that renders nothing but calls a step filter.
func stepNode(tok *tokens.Token, filter string) nodes.Node {
	return &nodes.Output{
		Start: tok,
		End:   tok,
		Expression: &nodes.FilteredExpression{
			Expression: &nodes.String{Location: tok, Val: ""},
			Filters:    []*nodes.FilterCall{{Token: tok, Name: filter}},
		},
	}
}

// binaryOps are the operators rewriteArith replaces, by token type.
var binaryOps = map[tokens.Type]string{
	tokens.Power: "**", tokens.FloorDivision: "//", tokens.Modulo: "%", tokens.Division: "/",
	tokens.Addition: "+", tokens.Subtraction: "-", tokens.Multiply: "*", tokens.Equals: "==", tokens.Ne: "!=",
	tokens.Tilde: "~", tokens.LowerThan: "<", tokens.LowerThanOrEqual: "<=", tokens.GreaterThan: ">",
	tokens.GreaterThanOrEqual: ">=",
}

// rewriteArith replaces arithmetic `a <op> b` in an expression slot by `a|__pav_arith(op, b, tuple)`, which implements Python's
// semantics (gonja's differ: float powers, truncating division, +Inf on
// division by zero, silent int64 wrap-around, 'a' + 1 = "a1", undefined + 3 =
// 3, a panic on string formatting, 1 < 'a' and none < 1 true). `==`, `!=`
// and `~` get filters of their own. tuple tells `%` whether its right operand
// is a tuple literal, whose items are the format arguments.
func (w *walker) rewriteArith(e nodes.Expression) nodes.Expression {
	if w.err != nil {
		return e
	}
	bin, ok := e.(*nodes.BinaryExpression)
	if !ok || bin.Operator == nil || bin.Operator.Token == nil {
		return e
	}
	tok := bin.Operator.Token
	op, isOp := binaryOps[tok.Type]
	if isOp && tok.Val != op {
		// gonja's lexer glues characters it does not know to the next
		// token ("0 #% 0" is a modulo for it); Jinja rejects them.
		w.fail(tok, "unexpected characters in operator '%s'", tok.Val)
		return e
	}
	switch op {
	case "**", "//", "%", "/", "+", "-", "*", "<", "<=", ">", ">=":
	case "==", "!=":
		// Jinja's undefined equals only undefined, never none; gonja has one
		// nil for both, so the comparison re-inspects both operands.
		return &nodes.FilteredExpression{
			Location:   position(bin.Left),
			Expression: bin.Left,
			Filters: []*nodes.FilterCall{{
				Token: tok,
				Name:  equalFilter,
				Args:  []nodes.Expression{&nodes.Bool{Location: tok, Val: op == "!="}, bin.Right, w.ref(bin.Left), w.ref(bin.Right)},
			}},
		}
	case "~":
		// Python's str() of both operands, but undefined is "" (gonja's ~
		// prints none as "" as well; Jinja prints "None").
		return &nodes.FilteredExpression{
			Location:   position(bin.Left),
			Expression: bin.Left,
			Filters: []*nodes.FilterCall{{
				Token: tok,
				Name:  concatFilter,
				Args:  []nodes.Expression{bin.Right, w.ref(bin.Left), w.ref(bin.Right)},
			}},
		}
	default:
		return e
	}
	_, tuple := bin.Right.(*nodes.Tuple)
	repl := &nodes.FilteredExpression{
		Location:   position(bin.Left),
		Expression: bin.Left,
		Filters: []*nodes.FilterCall{{
			Token: tok,
			Name:  arithFilter,
			Args:  []nodes.Expression{&nodes.String{Location: tok, Val: op}, bin.Right, &nodes.Bool{Location: tok, Val: tuple}},
		}},
	}
	return repl
}

// mentionsName reports whether a node under n refers to name.
func mentionsName(n nodes.Node, name string) bool {
	found := false
	(&nodes.Walker{Visit: func(n nodes.Node) {
		if x, ok := n.(*nodes.Name); ok && x.Name != nil && x.Name.Val == name {
			found = true
		}
	}}).Walk(n)
	return found
}
