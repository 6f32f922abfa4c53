package controlStructures

import (
	"bytes"
	"fmt"

	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/parser"
	"github.com/nikolalohinski/gonja/v2/tokens"
	"github.com/pkg/errors"
)

type SetControlStructure struct {
	location   *tokens.Token
	target     nodes.Expression
	expression nodes.Expression
	body       *nodes.Wrapper
	// filters of a block set, {% set x | f | g %}...{% endset %} (PaV)
	filters []*nodes.FilterCall
	// more names to unpack the value into, {% set a, b = ... %} (PaV):
	// target gets the first item
	more []*nodes.Name
}

func (scs *SetControlStructure) Position() *tokens.Token {
	return scs.location
}
func (scs *SetControlStructure) String() string {
	t := scs.Position()
	return fmt.Sprintf("SetControlStructure(Line=%d Col=%d)", t.Line, t.Col)
}

func (scs *SetControlStructure) Execute(r *exec.Renderer, tag *nodes.ControlStructureBlock) error {
	var value *exec.Value

	// --- Block form: {% set x %}...{% endset %} ---
	if scs.body != nil {
		buf := new(bytes.Buffer)
		sub := r.Inherit()
		originalOutput := sub.Output
		sub.Output = buf
		err := sub.ExecuteWrapper(scs.body)
		sub.Output = originalOutput
		if err != nil {
			return err
		}
		// Jinja2's block-set captures the rendered string as a Markup
		// (safe) value in an autoescape block, else a str (PaV).
		value = exec.AsValue(buf.String())
		value.Safe = r.Config.AutoEscape
		for _, call := range scs.filters {
			value = r.Evaluator().ExecuteFilter(call, value)
			if value.IsError() {
				return errors.Wrapf(value, `Unable to apply filter %s (Line: %d Col: %d, near %s`,
					call.Name, call.Token.Line, call.Token.Col, call.Token.Val)
			}
		}
	} else {
		value = r.Eval(scs.expression)
	}

	if value == nil {
		return errors.Errorf(`Invalid value in 'set' tag: %s`, scs.expression)
	}
	if value.IsError() {
		return value
	}

	if len(scs.more) > 0 {
		return scs.unpack(r, value)
	}

	switch n := scs.target.(type) {
	case *nodes.Name:
		r.Environment.Context.Set(n.Name.Val, exec.Item(value))
	case *nodes.GetAttribute:
		target := r.Eval(n.Node)
		if target.IsError() {
			return errors.Wrapf(target, `Unable to evaluate target %s`, n)
		}
		if err := target.Set(exec.AsValue(n.Attribute), exec.Item(value)); err != nil {
			return errors.Wrapf(err, `Unable to set value on "%s"`, n.Attribute)
		}
	case *nodes.GetItem:
		target := r.Eval(n.Node)
		if target.IsError() {
			return errors.Wrapf(target, `Unable to evaluate target %s`, n)
		}
		arg := r.Eval(n.Arg)
		if arg.IsError() {
			return errors.Wrapf(target, `Unable to evaluate argument %s`, n.Arg)
		}
		if err := target.Set(arg, exec.Item(value)); err != nil {
			return errors.Wrapf(err, `Unable to set value on "%s"`, n.Arg)
		}
	default:
		return errors.Errorf(`Illegal set target node %s`, n)
	}

	return nil
}

// unpack assigns the items of value to the names of a tuple target, as
// Python does: there must be exactly as many items as names.
func (scs *SetControlStructure) unpack(r *exec.Renderer, value *exec.Value) error {
	names := append([]*nodes.Name{scs.target.(*nodes.Name)}, scs.more...)
	items, err := exec.PyUnpack(value, len(names))
	if err != nil {
		return err
	}
	for i, name := range names {
		r.Environment.Context.Set(name.Name.Val, exec.Item(items[i]))
	}
	return nil
}

