package exec

import (
	"fmt"
	"strings"

	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/pkg/errors"
)

// Macro is the type macro functions must fulfill
type Macro func(params *VarArgs) *Value

type MacroSet map[string]Macro

// Exists returns true if the given filter is already registered
func (ms MacroSet) Exists(name string) bool {
	_, existing := ms[name]
	return existing
}

// Register registers a new filter. If there's already a filter with the same
// name, Register will panic. You usually want to call this
// function in the filter's init() function:
// http://golang.org/doc/effective_go.html#init
func (ms *MacroSet) Register(name string, fn Macro) error {
	if ms.Exists(name) {
		return errors.Errorf("filter with name '%s' is already registered", name)
	}
	(*ms)[name] = fn
	return nil
}

// Replace replaces an already registered filter with a new implementation. Use this
// function with caution since it allows you to change existing filter behaviour.
func (ms *MacroSet) Replace(name string, fn Macro) error {
	if !ms.Exists(name) {
		return errors.Errorf("filter with name '%s' does not exist (therefore cannot be overridden)", name)
	}
	(*ms)[name] = fn
	return nil
}

func MacroNodeToFunc(node *nodes.Macro, r *Renderer) (Macro, error) {
	return func(params *VarArgs) *Value {
		var out strings.Builder
		sub := r.Inherit()
		sub.Output = &out

		// --- Bind positional arguments to named macro params (up to len(Kwargs)) ---
		macroArguments := make([]*Pair, len(node.Kwargs))
		positionalCount := len(params.Args)
		boundPositional := positionalCount
		if boundPositional > len(node.Kwargs) {
			boundPositional = len(node.Kwargs)
		}

		for i := 0; i < boundPositional; i++ {
			key := r.Eval(node.Kwargs[i].Key)
			if key.IsError() {
				return AsValue(fmt.Errorf(
					"macro '%s' failed to evaluate positional argument named '%s': %s",
					node.Name, node.Kwargs[i].Key.String(), key,
				))
			}
			macroArguments[i] = &Pair{
				Value: params.Args[i],
				Key:   key,
			}
		}

		// --- Collect overflow positional args into *args (if declared) ---
		var varArgsList ValuesList // PaV: *Value items keep undefined and Markup
		if positionalCount > len(node.Kwargs) {
			if node.VarArgsName == "" {
				return AsValue(fmt.Errorf(
					"macro '%s' received %d arguments but expected only %d",
					node.Name, positionalCount, len(node.Kwargs),
				))
			}
			for i := len(node.Kwargs); i < positionalCount; i++ {
				varArgsList = append(varArgsList, params.Args[i])
			}
		}

		// --- Bind keyword args, overflowing to **kwargs if declared ---
		extraKwargs := map[string]any{}
	kwargs:
		for keyword, argument := range params.KwArgs {
			for i, validArgument := range node.Kwargs {
				validKeyword := r.Eval(validArgument.Key)
				if validKeyword.IsError() {
					return AsValue(fmt.Errorf(
						"macro '%s' failed to evaluate argument named '%s': %s",
						node.Name, node.Kwargs[i].Key.String(), validKeyword,
					))
				}
				if validKeyword.String() == keyword {
					if macroArguments[i] != nil {
						return AsValue(fmt.Errorf(
							"macro '%s' received '%s' argument twice", node.Name, keyword,
						))
					}
					macroArguments[i] = &Pair{
						Value: argument,
						Key:   validKeyword,
					}
					continue kwargs
				}
			}
			// Unmatched keyword arg: route to **kwargs if defined, else error.
			if node.KwArgsName != "" {
				extraKwargs[keyword] = argument
			} else {
				return AsValue(fmt.Errorf(
					"macro '%s' takes no keyword argument '%s'", node.Name, keyword,
				))
			}
		}

		// --- Fill defaults for any params still unbound, in order. As in
		// Jinja (PaV), a default sees every argument passed and the
		// defaults before it (b=a ~ '!'); a parameter not bound yet is
		// undefined there, never a name of the enclosing scope. ---
		keys := make([]*Value, len(node.Kwargs))
		for i, defaultArgument := range node.Kwargs {
			if macroArguments[i] != nil {
				sub.Environment.Context.Set(macroArguments[i].Key.String(), macroArguments[i].Value)
				continue
			}
			key := r.Eval(defaultArgument.Key)
			if key.IsError() {
				return AsValue(fmt.Errorf(
					"macro '%s' failed to evaluate default argument key named '%s': %s",
					node.Name, defaultArgument.Key.String(), key,
				))
			}
			keys[i] = key
			sub.Environment.Context.Set(key.String(), Undefined(fmt.Sprintf("'%s' is undefined", key.String())))
		}
		for i, defaultArgument := range node.Kwargs {
			if macroArguments[i] == nil {
				key := keys[i]
				value := sub.Eval(defaultArgument.Value)
				if value.IsError() {
					return AsValue(fmt.Errorf(
						"macro '%s' failed to evaluate '%s': %s",
						node.Name, defaultArgument.Value.String(), value,
					))
				}
				macroArguments[i] = &Pair{
					Key:   key,
					Value: value,
				}
				sub.Environment.Context.Set(key.String(), value)
			}
		}

		// --- Inject bindings into the macro's context ---
		for _, arg := range macroArguments {
			sub.Environment.Context.Set(arg.Key.String(), arg.Value)
		}

		// Inject *args
		if node.VarArgsName != "" {
			if varArgsList == nil {
				varArgsList = ValuesList{}
			}
			sub.Environment.Context.Set(node.VarArgsName, varArgsList)
		}

		// Inject **kwargs
		if node.KwArgsName != "" {
			sub.Environment.Context.Set(node.KwArgsName, extraKwargs)
		}

		switch {
		case params.caller == nil:
		case node.TakesCaller:
			sub.Environment.Context.Set("caller", params.caller)
		case node.KwArgsName != "": // Jinja passes it in kwargs
			extraKwargs["caller"] = params.caller
		default:
			return AsValue(fmt.Errorf("macro '%s' was invoked with two values for the special caller argument. This is most likely a bug.", node.Name))
		}

		err := sub.Enter(func() error { return sub.ExecuteWrapper(node.Wrapper) })
		if err != nil {
			return AsValue(errors.Wrapf(err, `Unable to execute macro '%s'`, node.Name))
		}
		// Markup only where Jinja's would be: in an autoescape block (PaV)
		if sub.Config.AutoEscape {
			return AsSafeValue(out.String())
		}
		return AsValue(out.String())
	}, nil
}

// CallWithCaller calls the macro that node calls, with caller as `caller`
// in its body: a {% call %} block (PaV; upstream passed it through the
// macro's defining context, which nested call blocks overwrote).
func (e *Evaluator) CallWithCaller(node *nodes.Call, caller Macro) *Value {
	fn := e.Eval(node.Func)
	if fn.IsError() {
		return fn
	}
	macro, ok := fn.Interface().(Macro)
	if !ok {
		return AsValue(errors.Errorf(`%s is not a macro`, node.Func))
	}
	params, err := e.evalVarArgs(node)
	if err != nil {
		return AsValue(err)
	}
	args := params[0].Interface().(*VarArgs)
	args.caller = caller
	return macro(args)
}
