package jinja

import (
	"errors"
	"fmt"
	"sort"

	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/exec"
)

// Limits that keep a hostile or mistaken template from hanging or crashing
// the process evaluating it. Jinja's sandbox caps range() at 100000 items;
// the rest have no Jinja counterpart (Python's recursion limit aside) and are
// far above what a PavProvisioner field needs.
const (
	maxRange       = 100000  // items of one range(), as Jinja's sandbox
	maxSteps       = 1000000 // loop iterations plus macro calls per render
	maxDepth       = 100     // nested macro calls and loop bodies (Jinja: ~150 macro levels)
	maxOutputBytes = 4 << 20 // rendered bytes, and size of any string or list built by * or filters
	maxWidth       = 1 << 16 // width arguments of center, indent, ljust, ...
)

// step filters run at the start and end of every loop iteration and macro call.
func filterEnter(e *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value {
	s := stateOf(e)
	s.steps++
	s.depth++
	switch {
	case s.steps > maxSteps:
		return fatal(e, nil, fmt.Sprintf("template runs more than %d loop iterations and macro calls", maxSteps))
	case s.depth > maxDepth:
		return fatal(e, nil, fmt.Sprintf("macro calls and loops nested deeper than %d levels (infinite recursion?)", maxDepth))
	}
	return in
}

func filterExit(e *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value {
	stateOf(e).depth--
	return in
}

// rangeFunction is Jinja's range() as a list, limited like Jinja's sandbox.
// (gonja's streams a channel from a goroutine that leaks when the loop stops early.)
func rangeFunction(e *exec.Evaluator, params *exec.VarArgs) (interface{}, error) {
	if len(params.KwArgs) > 0 {
		return nil, fatalErr(e, "range() takes no keyword arguments")
	}
	var n [3]int64
	for i, a := range params.Args {
		if i >= 3 || !isInt(a) {
			return nil, fatalErr(e, "range() takes 1 to 3 integer arguments")
		}
		n[i] = asInt(a)
	}
	start, stop, step := int64(0), int64(0), int64(1)
	switch len(params.Args) {
	case 1:
		stop = n[0]
	case 2:
		start, stop = n[0], n[1]
	case 3:
		start, stop, step = n[0], n[1], n[2]
	default:
		return nil, fatalErr(e, "range() takes 1 to 3 integer arguments")
	}
	if step == 0 {
		return nil, fatalErr(e, "range() arg 3 must not be zero")
	}
	count := int64(0)
	if step > 0 && start < stop {
		count = (stop-start-1)/step + 1
	} else if step < 0 && start > stop {
		count = (start-stop-1)/(-step) + 1
	}
	if count < 0 || count > maxRange {
		return nil, fatalErr(e, fmt.Sprintf("range too big: the sandbox blocks ranges larger than %d items", maxRange))
	}
	out := make([]interface{}, count)
	for i := range out {
		out[i] = start + int64(i)*step
	}
	return out, nil
}

func fatalErr(e *exec.Evaluator, msg string) error {
	err := &Error{Message: msg}
	stateOf(e).fail(err)
	return err
}

// lipsumFunction is gonja's lipsum with bounded arguments.
func lipsumFunction(e *exec.Evaluator, params *exec.VarArgs) *exec.Value {
	for _, a := range append(append([]*exec.Value{}, params.Args...), mapValues(params.KwArgs)...) {
		if isInt(a) && (asInt(a) > 1000 || asInt(a) < 0) {
			return fatal(e, nil, "lipsum(): arguments too large")
		}
	}
	v, ok := builtins.GlobalFunctions.Get("lipsum")
	if !ok {
		return fatal(e, nil, "lipsum() is not available")
	}
	return v.(func(*exec.Evaluator, *exec.VarArgs) *exec.Value)(e, params)
}

// cyclerFunction is gonja's cycler, which panics without items (Jinja
// raises an error).
func cyclerFunction(e *exec.Evaluator, params *exec.VarArgs) *exec.Value {
	if len(params.Args) == 0 {
		return fatal(e, nil, "cycler(): at least one item has to be provided")
	}
	v, ok := builtins.GlobalFunctions.Get("cycler")
	if !ok {
		return fatal(e, nil, "cycler() is not available")
	}
	return v.(func(*exec.Evaluator, *exec.VarArgs) *exec.Value)(e, params)
}

func mapValues(m map[string]*exec.Value) []*exec.Value {
	out := make([]*exec.Value, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// boundedFilter rejects integer arguments above maxWidth (widths, counts)
// before calling a gonja filter that would allocate accordingly.
func boundedFilter(name string, f exec.FilterFunction) exec.FilterFunction {
	return func(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
		for _, a := range append(append([]*exec.Value{}, params.Args...), mapValues(params.KwArgs)...) {
			if isInt(a) && (asInt(a) > maxWidth || asInt(a) < -maxWidth) {
				return fatal(e, nil, fmt.Sprintf("filter %s: argument %d too large", name, asInt(a)))
			}
		}
		return f(e, in, params)
	}
}

// limitedWriter fails once more than maxOutputBytes have been written.
type limitedWriter struct {
	buf   []byte
	state *renderState
}

var errTooLong = errors.New("output too long")

func (w *limitedWriter) Write(p []byte) (int, error) {
	if len(w.buf)+len(p) > maxOutputBytes {
		w.state.fail(&Error{Message: fmt.Sprintf("template output longer than %d bytes", maxOutputBytes)})
		return 0, errTooLong
	}
	w.buf = append(w.buf, p...)
	return len(p), nil
}

// methods is gonja's set of Python methods as ImmutableSandboxedEnvironment
// allows them: methods that modify a list or dict are unsafe (PaV's data is
// shared by every template of a provisioner), padding widths are bounded.
var methods = func() exec.Methods {
	m := builtins.Methods
	str := map[string]exec.Method[string]{}
	for _, name := range []string{"capitalize", "capwords", "casefold", "center", "count", "encode", "endswith",
		"expandtabs", "find", "format", "format_map", "index", "isalnum", "isalpha", "isascii", "isdecimal", "isdigit",
		"islower", "isnumeric", "isprintable", "isspace", "istitle", "isupper", "join", "ljust", "lower", "lstrip",
		"partition", "removeprefix", "removesuffix", "replace", "rfind", "rindex", "rjust", "rpartition", "rsplit",
		"rstrip", "split", "splitlines", "startswith", "strip", "swapcase", "title", "upper", "zfill"} {
		if f, ok := strMethods[name]; ok {
			str[name] = f
		} else if f, ok := m.Str.Get(name); ok {
			str[name] = boundedMethod(name, f)
		}
	}
	dict := map[string]exec.Method[map[string]any]{}
	for _, name := range []string{"copy", "get", "items", "keys", "values"} {
		if f, ok := m.Dict.Get(name); ok {
			dict[name] = f
		}
	}
	for _, name := range []string{"clear", "pop", "popitem", "setdefault", "update"} {
		dict[name] = unsafeMethod[map[string]any]("dict", name)
	}
	// gonja's keys/values/items sort the keys; Python keeps insertion order.
	dict["keys"] = dictView(func(_ map[string]any, k string) any { return k })
	dict["values"] = dictView(func(self map[string]any, k string) any { return self[k] })
	dict["items"] = dictView(func(self map[string]any, k string) any { return []any{k, self[k]} })
	list := map[string]exec.Method[[]any]{}
	for _, name := range []string{"copy", "count", "index"} {
		if f, ok := m.List.Get(name); ok {
			list[name] = f
		}
	}
	for _, name := range []string{"append", "clear", "extend", "insert", "pop", "remove", "reverse", "sort"} {
		list[name] = unsafeMethod[[]any]("list", name)
	}
	return exec.Methods{
		Bool:  m.Bool,
		Int:   m.Int,
		Float: m.Float,
		Str:   exec.NewMethodSet(str),
		Dict:  exec.NewMethodSet(dict),
		List:  exec.NewMethodSet(list),
	}
}()

// dictView is a dict method returning one element per key, in Python's
// order (see pyKeys).
func dictView(elem func(self map[string]any, key string) any) exec.Method[map[string]any] {
	return func(self map[string]any, v *exec.Value, args *exec.VarArgs) (any, error) {
		if err := args.Take(); err != nil {
			return nil, exec.ErrInvalidCall(err)
		}
		keys := pyKeys(self, v)
		out := make([]any, len(keys))
		for i, k := range keys {
			out[i] = elem(self, k)
		}
		return out, nil
	}
}

// pyKeys lists a dict's keys in the order Python would: insertion order for a
// dict built by the template (a literal), sorted for the objects PaV passes
// in, whose maps the API server serializes with sorted keys.
func pyKeys(self map[string]any, v *exec.Value) []string {
	d, ok := dictLiteral(v)
	if !ok {
		keys := make([]string, 0, len(self))
		for k := range self {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return keys
	}
	seen := map[string]bool{}
	keys := make([]string, 0, len(d.Pairs))
	for _, p := range d.Pairs {
		if k := p.Key.String(); !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	return keys
}

// dictLiteral returns the ordered pairs of a dict a template built.
func dictLiteral(v *exec.Value) (*exec.Dict, bool) {
	switch x := v.Interface().(type) {
	case exec.Dict:
		return &x, true
	case *exec.Dict:
		return x, x != nil
	}
	return nil, false
}

func unsafeMethod[T any](typ, name string) exec.Method[T] {
	return func(T, *exec.Value, *exec.VarArgs) (any, error) {
		return nil, fmt.Errorf("access to attribute '%s' of '%s' object is unsafe", name, typ)
	}
}

func boundedMethod(name string, f exec.Method[string]) exec.Method[string] {
	return func(self string, v *exec.Value, args *exec.VarArgs) (any, error) {
		for _, a := range append(append([]*exec.Value{}, args.Args...), mapValues(args.KwArgs)...) {
			if isInt(a) && asInt(a) > maxWidth {
				return nil, fmt.Errorf("%s(): argument %d too large", name, asInt(a))
			}
		}
		return f(self, v, args)
	}
}
