package jinja

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/tokens"
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
	maxListItems   = 1 << 18 // items of a list built by + or *
	maxWalkItems   = 1 << 20 // items one walk over a value visits, a shared one each time
	// maxRenderTime bounds a render's wall-clock time, checked before every
	// statement, expression and filter call (gonja's Interrupt) and output
	// write: the other limits bound each step, this bounds their sum on a
	// loaded machine.
	maxRenderTime = 500 * time.Millisecond
	// maxCompileTime bounds a compile's wall-clock time, checked while
	// gonja lexes the template and after each later pass; maxTokens bounds
	// its work, this bounds it on a loaded machine.
	maxCompileTime = 500 * time.Millisecond
	// maxConcurrentWork bounds the compiles and renders running at once in
	// a process.
	maxConcurrentWork = 4
)

// A value printed as text (str, repr, pprint, ~, format) is bounded as any
// string built is, and a walk over a value (==, unique's keys, a mapping's
// conversion) by maxWalkItems: its items may be shared, so its text and its
// items can be far more than what built it.
func init() {
	exec.ReprBytes = maxOutputBytes
	exec.ValueItems = maxWalkItems
	exec.GoAttributes = false // templates see JSON-like data: attributes are Python's
}

// compileTimeLimit is maxCompileTime, but for tests.
var compileTimeLimit = maxCompileTime

// ErrDeadline is the cause of the error of a compile or render that ran out
// of time: a failure that says nothing about the template, which another
// try may compile.
var ErrDeadline = errors.New("deadline exceeded")

func compileOvertime() error {
	return &Error{Message: fmt.Sprintf("compiling the template took longer than %v", maxCompileTime), cause: ErrDeadline}
}

// overtime fails the render once its deadline has passed.
func overtime(s *renderState) bool {
	if s.deadline.IsZero() || time.Now().Before(s.deadline) {
		return false
	}
	s.fail(&Error{Message: fmt.Sprintf("template evaluation took longer than %v", maxRenderTime), cause: ErrDeadline})
	return true
}

// enter and exit run around every loop iteration's and macro call's body.
func (s *renderState) enter() error {
	s.steps++
	s.depth++
	switch {
	case s.steps > maxSteps:
		s.fail(&Error{Message: fmt.Sprintf("template runs more than %d loop iterations and macro calls", maxSteps)})
	case s.depth > maxDepth:
		s.fail(&Error{Message: fmt.Sprintf("macro calls and loops nested deeper than %d levels (infinite recursion?)", maxDepth)})
	default:
		overtime(s)
	}
	return s.fatal
}

func (s *renderState) exit() { s.depth-- }

// rangeFunction is Jinja's range() as a list, limited like Jinja's sandbox.
// (gonja's streams a channel from a goroutine that leaks when the loop stops early.)
func rangeFunction(e *exec.Evaluator, params *exec.VarArgs) (interface{}, error) {
	if len(params.KwArgs) > 0 {
		return nil, fatalErr(e, "range() takes no keyword arguments")
	}
	var n [3]int64
	for i, a := range params.Args {
		if i >= 3 || !exec.IsInt(a) {
			return nil, fatalErr(e, "range() takes 1 to 3 integer arguments")
		}
		n[i] = exec.AsInt(a)
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
		return nil, fatalErr(e, "range too big: the sandbox blocks ranges larger than %d items", maxRange)
	}
	out := make([]interface{}, count)
	for i := range out {
		out[i] = start + int64(i)*step
	}
	return out, nil
}

// lipsumFunction is gonja's lipsum with bounded arguments.
func lipsumFunction(e *exec.Evaluator, params *exec.VarArgs) *exec.Value {
	for _, a := range append(append([]*exec.Value{}, params.Args...), mapValues(params.KwArgs)...) {
		if exec.IsInt(a) && (exec.AsInt(a) > 1000 || exec.AsInt(a) < 0) {
			return fatal(e, "lipsum(): arguments too large")
		}
	}
	v, ok := builtins.GlobalFunctions.Get("lipsum")
	if !ok {
		return fatal(e, "lipsum() is not available")
	}
	return v.(func(*exec.Evaluator, *exec.VarArgs) *exec.Value)(e, params)
}

