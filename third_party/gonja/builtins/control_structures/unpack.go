package controlStructures

import (
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/parser"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

// UnpackTarget is what a for loop assigns each item to (PaV): a name, or a
// tuple of targets, possibly parenthesized and nested, as Python's
// `for (a, b), c in ...`.
type UnpackTarget struct {
	Name  string          // a name, or "" for a tuple
	Items []*UnpackTarget // a tuple's targets
}

// Names are the names target binds, in order.
func (t *UnpackTarget) Names() []string {
	if t.Items == nil {
		return []string{t.Name}
	}
	var out []string
	for _, item := range t.Items {
		out = append(out, item.Names()...)
	}
	return out
}

// parseUnpackTargets parses `a`, `a, b`, `(a, b), c`..., up to what is not
// part of it.
func parseUnpackTargets(args *parser.Parser) (*UnpackTarget, error) {
	first, err := parseUnpackTarget(args)
	if err != nil {
		return nil, err
	}
	if args.Current(tokens.Comma) == nil {
		return first, nil
	}
	tuple := &UnpackTarget{Items: []*UnpackTarget{first}}
	for args.Match(tokens.Comma) != nil {
		if args.Current(tokens.Name, tokens.LeftParenthesis) == nil {
			break // a trailing comma: `for a, in ...`
		}
		next, err := parseUnpackTarget(args)
		if err != nil {
			return nil, err
		}
		tuple.Items = append(tuple.Items, next)
	}
	return tuple, nil
}

func parseUnpackTarget(args *parser.Parser) (*UnpackTarget, error) {
	if args.Match(tokens.LeftParenthesis) != nil {
		inner, err := parseUnpackTargets(args)
		if err != nil {
			return nil, err
		}
		if args.Match(tokens.RightParenthesis) == nil {
			return nil, args.Error("Expected ')' after the names to unpack into.", nil)
		}
		return inner, nil // (a) is a, as in Python
	}
	name := args.Match(tokens.Name)
	if name == nil {
		return nil, args.Error("Expected a name to assign the items to in the 'for'-tag.", nil)
	}
	return &UnpackTarget{Name: name.Val}, nil
}

// assign binds value to target in ctx, unpacking a tuple target as Python
// does: value must have exactly as many items.
func (t *UnpackTarget) assign(ctx *exec.Context, value *exec.Value) error {
	if t.Items == nil {
		ctx.Set(t.Name, value)
		return nil
	}
	items, err := exec.PyUnpack(value, len(t.Items))
	if err != nil {
		return err
	}
	for i, item := range t.Items {
		if err := item.assign(ctx, items[i]); err != nil {
			return err
		}
	}
	return nil
}

// repack is the tuple of what target bound in ctx, nested as target is:
// the item a filtered loop yields (Jinja's loop filter re-packs the
// unpacked names: its loop.previtem and nextitem are tuples).
func (t *UnpackTarget) repack(ctx *exec.Context) *exec.Value {
	if t.Items == nil {
		v, _ := ctx.Get(t.Name)
		return exec.ToValue(v)
	}
	out := make(exec.Tuple, len(t.Items))
	for i, item := range t.Items {
		out[i] = exec.Item(item.repack(ctx))
	}
	return exec.AsValue(out)
}
