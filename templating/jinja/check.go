package jinja

import (
	"fmt"
	"sort"

	controlStructures "github.com/nikolalohinski/gonja/v2/builtins/control_structures"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

// check checks the names a parsed template uses: unknown filters, tests
// and functions are compile errors (gonja would only notice them at
// render). It returns the free names: those the template reads but neither
// binds itself (set, for, macro, with) nor gets from Jinja (globals, loop,
// caller).
//
// The walk is gonja's nodes.Walker (added by PaV's fork, third_party/gonja),
// which reaches every node, control structures' children included.
func check(root *nodes.Template) ([]Name, error) {
	w := &walker{defined: map[string]bool{}}
	walk := &nodes.Walker{
		Visit: w.visitNode,
		Key:   func(name string) { w.defined[name] = true }, // names bound by `with` (and keyword names: harmless)
	}
	walk.Walk(root)
	if w.err != nil {
		return nil, w.err
	}
	for _, c := range w.calls {
		if !globalFunctions[c.name] && !w.defined[c.name] {
			return nil, &Error{Line: c.tok.Line, Column: c.tok.Col, Message: fmt.Sprintf("unknown function '%s'", c.name)}
		}
	}
	return w.freeNames(), nil
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
	uses    []namedUse // every name read
	err     error
}

// visitNode checks a node once its children are done.
func (w *walker) visitNode(n nodes.Node) {
	if w.err != nil {
		return
	}
	w.checkKnown(n)
	w.recordUse(n)
	w.recordBinding(n)
}

// checkKnown fails on a filter or test PaV's environment lacks, and on a
// test without its value or name.
func (w *walker) checkKnown(n nodes.Node) {
	switch n := n.(type) {
	case *nodes.FilterCall:
		if !filters.Exists(n.Name) {
			w.fail(n.Token, "unknown filter '%s'", n.Name)
		}
	case *nodes.TestCall:
		if !tests.Exists(n.Name) {
			w.fail(n.Token, "unknown test '%s'", n.Name)
		}
	case *nodes.TestExpression:
		if n.Expression == nil || n.Test == nil {
			var tok *tokens.Token
			if n.Test != nil {
				tok = n.Test.Token
			}
			w.fail(tok, "invalid syntax: a test needs a value and a test name")
		}
	}
}

// recordUse records a name the template reads, and a function it calls.
func (w *walker) recordUse(n nodes.Node) {
	switch n := n.(type) {
	case *nodes.Name:
		if n.Name != nil {
			w.uses = append(w.uses, namedUse{name: n.Name.Val, tok: n.Name})
		}
	case *nodes.Call:
		if name, ok := n.Func.(*nodes.Name); ok {
			w.calls = append(w.calls, namedUse{name: name.Name.Val, tok: name.Name})
		}
	}
}

// recordBinding records the names the template binds itself (a for
// loop's, a macro and its arguments, a set's), so that reading or calling
// them is not reported as unknown.
func (w *walker) recordBinding(n nodes.Node) {
	switch n := n.(type) {
	case *controlStructures.ForControlStructure:
		for _, name := range n.Names() {
			w.defined[name] = true
		}
		if n.Recursive { // the body may call loop(children)
			w.defined["loop"] = true
		}
	case *nodes.Macro:
		w.defined[n.Name] = true
		for _, kw := range n.Kwargs {
			if s, ok := kw.Key.(*nodes.String); ok {
				w.defined[s.Val] = true
			}
		}
	case *controlStructures.SetControlStructure:
		for _, t := range n.Targets() {
			if name, ok := t.(*nodes.Name); ok {
				w.defined[name.Name.Val] = true
			}
		}
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
