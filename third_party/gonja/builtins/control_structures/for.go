package controlStructures

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/parser"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

type ForControlStructure struct {
	// Target is what each item is assigned to (PaV): a name, or a tuple
	// of targets, unpacked as Python does (a mapping's items are its keys).
	Target          *UnpackTarget
	ObjectEvaluator nodes.Expression
	IfCondition     nodes.Expression
	Recursive       bool

	BodyWrapper  *nodes.Wrapper
	EmptyWrapper *nodes.Wrapper
}

func (fcs *ForControlStructure) Position() *tokens.Token {
	return fcs.BodyWrapper.Position()
}
func (fcs *ForControlStructure) String() string {
	t := fcs.Position()
	return fmt.Sprintf("ForControlStructure(Line=%d Col=%d)", t.Line, t.Col)
}

// LoopInfos exposes Jinja2's `loop` variable inside a {% for %} body.
type LoopInfos struct {
	index     int
	index0    int
	length    int
	revindex  int
	revindex0 int
	first     bool
	last      bool
	depth     int
	depth0    int
	PrevItem  *exec.Value
	NextItem  *exec.Value
	lastValue *exec.Value

	// recurse renders the loop's body over other items, one level deeper,
	// in a `recursive` loop: `loop(children)` (nil otherwise).
	recurse func(items *exec.Value) *exec.Value
}

// GetAttribute implements exec.AttributeGetter so templates can access
// loop.* fields/methods with Jinja2-style lowercase names.
// Capitalized aliases (Cycle, Changed, PrevItem, NextItem) are also
// supported for backward compatibility with older gonja templates.
func (li *LoopInfos) GetAttribute(name string) (*exec.Value, bool) {
	switch name {
	case "index":
		return exec.AsValue(li.index), true
	case "index0":
		return exec.AsValue(li.index0), true
	case "revindex":
		return exec.AsValue(li.revindex), true
	case "revindex0":
		return exec.AsValue(li.revindex0), true
	case "first":
		return exec.AsValue(li.first), true
	case "last":
		return exec.AsValue(li.last), true
	case "length":
		return exec.AsValue(li.length), true
	case "depth":
		return exec.AsValue(li.depth), true
	case "depth0":
		return exec.AsValue(li.depth0), true
	case "previtem", "PrevItem":
		return li.PrevItem, true
	case "nextitem", "NextItem":
		return li.NextItem, true
	case "cycle", "Cycle":
		fn := func(va *exec.VarArgs) *exec.Value {
			if len(va.Args) == 0 {
				return exec.AsValue("")
			}
			idx := li.index0 % len(va.Args)
			if idx < 0 {
				idx += len(va.Args)
			}
			return va.Args[idx]
		}
		return exec.AsValue(fn), true
	case "changed", "Changed":
		fn := func(va *exec.VarArgs) *exec.Value {
			var current *exec.Value
			if len(va.Args) == 1 {
				current = va.Args[0]
			} else {
				items := make([]any, 0, len(va.Args))
				for _, a := range va.Args {
					items = append(items, a.Interface())
				}
				current = exec.AsValue(items)
			}
			same := li.lastValue != nil && current.EqualValueTo(li.lastValue)
			li.lastValue = current
			return exec.AsValue(!same)
		}
		return exec.AsValue(fn), true
	}
	return exec.AsValue(nil), false
}

// Call is `loop(items)`: in a recursive loop, the loop's body rendered over
// items, one level deeper (PaV: `loop` keeps its attributes there, as in
// Jinja). Any loop is callable, as Jinja's; only a recursive one may be called.
func (li *LoopInfos) Call(va *exec.VarArgs) *exec.Value {
	if li.recurse == nil {
		return exec.AsValue(errors.New("the loop must have the 'recursive' marker to be called recursively"))
	}
	if len(va.Args) != 1 || len(va.KwArgs) != 0 {
		return exec.AsValue(errors.New("loop() takes exactly one argument, the items"))
	}
	return li.recurse(va.Args[0])
}

func (fcs *ForControlStructure) Execute(r *exec.Renderer, tag *nodes.ControlStructureBlock) (forError error) {
	obj := r.Eval(fcs.ObjectEvaluator)
	switch {
	case obj.IsError():
		return obj
	case obj.IsUndefined(): // PaV: as in Jinja, undefined iterates as empty, none is an error
		obj = exec.AsValue([]any{})
	case obj.IsNil():
		return r.Evaluator().Raise(errors.New("'NoneType' object is not iterable"))
	case obj.IsBool() || obj.IsNumber(): // PaV: as in Python (upstream iterated nothing)
		return r.Evaluator().Raise(fmt.Errorf("'%s' object is not iterable", exec.PyType(obj)))
	}
	return fcs.renderIterable(r, obj, 1)
}

// isLoopControlError checks whether err (possibly wrapped multiple times
// by errors.Wrapf) is or contains a loop-control sentinel of type T.
func isLoopControlError[T error](err error) bool {
	for e := err; e != nil; {
		if _, ok := e.(T); ok {
			return true
		}
		// Try standard Unwrap first
		type unwrapper interface{ Unwrap() error }
		if u, ok := e.(unwrapper); ok {
			e = u.Unwrap()
			continue
		}
		// pkg/errors compatibility
		type causer interface{ Cause() error }
		if c, ok := e.(causer); ok {
			e = c.Cause()
			continue
		}
		return false
	}
	return false
}

