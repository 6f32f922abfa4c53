package exec

import (
	"io"
	"strings"

	"github.com/pkg/errors"

	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/loaders"
	"github.com/nikolalohinski/gonja/v2/nodes"
)

// Renderer is a node visitor in charge of rendering
type Renderer struct {
	Config      *config.Config
	Environment *Environment
	Loader      loaders.Loader
	Template    *Template
	RootNode    *nodes.Template
	Output      io.Writer
}

// NewRenderer initializes a new renderer
func NewRenderer(environment *Environment, wr io.Writer, config *config.Config, loader loaders.Loader, template *Template) *Renderer {
	r := &Renderer{
		Config:      config.Inherit(),
		Environment: environment,
		Template:    template,
		RootNode:    template.root,
		Output:      wr,
		Loader:      loader,
	}
	r.Environment.Context.Set("self", Self(r))
	return r
}

// Inherit creates a new sub renderer
func (r *Renderer) Inherit() *Renderer {
	sub := &Renderer{
		Config: r.Config.Inherit(),
		Environment: &Environment{
			Context:           r.Environment.Context.Inherit(),
			Tests:             r.Environment.Tests,
			Filters:           r.Environment.Filters,
			ControlStructures: r.Environment.ControlStructures,
			Methods:           r.Environment.Methods,
			Interrupt:         r.Environment.Interrupt,
			Hooks:             r.Environment.Hooks,
		},
		Template: r.Template,
		RootNode: r.RootNode,
		Output:   r.Output,
		Loader:   r.Loader,
	}
	return sub
}

// Visit implements the nodes.Visitor interface
func (r *Renderer) Visit(node nodes.Node) (nodes.Visitor, error) {
	if err := r.Environment.interrupted(); err != nil {
		return nil, err
	}
	switch n := node.(type) {
	case *nodes.Comment:
		return nil, nil
	case *nodes.Data:
		output := n.Data.Val
		if n.RemoveFirstLineReturn {
			output = strings.TrimPrefix(output, "\r\n")
			output = strings.TrimPrefix(output, "\n")
		}
		if n.Trim.Left {
			output = strings.TrimLeft(output, " \r\n\t")
		}
		if n.Trim.Right {
			output = strings.TrimRight(output, " \r\n\t")
		}
		if n.RemoveTrailingWhiteSpaceFromLastLine {
			lines := strings.Split(output, "\n")
			lines = append(lines[0:len(lines)-1], strings.TrimRight(lines[len(lines)-1], " \n\t\r"))
			output = strings.Join(lines, "\n")
		}
		_, err := io.WriteString(r.Output, output)
		return nil, err
	case *nodes.Output:
		value, constantSafe, err := r.output(n)
		if err != nil {
			return nil, err
		}
		if value.IsError() {
			return nil, errors.Wrapf(value, `Unable to render expression at line %d: %s`, n.Expression.Position().Line, n.Expression)
		}
		if r.Config.AutoEscape && value.IsString() && !value.Safe && !constantSafe {
			_, err = io.WriteString(r.Output, value.Escaped())
		} else {
			_, err = io.WriteString(r.Output, value.String())
		}
		return nil, err
	case *nodes.ControlStructureBlock:
		controlStructure, ok := n.ControlStructure.(ControlStructure)
		if ok {
			if err := controlStructure.Execute(r, n); err != nil {
				return nil, errors.Wrapf(err, `Unable to execute controlStructure at line %d: %s`, n.ControlStructure.Position().Line, n.ControlStructure)
			}
		}
		return nil, nil
	default:
		return r, nil
	}
}

// output evaluates an output's expression and finalizes it: the value, whether it
// is a constant Markup (printed as it is, whatever finalize makes of it:
// PaV), and finalize's error. Jinja's compiler folds an output's constant
// expression whatever its repr and lets finalize judge it; one finalize
// refuses (PaV's refuses undefined) or that fails runs at render time
// (Evaluator.Eval), where a constant slice of what is not a sequence
// raises.
func (r *Renderer) output(n *nodes.Output) (*Value, bool, error) {
	finalize := func(v *Value) (*Value, error) {
		if h := r.Environment.Hooks; h != nil && h.Finalize != nil && !v.IsError() {
			if v = h.Finalize(v, n.Start); v.IsError() {
				return v, r.Evaluator().Raise(v.Unwrap()).Unwrap()
			}
		}
		return v, nil
	}
	e := r.Evaluator()
	if jinjaConstant(n.Expression) {
		e.folding = true
		value := e.eval(n.Expression)
		e.folding = false
		if final, err := finalize(value); err == nil && !final.IsError() {
			return final, r.Config.AutoEscape && value.Safe, nil
		}
	}
	value, err := finalize(e.Eval(n.Expression))
	return value, false, err
}

// ExecuteWrapper wraps the nodes.Wrapper execution logic
func (r *Renderer) ExecuteWrapper(wrapper *nodes.Wrapper) error {
	return nodes.Walk(r.Inherit(), wrapper)
}

// ExecuteIfWrapper wraps the nodes.Wrapper execution logic and updates the parent context
func (r *Renderer) ExecuteIfWrapper(wrapper *nodes.Wrapper) error {
	sub := r.Inherit()
	if err := nodes.Walk(sub, wrapper); err != nil {
		return err
	}
	r.Environment.Context.Update(sub.Environment.Context)
	return nil
}

func (r *Renderer) Execute() error {
	// Determine the parent to be executed (for template inheritance)
	root := r.RootNode
	for root.Parent != nil {
		root = root.Parent
	}

	if err := nodes.Walk(r, root); err != nil {
		return err
	}
	// Some errors of expressions are ignored (a list's items): an
	// interrupted rendering still fails.
	return r.Environment.interrupted()
}

func (r *Renderer) Evaluator() *Evaluator {
	return &Evaluator{
		Environment: r.Environment,
		Config:      r.Config,
		Loader:      r.Template.parser.Loader,
	}
}

// Eval evaluates the expression of a statement.
func (r *Renderer) Eval(node nodes.Expression) *Value {
	return r.Evaluator().Eval(node)
}
