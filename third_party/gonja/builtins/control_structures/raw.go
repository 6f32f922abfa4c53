package controlStructures

import (
	"fmt"
	"io"
	"strings"

	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/parser"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

type RawControlStructure struct {
	location *tokens.Token
	data     *nodes.Data // nil for an empty raw block
}

func (rcs *RawControlStructure) Position() *tokens.Token {
	return rcs.location
}
func (rcs *RawControlStructure) String() string {
	t := rcs.Position()
	return fmt.Sprintf("RawControlStructure(Line=%d Col=%d)", t.Line, t.Col)
}

// Execute writes the raw text, without the whitespace that `{% raw -%}`
// and `{%- endraw %}` strip, as Jinja does (PaV).
func (rcs *RawControlStructure) Execute(r *exec.Renderer, tag *nodes.ControlStructureBlock) error {
	if rcs.data == nil {
		return nil
	}
	text := rcs.data.Data.Val
	if rcs.data.Trim.Left {
		text = strings.TrimLeft(text, " \r\n\t")
	}
	if rcs.data.Trim.Right {
		text = strings.TrimRight(text, " \r\n\t")
	}
	_, err := io.WriteString(r.Output, text)
	return err
}

func rawParser(p *parser.Parser, args *parser.Parser) (nodes.ControlStructure, error) {
	cs := &RawControlStructure{location: p.Current()}

	wrapper, _, err := p.WrapUntil("endraw")
	if err != nil {
		return nil, err
	}
	switch len(wrapper.Nodes) {
	case 0: // an empty raw block (PaV: upstream failed on it)
	case 1:
		data, ok := wrapper.Nodes[0].(*nodes.Data)
		if !ok {
			return nil, p.Error("raw controlStructure can only contains a single data node", wrapper.Nodes[0].Position())
		}
		cs.data = data
	default:
		return nil, p.Error("raw controlStructure can only contains a single data node", wrapper.Nodes[1].Position())
	}

	if !args.End() {
		return nil, args.Error("raw controlStructure doesn't accept parameters.", args.Current())
	}

	return cs, nil
}
