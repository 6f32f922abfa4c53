package jinja

import (
	"fmt"
	"reflect"
	"unsafe"

	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

// prepare rewrites a parsed template for PaV and checks the names it uses:
// every {{ }} expression gets the finalize filter, and unknown filters, tests
// and functions are compile errors (gonja would only notice them at render).
//
// gonja keeps some children of control structures in unexported fields, so the
// walk goes by reflection over every node reachable from the root.
func prepare(root *nodes.Template) error {
	w := &walker{seen: map[uintptr]bool{}, defined: map[string]bool{}}
	w.walk(reflect.ValueOf(root))
	for _, c := range w.calls {
		if !globalFunctions[c.name] && !w.defined[c.name] {
			return &Error{Line: c.tok.Line, Column: c.tok.Col, Message: fmt.Sprintf("unknown function '%s'", c.name)}
		}
	}
	return w.err
}

type namedUse struct {
	name string
	tok  *tokens.Token
}

type walker struct {
	seen    map[uintptr]bool
	defined map[string]bool // names a template binds itself (macros, set, for)
	calls   []namedUse
	err     error
}

var tokenType = reflect.TypeOf(tokens.Token{})

func (w *walker) walk(v reflect.Value) {
	if w.err != nil || !v.IsValid() {
		return
	}
	switch v.Kind() {
	case reflect.Interface:
		rewriteArith(v)
		if !v.IsNil() {
			w.walk(v.Elem())
		}
	case reflect.Ptr:
		if v.IsNil() || v.Elem().Kind() != reflect.Struct || v.Elem().Type() == tokenType {
			return
		}
		p := v.UnsafePointer()
		if w.seen[uintptr(p)] {
			return
		}
		w.seen[uintptr(p)] = true
		elem := reflect.NewAt(v.Elem().Type(), p).Elem()
		w.visitStruct(elem)
		w.visitNode(p, v.Elem().Type())
	case reflect.Struct:
		w.visitStruct(v)
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			w.walk(v.Index(i))
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			if it.Key().Kind() == reflect.String {
				w.noteMapKey(v.Type(), it.Key().String())
			}
			w.walk(it.Value())
		}
	}
}

func (w *walker) visitStruct(v reflect.Value) {
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Ptr, reflect.Interface, reflect.Slice, reflect.Map, reflect.Struct, reflect.Array:
			w.walk(f)
		}
	}
}

// noteMapKey records names bound by `with` blocks (a map of name to expression).
func (w *walker) noteMapKey(t reflect.Type, key string) {
	if t.Elem() == reflect.TypeOf((*nodes.Expression)(nil)).Elem() {
		w.defined[key] = true
	}
}

var (
	outputType    = reflect.TypeOf(nodes.Output{})
	filterType    = reflect.TypeOf(nodes.FilterCall{})
	testType      = reflect.TypeOf(nodes.TestCall{})
	callType      = reflect.TypeOf(nodes.Call{})
	macroType     = reflect.TypeOf(nodes.Macro{})
	setTargetName = "target"
)

func (w *walker) visitNode(p unsafe.Pointer, t reflect.Type) {
	switch t {
	case outputType:
		wrapOutput((*nodes.Output)(p))
	case filterType:
		f := (*nodes.FilterCall)(p)
		if f.Name != finalizeFilter && f.Name != arithFilter && !filters.Exists(f.Name) {
			w.fail(f.Token, "unknown filter '%s'", f.Name)
		}
	case testType:
		tc := (*nodes.TestCall)(p)
		if !builtins.Tests.Exists(tc.Name) {
			w.fail(tc.Token, "unknown test '%s'", tc.Name)
		}
	case callType:
		c := (*nodes.Call)(p)
		if n, ok := c.Func.(*nodes.Name); ok {
			w.calls = append(w.calls, namedUse{name: n.Name.Val, tok: n.Name})
		}
	case macroType:
		m := (*nodes.Macro)(p)
		w.defined[m.Name] = true
		for _, kw := range m.Kwargs {
			if n, ok := kw.Key.(*nodes.Name); ok {
				w.defined[n.Name.Val] = true
			}
			if s, ok := kw.Key.(*nodes.String); ok {
				w.defined[s.Val] = true
			}
		}
	default:
		// Loop variables, set targets and the like are bound by name in
		// control structures; record string fields named Key/Value and Name
		// targets so calls to them are not reported as unknown.
		v := reflect.NewAt(t, p).Elem()
		for _, field := range []string{"Key", "Value"} {
			if f := v.FieldByName(field); f.IsValid() && f.Kind() == reflect.String && f.String() != "" {
				w.defined[f.String()] = true
			}
		}
		if f := v.FieldByName(setTargetName); f.IsValid() && f.Kind() == reflect.Interface && !f.IsNil() {
			if n, ok := reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Interface().(*nodes.Name); ok {
				w.defined[n.Name.Val] = true
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

// wrapOutput applies PaV's finalize rule to an output's expressions. An inline
// `x if c` without else yields undefined in Jinja when c is false, which the
// finalize rule rejects; give it an explicit none alternative so it does here too.
func wrapOutput(o *nodes.Output) {
	tok := o.Start
	line, col := 0, 0
	if tok != nil {
		line, col = tok.Line, tok.Col
	}
	wrap := func(e nodes.Expression) nodes.Expression {
		return &nodes.FilteredExpression{
			Expression: e,
			Filters: []*nodes.FilterCall{{
				Token: tok,
				Name:  finalizeFilter,
				Args:  []nodes.Expression{&nodes.Integer{Location: tok, Val: line}, &nodes.Integer{Location: tok, Val: col}},
			}},
		}
	}
	o.Expression = wrap(o.Expression)
	if o.Condition != nil {
		if o.Alternative == nil {
			o.Alternative = &nodes.None{Location: tok}
		}
		o.Alternative = wrap(o.Alternative)
	}
}

var expressionType = reflect.TypeOf((*nodes.Expression)(nil)).Elem()

// rewriteArith replaces `a ** b`, `a // b`, `a % b` and `a / b` held in an
// addressable expression slot by `a|__pav_arith(op, b)`, which implements
// Python's semantics (gonja's differ: float powers, truncating division,
// +Inf on division by zero, a panic on string formatting).
func rewriteArith(slot reflect.Value) {
	if slot.IsNil() || !slot.CanAddr() || slot.Type() != expressionType {
		return
	}
	slot = reflect.NewAt(slot.Type(), unsafe.Pointer(slot.UnsafeAddr())).Elem() // readable even if unexported
	bin, ok := slot.Elem().Interface().(*nodes.BinaryExpression)
	if !ok || bin.Operator == nil || bin.Operator.Token == nil {
		return
	}
	op := bin.Operator.Token.Val
	switch op {
	case "**", "//", "%", "/":
	default:
		return
	}
	tok := bin.Operator.Token
	repl := &nodes.FilteredExpression{
		Expression: bin.Left,
		Filters: []*nodes.FilterCall{{
			Token: tok,
			Name:  arithFilter,
			Args:  []nodes.Expression{&nodes.String{Location: tok, Val: op}, bin.Right},
		}},
	}
	slot.Set(reflect.ValueOf(repl))
}
