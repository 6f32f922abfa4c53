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
		// Jinja folds an output's constant whatever its repr; finalize
		// then decides (PaV's refuses undefined).
		value := r.Evaluator().Eval(n.Expression)
		// a constant Markup is printed as it is, whatever finalize makes of it (PaV)
		constantSafe := r.Config.AutoEscape && value.Safe && jinjaConstant(n.Expression)
		if h := r.Environment.Hooks; h != nil && h.Finalize != nil && !value.IsError() {
			value = h.Finalize(value, n.Start)
			if value.IsError() {
				return nil, r.Evaluator().Raise(value.Unwrap()).Unwrap()
			}
		}
		if value.IsError() {
			return nil, errors.Wrapf(value, `Unable to render expression at line %d: %s`, n.Expression.Position().Line, n.Expression)
		}
		var err error
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

// Eval evaluates the expression of a statement (PaV: with Jinja's
// constant folding). Jinja folds a statement's constant expression at
// compile time only if its value has a safe repr; one holding an undefined
// (a constant slice of what is not a sequence folds to undefined) runs at
// render time instead, where that slice raises Python's TypeError.
func (r *Renderer) Eval(node nodes.Expression) *Value {
	e := r.Evaluator()
	v := e.Eval(node)
	if !v.IsError() && jinjaConstant(node) && holdsUndefined(v, maxNesting) {
		e.unfolded = true
		v = e.Eval(node)
	}
	return v
}

// maxNesting bounds holdsUndefined's walk (a constant's literals nest a
// few levels).
const maxNesting = 100

// holdsUndefined: v is undefined or a container holding one (Python's
// has_safe_repr is false for it).
func holdsUndefined(v *Value, depth int) bool {
	if v.IsUndefined() {
		return true
	}
	if depth == 0 || !(v.IsList() || v.IsDict()) {
		return false
	}
	found := false
	v.Iterate(func(_, _ int, key, value *Value) bool {
		found = holdsUndefined(key, depth-1) || v.IsDict() && holdsUndefined(value, depth-1)
		return !found
	}, func() {})
	return found
}
