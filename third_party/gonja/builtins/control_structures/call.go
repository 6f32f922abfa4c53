package controlStructures

import (
	"fmt"

	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/parser"
	"github.com/nikolalohinski/gonja/v2/tokens"
	"github.com/pkg/errors"
)

// CallControlStructure implements Jinja2's
//
//	{% call[(params...)] macro_name(args...) %} body {% endcall %}
//
// The body is exposed inside the macro as the `caller()` function: a macro
// named caller with the block's parameters (PaV), as in Jinja.
type CallControlStructure struct {
	Location *tokens.Token
	Call     *nodes.Call  // the macro invocation
	Caller   *nodes.Macro // the body, as the macro caller
}

func (c *CallControlStructure) Position() *tokens.Token { return c.Location }
func (c *CallControlStructure) String() string {
	t := c.Position()
	return fmt.Sprintf("CallControlStructure(Line=%d Col=%d)", t.Line, t.Col)
}

func (c *CallControlStructure) Execute(r *exec.Renderer, tag *nodes.ControlStructureBlock) error {
	caller, err := exec.MacroNodeToFunc(c.Caller, r)
	if err != nil {
		return errors.Wrapf(err, `Unable to execute {%% call %%}`)
	}

	result := r.Evaluator().CallWithCaller(c.Call, caller)
	if result.IsError() {
		return errors.Wrapf(result, "Unable to execute {%% call %%}")
	}

	if _, err := r.Output.Write([]byte(result.String())); err != nil {
		return err
	}
	return nil
}

func callParser(p *parser.Parser, args *parser.Parser) (nodes.ControlStructure, error) {
	cs := &CallControlStructure{Location: p.Current()}
	cs.Caller = &nodes.Macro{Location: cs.Location, Name: "caller", Kwargs: []*nodes.Pair{}}
	if args.Match(tokens.LeftParenthesis) != nil {
		if err := parseSignature(p, args, cs.Caller); err != nil {
			return nil, err
		}
	}

	// Parse the macro-call expression: name(arg1, arg2, key=val, ...).
	expr, err := args.ParseExpression()
	if err != nil {
		return nil, err
	}
	call, ok := expr.(*nodes.Call)
	if !ok {
		return nil, args.Error("Expected a macro call expression after {% call %}", args.Current())
	}
	cs.Call = call

	if !args.End() {
		return nil, args.Error("Malformed call-tag arguments.", args.Current())
	}

	// Parse body until {% endcall %}.
	wrapper, endargs, err := p.WrapUntil("endcall")
	if err != nil {
		return nil, err
	}
	cs.Caller.Wrapper = wrapper
	takeImplicitArgs(cs.Caller)
	if !endargs.End() {
		return nil, endargs.Error("endcall takes no arguments", nil)
	}
	return cs, nil
}