func setParser(p *parser.Parser, args *parser.Parser) (nodes.ControlStructure, error) {
	cs := &SetControlStructure{
		location: p.Current(),
	}

	// PaV: a parenthesized tuple of names, {% set (a, b) = ... %}.
	if args.Match(tokens.LeftParenthesis) != nil {
		target, err := parseUnpackTargets(args)
		if err != nil {
			return nil, err
		}
		if args.Match(tokens.RightParenthesis) == nil {
			return nil, args.Error("Expected ')' after the names to unpack into.", nil)
		}
		names := target.Names()
		if target.Items != nil && len(names) != len(target.Items) {
			return nil, args.Error("Only names can be unpacked into in a set tag.", nil)
		}
		cs.target = &nodes.Name{Name: &tokens.Token{Type: tokens.Name, Val: names[0], Line: cs.location.Line, Col: cs.location.Col}}
		for _, name := range names[1:] {
			cs.more = append(cs.more, &nodes.Name{Name: &tokens.Token{Type: tokens.Name, Val: name, Line: cs.location.Line, Col: cs.location.Col}})
		}
		if args.Match(tokens.Assign) == nil {
			return nil, args.Error("Expected '=' after the names to unpack into.", args.Current())
		}
		return setValue(cs, args)
	}
	// Parse target (variable name / attr / item).
	ident, err := args.ParseVariableOrLiteral()
	if err != nil {
		return nil, errors.Wrap(err, `unable to parse identifier`)
	}
	switch n := ident.(type) {
	case *nodes.Name, *nodes.Call, *nodes.GetItem, *nodes.GetAttribute:
		cs.target = n
	default:
		return nil, errors.Errorf(`unexpected set target %s`, n)
	}
	// PaV: tuple unpacking into names, {% set a, b = ... %}.
	for args.Match(tokens.Comma) != nil {
		_, ok := cs.target.(*nodes.Name)
		next, err := args.ParseVariableOrLiteral()
		if err != nil {
			return nil, errors.Wrap(err, `unable to parse identifier`)
		}
		name, nextOK := next.(*nodes.Name)
		if !ok || !nextOK {
			return nil, args.Error("Only names can be unpacked into in a set tag.", args.Current())
		}
		cs.more = append(cs.more, name)
	}
	if len(cs.more) > 0 && args.Current(tokens.Assign) == nil {
		return nil, args.Error("Expected '=' after the names to unpack into.", args.Current())
	}

	if args.Match(tokens.Assign) == nil {
		// PaV: a block set may filter what it captures, as in Jinja.
		for args.Match(tokens.Pipe) != nil {
			filterCall, err := args.ParseFilter()
			if err != nil {
				return nil, err
			}
			cs.filters = append(cs.filters, filterCall)
		}
		if !args.End() {
			return nil, args.Error("Expected '=' or end of tag for block-set.", args.Current())
		}
		wrapper, endargs, err := p.WrapUntil("endset")
		if err != nil {
			return nil, err
		}
		if !endargs.End() {
			return nil, endargs.Error("endset takes no arguments", nil)
		}
		cs.body = wrapper
		return cs, nil
	}

	return setValue(cs, args)
}

// setValue parses what follows the `=` of {% set x = expr %} into cs.
func setValue(cs *SetControlStructure, args *parser.Parser) (nodes.ControlStructure, error) {
	expr, err := args.ParseExpression()
	if err != nil {
		return nil, err
	}
	// PaV: `x = a, b` assigns the tuple (a, b), as in Jinja.
	if t := args.Current(tokens.Comma); t != nil {
		items := []nodes.Expression{expr}
		for args.Match(tokens.Comma) != nil {
			if args.End() {
				break // a trailing comma
			}
			item, err := args.ParseExpression()
			if err != nil {
				return nil, err
			}
			items = append(items, item)
		}
		expr = &nodes.Tuple{Location: t, Val: items}
	}
	cs.expression = expr

	if !args.End() {
		return nil, args.Error("Malformed 'set' tag args.", args.Current())
	}

	return cs, nil
}
