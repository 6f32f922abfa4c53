package parser

import (
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

func (p *Parser) ParseFilter() (*nodes.FilterCall, error) {
	identToken := p.Match(tokens.Name)

	if identToken == nil {
		return nil, p.Error("filter name must be an identifier", p.Current())
	}

	filter := &nodes.FilterCall{
		Token:  identToken,
		Name:   identToken.Val,
		Args:   []nodes.Expression{},
		Kwargs: map[string]nodes.Expression{},
	}

	if p.Match(tokens.LeftParenthesis) != nil {
		if p.Current(tokens.VariableEnd) != nil {
			return nil, p.Error("filter parameter required after '('", p.stream.Current())
		}

		args, err := p.parseCallArgs()
		if err != nil {
			return nil, err
		}
		filter.Args, filter.Kwargs = args.Args, args.Kwargs
	}

	return filter, nil
}