// cyclerFunction is gonja's cycler, which panics without items (Jinja
// raises an error).
func cyclerFunction(e *exec.Evaluator, params *exec.VarArgs) *exec.Value {
	if len(params.Args) == 0 {
		return fatal(e, "cycler(): at least one item has to be provided")
	}
	v, ok := builtins.GlobalFunctions.Get("cycler")
	if !ok {
		return fatal(e, "cycler() is not available")
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
// before calling a gonja filter that would allocate accordingly, and
// results that would exceed maxOutputBytes if the width were applied to
// every line of the input (indent(60000) of 100000 lines is 6 GB).
func boundedFilter(name string, f exec.FilterFunction) exec.FilterFunction {
	return func(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
		widest := int64(0)
		for _, a := range append(append([]*exec.Value{}, params.Args...), mapValues(params.KwArgs)...) {
			if exec.IsInt(a) && (exec.AsInt(a) > maxWidth || exec.AsInt(a) < -maxWidth) {
				return fatal(e, "filter %s: argument %d too large", name, exec.AsInt(a))
			}
			if exec.IsInt(a) {
				widest = max(widest, exec.AsInt(a))
			}
		}
		if in.IsString() {
			str := in.String()
			if int64(len(str))+widest*int64(strings.Count(str, "\n")+1) > maxOutputBytes {
				return fatal(e, "filter %s: result would be longer than %d bytes", name, maxOutputBytes)
			}
		}
		return f(e, in, params)
	}
}

// joinFilter is gonja's join, refused when the result would be longer than
// maxOutputBytes (100000 items joined by a 1000-byte separator is 100 MB).
func joinFilter(f exec.FilterFunction) exec.FilterFunction {
	return func(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
		if in.IsList() && in.Len() > 0 {
			size := int64(0)
			for _, a := range params.Args {
				if a.IsString() {
					size += int64(len(a.String())) * int64(in.Len()-1)
				}
			}
			for i := 0; i < in.Len() && size <= maxOutputBytes; i++ {
				if item := in.Index(i); item.IsString() {
					size += int64(len(item.String()))
				} else {
					size += 24 // a number, a bool, a short repr; bounded by the output check after
				}
			}
			if size > maxOutputBytes {
				return fatal(e, "filter join: result would be longer than %d bytes", maxOutputBytes)
			}
		}
		return f(e, in, params)
	}
}

// formatWidths adds up the widths and precisions in the replacement fields
// of a str.format() format string ("{:>999999999}", "{:5.99999999f}").
func formatWidths(format string) int64 {
	total := int64(0)
	for _, m := range formatSpecWidth.FindAllStringSubmatch(format, -1) {
		for _, digits := range specNumber.FindAllString(m[1], -1) {
			n, err := strconv.ParseInt(digits, 10, 64)
			if err != nil || total+n > math.MaxInt32 {
				return math.MaxInt64
			}
			total += n
		}
	}
	return total
}

// nestedFormatField finds a replacement field inside another ("{:>{w}}"),
// or a literal "{{", which is taken for one.
var nestedFormatField = regexp.MustCompile(`\{[^{}]*\{`)

// formatSpecWidth finds a field's spec, in which each number (width,
// precision) counts.
var formatSpecWidth = regexp.MustCompile(`\{[^{}]*:([^{}]*)`)

var specNumber = regexp.MustCompile(`[0-9]+`)

// limitedWriter fails once more than maxOutputBytes have been written.
type limitedWriter struct {
	buf   []byte
	state *renderState
}

var errTooLong = errors.New("output too long")

func (w *limitedWriter) Write(p []byte) (int, error) {
	if overtime(w.state) {
		return 0, w.state.fatal
	}
	if len(w.buf)+len(p) > maxOutputBytes {
		w.state.fail(&Error{Message: fmt.Sprintf("template output longer than %d bytes", maxOutputBytes)})
		return 0, errTooLong
	}
	w.buf = append(w.buf, p...)
	return len(p), nil
}

// methods is gonja's set of Python methods as ImmutableSandboxedEnvironment
// allows them: methods that modify a list or dict are unsafe (PaV's data is
// shared by every template of a provisioner), widths and results bounded.
var methods = func() exec.Methods {
	m := builtins.Methods
	str := map[string]exec.Method[string]{}
	for _, name := range []string{"capitalize", "casefold", "center", "count", "encode", "endswith",
		"expandtabs", "find", "format", "format_map", "index", "isalnum", "isalpha", "isascii", "isdecimal", "isdigit",
		"islower", "isnumeric", "isprintable", "isspace", "istitle", "isupper", "join", "ljust", "lower", "lstrip",
		"partition", "removeprefix", "removesuffix", "replace", "rfind", "rindex", "rjust", "rpartition", "rsplit",
		"rstrip", "split", "splitlines", "startswith", "strip", "swapcase", "title", "translate", "upper", "zfill"} {
		if f, ok := m.Str.Get(name); ok {
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

func unsafeMethod[T any](typ, name string) exec.Method[T] {
	return func(T, *exec.Value, *exec.VarArgs) (any, error) {
		return nil, fmt.Errorf("access to attribute '%s' of '%s' object is unsafe", name, typ)
	}
}

// methodGrowth bounds what a str method whose result can be far longer
// than s and its arguments adds to s: replace(old, new) each old made new,
// expandtabs(tabsize) each tab made tabsize spaces, join(items) s between
// each two items.
func methodGrowth(name, s string, args *exec.VarArgs) int64 {
	switch {
	case name == "replace" && len(args.Args) >= 2:
		old, repl := args.Args[0], args.Args[1]
		if !old.IsString() || !repl.IsString() {
			return 0
		}
		return int64(strings.Count(s, old.String())) * int64(len(repl.String()))
	case name == "expandtabs":
		size := int64(8)
		if len(args.Args) > 0 && exec.IsInt(args.Args[0]) {
			size = exec.AsInt(args.Args[0])
		} else if v, ok := args.KwArgs["tabsize"]; ok && exec.IsInt(v) {
			size = exec.AsInt(v)
		}
		return int64(strings.Count(s, "\t")) * max(size, 0)
	case name == "join" && len(args.Args) == 1:
		var n int64
		args.Args[0].Iterate(func(_, _ int, item, _ *exec.Value) bool {
			n += int64(len(s))
			if item.IsString() { // another item fails the join
				n += int64(len(item.String()))
			}
			return n <= maxOutputBytes
		}, func() {})
		return n
	}
	return 0
}

// methodItems bounds how many items a str method that makes a list makes:
// split and rsplit one more than their separators (or words), at most
// maxsplit + 1; splitlines one more than its line ends. 0 for the others.
func methodItems(name, s string, args *exec.VarArgs) int64 {
	switch name {
	case "split", "rsplit":
		var n int64
		if len(args.Args) > 0 && args.Args[0].IsString() && args.Args[0].String() != "" {
			n = int64(strings.Count(s, args.Args[0].String())) + 1
		} else {
			n = countWords(s)
		}
		maxsplit := args.KwArgs["maxsplit"]
		if len(args.Args) > 1 {
			maxsplit = args.Args[1]
		}
		if maxsplit != nil && exec.IsInt(maxsplit) && exec.AsInt(maxsplit) >= 0 {
			n = min(n, exec.AsInt(maxsplit)+1)
		}
		return n
	case "splitlines":
		return countLineEnds(s) + 1
	}
	return 0
}

// countWords counts the runs of non-space in s: split()'s items.
func countWords(s string) int64 {
	var n int64
	inWord := false
	for _, r := range s {
		if !unicode.IsSpace(r) && !inWord {
			n++
		}
		inWord = !unicode.IsSpace(r)
	}
	return n
}

// countLineEnds counts what splitlines() ends a line at (\r\n twice: a bound).
func countLineEnds(s string) int64 {
	var n int64
	for _, r := range s {
		if strings.ContainsRune("\n\r\v\f\x1c\x1d\x1e\u0085\u2028\u2029", r) {
			n++
		}
	}
	return n
}

func boundedMethod(name string, f exec.Method[string]) exec.Method[string] {
	return func(self string, v *exec.Value, args *exec.VarArgs) (any, error) {
		if len(self) > maxListItems && methodItems(name, self, args) > maxListItems {
			return nil, fmt.Errorf("%s(): more than %d items", name, maxListItems)
		}
		if (name == "format" || name == "format_map") && int64(len(self))+formatWidths(self) > maxOutputBytes {
			return nil, fmt.Errorf("%s(): field widths too large", name)
		}
		if int64(len(self))+methodGrowth(name, self, args) > maxOutputBytes {
			return nil, fmt.Errorf("%s(): result too large", name)
		}
		if (name == "format" || name == "format_map") && !nestedFormatField.MatchString(self) {
			// its arguments are values, not widths (formatWidths bounded
			// those), unless a field's spec takes its width from one
			return f(self, v, args)
		}
		for _, a := range append(append([]*exec.Value{}, args.Args...), mapValues(args.KwArgs)...) {
			if exec.IsInt(a) && exec.AsInt(a) > maxWidth {
				return nil, fmt.Errorf("%s(): argument %d too large", name, exec.AsInt(a))
			}
		}
		return f(self, v, args)
	}
}

// maxNesting bounds brackets nested inside one tag, and blocks nested in a
// template. gonja's parser recurses once per level: tens of thousands of
// levels overflow the Go stack, a fatal error no recover catches. Python's
// own parser refuses 200 nested parentheses; PaV's fields need a handful.
const maxNesting = 100

// maxTokens bounds a template's tokens, and so its syntax tree (a few nodes
// per token), what compiling it allocates, and how deep the walks over a
// left-deep chain (1 + 1 + ...) recurse. The examples' largest template has
// under 100 tokens; a whole pod written as one template a few thousand.
const maxTokens = 10000

// tokenCheck is the check of every token of a template as gonja's lexer
// produces it (tokens.LexChecked), before the parser sees any: at most
// maxTokens tokens, brackets and blocks nested at most maxNesting deep, and
// the compile's deadline.
type tokenCheck struct {
	deadline time.Time
	count    int
	brackets int // open brackets in the current tag
	blocks   int // open blocks
	// The statement tag being read: its first name, and whether an `=`
	// outside brackets followed it (a set with `=` opens no block).
	inTag, assigns bool
	word           string
}

func (c *tokenCheck) check(tok *tokens.Token) error {
	if tok.Type == tokens.Whitespace {
		return nil
	}
	c.count++
	if c.count > maxTokens {
		return &Error{Line: tok.Line, Column: tok.Col, Message: fmt.Sprintf("template has more than %d tokens", maxTokens)}
	}
	if c.count%256 == 0 && time.Now().After(c.deadline) {
		return compileOvertime()
	}
	switch tok.Type {
	case tokens.LeftParenthesis, tokens.LeftBracket, tokens.LeftBrace:
		c.brackets++
		if c.brackets > maxNesting {
			return &Error{Line: tok.Line, Column: tok.Col, Message: fmt.Sprintf("brackets nested deeper than %d levels", maxNesting)}
		}
	case tokens.RightParenthesis, tokens.RightBracket, tokens.RightBrace:
		c.brackets = max(0, c.brackets-1)
	case tokens.VariableBegin, tokens.VariableEnd:
		c.brackets = 0
	case tokens.BlockBegin:
		c.inTag, c.assigns, c.word, c.brackets = true, false, "", 0
	case tokens.Name:
		if c.inTag && c.word == "" {
			c.word = tok.Val
		}
	case tokens.Assign:
		c.assigns = c.assigns || c.brackets == 0
	case tokens.BlockEnd:
		c.inTag, c.brackets = false, 0
		switch {
		case strings.HasPrefix(c.word, "end"):
			c.blocks = max(0, c.blocks-1)
		case blockTags[c.word], c.word == "set" && !c.assigns:
			c.blocks++
			if c.blocks > maxNesting {
				return &Error{Line: tok.Line, Column: tok.Col, Message: fmt.Sprintf("blocks nested deeper than %d levels", maxNesting)}
			}
		}
	}
	return nil
}

// blockTags are the tags that open a block closed by an end tag (set too,
// without `=`).
var blockTags = map[string]bool{"if": true, "for": true, "macro": true, "call": true, "filter": true, "with": true,
	"block": true, "autoescape": true, "raw": true, "trans": true}