// renderIterable contains the main render logic, factored out so the
// recursive callable can invoke it again with a new iterable while
// writing to the same outer renderer.
// depth is loop.depth: the level of recursion, 1 outside any (PaV: a loop
// nested in another's body starts at 1 too, as in Jinja).
func (fcs *ForControlStructure) renderIterable(r *exec.Renderer, obj *exec.Value, depth int) error {
	// First pass: materialise items, applying any {% if cond %} filter.
	items := exec.NewDict()
	var unpackErr error
	obj.Iterate(func(idx, count int, key, value *exec.Value) bool {
		sub := r.Inherit()
		ctx := sub.Environment.Context
		// PaV: a mapping iterates its keys, each unpacked like any item, as
		// in Python (upstream bound `for k, v in mapping` to its pairs)
		pair := &exec.Pair{Key: key}
		if unpackErr = fcs.Target.assign(ctx, pair.Key); unpackErr != nil {
			return false
		}

		if fcs.IfCondition != nil {
			cond := sub.Eval(fcs.IfCondition)
			if cond.IsError() { // PaV: not swallowed
				unpackErr = cond.Unwrap()
				return false
			}
			if !cond.IsTrue() {
				return true
			}
			if fcs.Target.Items != nil {
				pair.Key = fcs.Target.repack(ctx)
			}
		}
		items.Pairs = append(items.Pairs, pair)
		return true
	}, func() {})
	if unpackErr != nil {
		return r.Evaluator().Raise(unpackErr)
	}

	// Empty case.
	length := len(items.Pairs)
	if length == 0 {
		if fcs.EmptyWrapper != nil {
			return r.Inherit().ExecuteWrapper(fcs.EmptyWrapper)
		}
		return nil
	}

	loop := &LoopInfos{
		first:  true,
		index0: -1,
		length: length,
		depth:  depth,
		depth0: depth - 1,
	}

	if fcs.Recursive {
		loop.recurse = func(children *exec.Value) *exec.Value {
			buf := new(bytes.Buffer)
			sub := r.Inherit()
			sub.Output = buf
			if err := fcs.renderIterable(sub, children, depth+1); err != nil {
				return exec.AsValue(err)
			}
			if sub.Config.AutoEscape { // Markup only in an autoescape block (PaV)
				return exec.AsSafeValue(buf.String())
			}
			return exec.AsValue(buf.String())
		}
	}
	for idx, pair := range items.Pairs {
		sub := r.Inherit()
		ctx := sub.Environment.Context
		_ = fcs.Target.assign(ctx, pair.Key) // it bound once already

		ctx.Set("loop", loop)
		loop.index0 = idx
		loop.index = loop.index0 + 1
		if idx == 1 {
			loop.first = false
		}
		if idx+1 == length {
			loop.last = true
		}
		loop.revindex = length - idx
		loop.revindex0 = length - (idx + 1)

		if idx == 0 {
			loop.PrevItem = exec.Undefined("there is no previtem") // PaV: as Jinja's
		} else {
			loop.PrevItem = items.Pairs[idx-1].Key
		}

		if idx == length-1 {
			loop.NextItem = exec.Undefined("there is no nextitem")
		} else {
			loop.NextItem = items.Pairs[idx+1].Key
		}

		err := sub.Enter(func() error { return sub.ExecuteWrapper(fcs.BodyWrapper) })
		if err != nil {
			// Unwrap through any error wrapping (e.g. errors.Wrapf) added by
			// intermediate control structures like {% if %}.
			if isLoopControlError[*LoopBreakError](err) {
				break
			}
			if isLoopControlError[*LoopContinueError](err) {
				continue
			}
			return err
		}
	}

	return nil
}

// Names are the names the loop binds for each item.
func (fcs *ForControlStructure) Names() []string { return fcs.Target.Names() }

func forParser(p *parser.Parser, args *parser.Parser) (nodes.ControlStructure, error) {
	cs := &ForControlStructure{}

	// Arguments parsing (PaV: any tuple of names, nested, as in Python)
	target, err := parseUnpackTargets(args)
	if err != nil {
		return nil, err
	}
	cs.Target = target

	if args.Match(tokens.In) == nil {
		return nil, args.Error("Expected keyword 'in'.", nil)
	}

	objectEvaluator, err := args.ParseExpressionWithoutCondition() // `if` filters the items
	if err != nil {
		return nil, err
	}
	cs.ObjectEvaluator = objectEvaluator

	if args.MatchName("if") != nil {
		ifCondition, err := args.ParseExpression()
		if err != nil {
			return nil, err
		}
		cs.IfCondition = ifCondition
	}

	// Jinja2 `recursive` keyword.
	if args.MatchName("recursive") != nil {
		cs.Recursive = true
	}

	if !args.End() {
		return nil, args.Error("Malformed for-loop args.", nil)
	}

	// Body wrapping
	wrapper, endargs, err := p.WrapUntil("else", "endfor")
	if err != nil {
		return nil, err
	}
	cs.BodyWrapper = wrapper

	if !endargs.End() {
		return nil, endargs.Error("Arguments not allowed here.", nil)
	}

	if wrapper.EndTag == "else" {
		wrapper, endargs, err = p.WrapUntil("endfor")
		if err != nil {
			return nil, err
		}
		cs.EmptyWrapper = wrapper

		if !endargs.End() {
			return nil, endargs.Error("Arguments not allowed here.", nil)
		}
	}

	return cs, nil
}
