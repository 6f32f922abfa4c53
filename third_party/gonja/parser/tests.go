package parser

import (
	"fmt"
	log "github.com/sirupsen/logrus"

	"github.com/nikolalohinski/gonja/v2/logging"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

func (p *Parser) ParseTest(expr nodes.Expression) (nodes.Expression, error) {
	if logging.Enabled() {
		log.WithFields(log.Fields{
			"current": p.Current(),
		}).Trace("parseTest")
	}

	expr, err := p.ParseFilterExpression(expr)
	if err != nil {
		return nil, err
	}
	if p.Current(
		tokens.GreaterThan,
		tokens.GreaterThanOrEqual,
		tokens.LowerThan,
		tokens.LowerThanOrEqual,
		tokens.Not,
		tokens.In,
		tokens.Is,
	) != nil && (p.Current(tokens.Not) == nil || p.Peek(tokens.In) != nil) {
		// PaV: after an operand `not` is only `not in`, as in Jinja's
		// parse_compare; else it ends the expression (upstream: `x not y`
		// was `not (x is y)`).
		is := p.Match(tokens.Is)

		not := p.Match(tokens.Not)
		ident := p.Next()
		if is != nil && ident.Type != tokens.Name && ident.Type != tokens.In {
			// PaV: as in Jinja, `is` takes a test's name; the tests named
			// by operators (`==`, `<`, ...) are for select and reject.
			return nil, p.Error(fmt.Sprintf("expected a test name after 'is', got '%s'", ident.Val), ident)
		}

		test := &nodes.TestCall{
			Token:  ident,
			Name:   ident.Val,
			Args:   []nodes.Expression{},
			Kwargs: map[string]nodes.Expression{},
		}
		if ident.Type == tokens.In {
			// `in` is a comparison in Jinja (PaV): its right operand is
			// a whole arithmetic expression, filters included, so
			// `x in y | list` is `x in (y | list)`.
			arg, err := p.ParseMath()
			if err != nil {
				return nil, err
			}
			if arg == nil {
				return nil, p.Error("Expected an expression after 'in'", p.Current())
			}
			test.Args = append(test.Args, arg)
		} else if p.CurrentName("else") == nil {
			// avoid trying to parse "else" as test arguments
			arg, err := p.ParseVariableOrLiteral()
			if err == nil && arg != nil {
				test.Args = append(test.Args, arg)
			}
		}
		expr = &nodes.TestExpression{
			Location:   nodes.Start(expr),
			Expression: expr,
			Test:       test,
		}

		if not != nil {
			expr = &nodes.Negation{
				Term:     expr,
				Operator: not,
			}
		}
	}

	if logging.Enabled() {
		log.WithFields(log.Fields{
			"expr": expr,
		}).Trace("parseTest return")
	}
	return expr, nil
}

// parseIsTest parses `is [not] name [argument]` after expr, as Jinja's
// parse_test does (PaV).
func (p *Parser) parseIsTest(expr nodes.Expression) (nodes.Expression, error) {
	p.Match(tokens.Is)
	not := p.Match(tokens.Not)
	ident := p.Next()
	if ident == nil || ident.Type != tokens.Name && ident.Type != tokens.In {
		// as in Jinja, `is` takes a test's name; the tests named by
		// operators (`==`, `<`, ...) are for select and reject.
		got := "the end"
		if ident != nil {
			got = "'" + ident.Val + "'"
		}
		return nil, p.Error(fmt.Sprintf("expected a test name after 'is', got %s", got), ident)
	}
	test := &nodes.TestCall{
		Token:  ident,
		Name:   ident.Val,
		Args:   []nodes.Expression{},
		Kwargs: map[string]nodes.Expression{},
	}
	// arguments in parentheses are a call's, as in Jinja's parse_test
	// (`is divisibleby(3,)`, `is divisibleby(num=3)`); one without only where
	// Jinja takes one
	if p.Match(tokens.LeftParenthesis) != nil {
		args, err := p.parseCallArgs()
		if err != nil {
			return nil, err
		}
		test.Args, test.Kwargs = args.Args, args.Kwargs
	} else if p.Current(tokens.Name, tokens.String, tokens.Integer, tokens.Float, tokens.LeftBracket, tokens.LeftBrace) != nil &&
		p.CurrentName("else") == nil {
		arg, err := p.ParseVariableOrLiteral()
		if err == nil && arg != nil {
			test.Args = append(test.Args, arg)
		}
	}
	expr = &nodes.TestExpression{
		Location:   nodes.Start(expr),
		Expression: expr,
		Test:       test,
	}
	if not != nil {
		expr = &nodes.Negation{Term: expr, Operator: not}
	}
	return expr, nil
}
