package parser

import (
	"fmt"

	"github.com/nikolalohinski/gonja/v2/logging"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/tokens"
	log "github.com/sirupsen/logrus"
)

// ParseFilterExpression parses an optionnal filter chain for a node
func (p *Parser) ParseFilterExpression(expr nodes.Expression) (nodes.Expression, error) {
	if logging.Enabled() {
		log.WithFields(log.Fields{
			"current":    p.Current(),
			"expression": expr,
		}).Trace("ParseFilterExpression")
	}

	for p.Current(tokens.Pipe, tokens.Is) != nil {
		if p.Current(tokens.Is) != nil {
			// PaV: a test binds as tightly as a filter, as in Jinja's
			// parse_filter_expr: `a == b is c` is `a == (b is c)`.
			test, err := p.parseIsTest(expr)
			if err != nil {
				return nil, err
			}
			expr = test
			continue
		}
		filtered := &nodes.FilteredExpression{
			Location:   nodes.Start(expr),
			Expression: expr,
		}
		for p.Match(tokens.Pipe) != nil {

			filter, err := p.ParseFilter()
			if err != nil {
				return nil, err
			}

			filtered.Filters = append(filtered.Filters, filter)
		}
		expr = filtered
	}

	if logging.Enabled() {
		log.WithFields(log.Fields{
			"expr": expr,
		}).Trace("ParseFilterExpression return")
	}
	return expr, nil
}

// ParseExpression parses an expression, a conditional expression
// (`a if c else b`, PaV) included, as Jinja's parse_expression does.
// Nested expression should call this method
func (p *Parser) ParseExpression() (nodes.Expression, error) {
	expr, err := p.ParseExpressionWithoutCondition()
	if err != nil || expr == nil {
		return expr, err
	}
	for p.MatchName("if") != nil {
		condition, err := p.ParseExpressionWithoutCondition()
		if err != nil {
			return nil, err
		}
		if condition == nil {
			return nil, p.Error("Expected a condition", p.Current())
		}
		c := &nodes.Conditional{Location: nodes.Start(expr), Expression: expr, Condition: condition}
		if p.MatchName("else") != nil {
			if c.Alternative, err = p.ParseExpression(); err != nil {
				return nil, err
			}
			if c.Alternative == nil {
				return nil, p.Error("Expected an alternative", p.Current())
			}
		}
		expr = c
	}
	return expr, nil
}

// ParseExpressionWithoutCondition parses an expression with optional
// filters but no conditional expression around it: what may be followed by
// a keyword `if`, as the iterable of a for loop.
func (p *Parser) ParseExpressionWithoutCondition() (nodes.Expression, error) {
	if logging.Enabled() {
		log.WithFields(log.Fields{
			"current": p.Current(),
		}).Trace("ParseExpression")
	}
	var expr nodes.Expression

	expr, err := p.ParseLogicalExpression()
	if err != nil {
		return nil, err
	}

	expr, err = p.ParseFilterExpression(expr)
	if err != nil {
		return nil, err
	}

	if logging.Enabled() {
		log.WithFields(log.Fields{
			"expr": expr,
		}).Trace("ParseExpression return")
	}
	return expr, nil
}

func (p *Parser) ParseExpressionNode() (nodes.Node, error) {
	if logging.Enabled() {
		log.WithFields(log.Fields{
			"current": p.Current(),
		}).Trace("ParseExpressionNode")
	}

	tok := p.Match(tokens.VariableBegin)
	if tok == nil {
		return nil, p.Error(fmt.Sprintf("'%s' expected here", p.Config.VariableStartString), p.Current())
	}

	node := &nodes.Output{
		Start: tok,
	}

	expr, err := p.ParseExpression()
	if err != nil {
		return nil, err
	}
	if expr == nil {
		return nil, p.Error("Expected an expression.", p.Current())
	}
	node.Expression = expr

	tok = p.Match(tokens.VariableEnd)
	if tok == nil {
		return nil, p.Error(fmt.Sprintf("'%s' expected here", p.Config.VariableEndString), p.Current())
	}
	node.End = tok
	if data := p.Current(tokens.Data); data != nil {
		data.Trim = data.Trim || len(node.End.Val) > 0 && node.End.Val[0] == '-'
	}

	if logging.Enabled() {
		log.WithFields(log.Fields{
			"node": node,
		}).Trace("parseExpressionNode return")
	}
	return node, nil
}
