// Package jinja is PaV's Jinja environment on PaV's fork of gonja
// (third_party/gonja, where Jinja 3's semantics live, each change listed in
// its PAV.md), configured as the original PaV configured Jinja:
//
//   - trim_blocks and lstrip_blocks on; a single trailing newline is dropped, as
//     Jinja does by default;
//   - every `{{ }}` expression must evaluate to a string or a number (booleans
//     count as numbers, as in Python); undefined, none, lists and maps are errors
//     (PaV's finalize rule, gonja's Hooks.Finalize);
//   - unknown filters, tests and functions are rejected at compile time;
//   - include/import/extends are not available (a template must not read files
//     of the process evaluating it);
//   - |tojson prints exactly what Jinja prints, |tobash is PaV's filter;
//   - get_pvc() errors propagate even through `default`, `is defined` or `or`;
//   - the limits of limits.go (an immutable sandbox, bounded work and output);
//   - each render gets its own deep copy of the variables; panics become errors.
package jinja

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
	"github.com/nikolalohinski/gonja/v2/parser"
	"github.com/nikolalohinski/gonja/v2/tokens"
	"k8s.io/apimachinery/pkg/runtime"
)

// Template is one compiled Jinja template. Safe for concurrent Render calls.
type Template struct {
	source  string
	literal bool
	tpl     *exec.Template
	loader  loaders.Loader
	free    []Name
}

// Functions are PaV's callable functions available to templates.
type Functions struct {
	// GetPVC implements get_pvc(name, namespace). Its error propagates.
	GetPVC func(name, namespace string) (map[string]interface{}, error)
}

// Error is a template error. Line and Column are 1-based, 0 when unknown.
type Error struct {
	Line, Column int
	Message      string
	cause        error // ErrDeadline, or nil
}

func (e *Error) Unwrap() error { return e.cause }

func (e *Error) Error() string {
	switch {
	case e.Line > 0 && e.Column > 0:
		return fmt.Sprintf("line %d, column %d: %s", e.Line, e.Column, e.Message)
	case e.Line > 0:
		return fmt.Sprintf("line %d: %s", e.Line, e.Message)
	}
	return e.Message
}

// digitDotNonASCII finds what makes gonja's lexer panic (see Compile).
var digitDotNonASCII = regexp.MustCompile(`[0-9]\.[^\x00-\x7f]`)

// maxSourceBytes bounds what we hand to gonja (templates live in one API object).
const maxSourceBytes = 256 << 10

var pavConfig = func() *config.Config {
	c := config.New()
	c.TrimBlocks = true
	c.LeftStripBlocks = true
	c.KeepTrailingNewline = false
	return c
}()

// pavControlStructures is gonja's set without the ones that read other templates.
var pavControlStructures = func() *exec.ControlStructureSet {
	allowed := map[string]parser.ControlStructureParser{}
	for _, name := range []string{"if", "for", "set", "macro", "call", "filter", "with", "raw", "autoescape"} {
		if p, ok := builtins.ControlStructures.Get(name); ok {
			allowed[name] = p
		}
	}
	return exec.NewControlStructureSet(allowed)
}()

var filters = func() *exec.FilterSet {
	fs := exec.NewFilterSet(map[string]exec.FilterFunction{}).Update(builtins.Filters)
	must(fs.Replace("tojson", filterToJSON))
	must(fs.Replace("join", joinFilter(gonjaFilter(fs, "join"))))
	for _, name := range []string{"center", "indent", "wordwrap", "truncate", "batch", "slice", "filesizeformat"} {
		must(fs.Replace(name, boundedFilter(name, gonjaFilter(fs, name))))
	}
	must(fs.Register("tobash", filterToBash))
	return fs
}()

// gonjaFilter returns gonja's own filter name, which a limit wraps.
func gonjaFilter(fs *exec.FilterSet, name string) exec.FilterFunction {
	f, ok := fs.Get(name)
	if !ok {
		panic("gonja lacks filter " + name)
	}
	return f
}

var tests = exec.NewTestSet(map[string]exec.TestFunction{}).Update(builtins.Tests)

// globals are Jinja's global functions (gonja adds gettext, and a `gonja`
// variable, which Jinja lacks).
func globals() map[string]interface{} {
	g := map[string]interface{}{"range": rangeFunction, "lipsum": lipsumFunction, "cycler": cyclerFunction}
	for _, name := range []string{"dict", "namespace", "joiner"} {
		v, ok := builtins.GlobalFunctions.Get(name)
		if !ok {
			panic("gonja lacks global " + name)
		}
		g[name] = v
	}
	return g
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// globalFunctions are the functions a template may call by name.
var globalFunctions = map[string]bool{
	"get_pvc": true, "range": true, "dict": true, "namespace": true,
	"cycler": true, "joiner": true, "lipsum": true, "caller": true,
}

// IsTemplate reports whether source has Jinja syntax (else Compile takes it
// literally).
func IsTemplate(source string) bool {
	return strings.Contains(source, "{{") || strings.Contains(source, "{%") || strings.Contains(source, "{#")
}

// Compile parses source with PaV's settings. Errors are *Error; one that ran
// out of time wraps ErrDeadline.
func Compile(source string) (t *Template, err error) {
	if !IsTemplate(source) {
		return &Template{source: jinjaLiteral(source), literal: true}, nil
	}
	if len(source) > maxSourceBytes {
		return nil, &Error{Message: fmt.Sprintf("template is longer than %d bytes", maxSourceBytes)}
	}
	workSlots <- struct{}{}
	defer func() { <-workSlots }()
	deadline := time.Now().Add(compileTimeLimit)
	defer func() {
		if r := recover(); r != nil {
			msg := fmt.Sprintf("invalid template: %v", r)
			if _, isRuntime := r.(interface{ RuntimeError() }); isRuntime && digitDotNonASCII.MatchString(source) {
				// gonja's lexer backs up too far after "0." when a
				// multi-byte character follows (Jinja reads `0 .谰`, an
				// attribute of 0, which is undefined anyway).
				msg = "invalid template: a number followed by '.' and a non-ASCII character"
			}
			t, err = nil, &Error{Message: msg}
		}
	}()
	loader, err := loaders.NewFileSystemLoader("")
	if err != nil {
		return nil, &Error{Message: err.Error()}
	}
	shifted, err := loaders.NewShiftedLoader("template", strings.NewReader(source), loader)
	if err != nil {
		return nil, &Error{Message: err.Error()}
	}
	env := &exec.Environment{
		Context:           exec.EmptyContext(),
		Filters:           filters,
		Tests:             tests,
		ControlStructures: pavControlStructures,
		Methods:           methods,
	}
	// Every token gonja's lexer produces is checked (tokenCheck) as it is
	// produced, before the parser, which recurses, sees any.
	stream, err := tokens.LexChecked(source, pavConfig, (&tokenCheck{deadline: deadline}).check)
	if err != nil {
		return nil, err
	}
	tpl, err := parse(shifted, env, source, stream)
	if err != nil {
		return nil, parseError(err, source)
	}
	if time.Now().After(deadline) {
		return nil, compileOvertime()
	}
	free, err := check(tpl.Root())
	if err != nil {
		return nil, err
	}
	if time.Now().After(deadline) {
		return nil, compileOvertime()
	}
	return &Template{source: source, tpl: tpl, loader: shifted, free: free}, nil
}

// parse runs gonja's parser, which panics on some truncated sources
// ("{{ 0 is "); Jinja reports a syntax error there.
func parse(l loaders.Loader, env *exec.Environment, source string, stream *tokens.Stream) (tpl *exec.Template, err error) {
	defer func() {
		if r := recover(); r != nil {
			tpl, err = nil, &Error{Message: "invalid syntax: the template ends in the middle of an expression or tag"}
		}
	}()
	return exec.ParseTemplate("template", pavConfig, l, env, source, stream)
}

// jinjaLiteral is what Jinja makes of a source without any Jinja syntax:
// newlines normalized to "\n" and a single trailing newline dropped.
func jinjaLiteral(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	return strings.TrimSuffix(s, "\n")
}

// FreeNames are the names the template reads without binding them itself:
// the variables it expects from its context (see check's freeNames).
func (t *Template) FreeNames() []Name { return t.free }

// IsLiteral reports whether the source has no Jinja syntax at all.
func (t *Template) IsLiteral() bool { return t.literal }

// LiteralText is what a literal template renders to: its source as Jinja
// outputs it (newlines normalized, one trailing newline dropped).
func (t *Template) LiteralText() string { return t.source }

// workSlots bounds the compiles and renders running at once.
var workSlots = make(chan struct{}, maxConcurrentWork)

// renderState is a render's count of its work.
type renderState struct {
	fatal error // the first of its limits it passed
	steps int   // loop iterations and macro calls so far
	depth int   // current nesting of loop bodies and macro calls
	// deadline of the render (zero: none); see maxRenderTime
	deadline time.Time
}

func (s *renderState) fail(err error) {
	if s.fatal == nil {
		s.fatal = err
	}
}

// Render evaluates the template with a private deep copy of vars. yaml reports
// whether the template set the variable `yaml` to true.
func (t *Template) Render(vars map[string]interface{}, fns *Functions) (out string, yaml bool, err error) {
	if t.literal {
		return t.source, false, nil
	}
	// Each render may use several times maxOutputBytes; bounding how many
	// run at once bounds the process's memory (see deployment.yaml's limits).
	workSlots <- struct{}{}
	defer func() { <-workSlots }()
	defer func() {
		if r := recover(); r != nil {
			out, yaml, err = "", false, &Error{Message: fmt.Sprintf("evaluation failed: %v", r)}
		}
	}()
	state := &renderState{deadline: time.Now().Add(maxRenderTime)}
	data := globals()
	for k, v := range vars {
		data[k] = runtime.DeepCopyJSONValue(v)
	}
	data["get_pvc"] = getPVCFunction(fns)
	hooks := &exec.Hooks{
		Finalize: finalize,
		Enter:    state.enter,
		Exit:     state.exit,
		Limits:   exec.Limits{StringBytes: maxOutputBytes, ListItems: maxListItems, Width: maxWidth},
	}

	ctx := exec.NewContext(data)
	env := &exec.Environment{
		Context:           ctx,
		Filters:           filters,
		Tests:             tests,
		ControlStructures: pavControlStructures,
		Methods:           methods,
		Hooks:             hooks,
		Interrupt: func() error {
			if state.fatal != nil || overtime(state) {
				return state.fatal
			}
			return nil
		},
	}
	buf := &limitedWriter{state: state}
	renderErr := exec.NewRenderer(env, buf, pavConfig, t.loader, t.tpl).Execute()
	// A limit reached is the cause of whatever failed after it (a filter
	// that stopped at the deadline raises the deadline as its own error).
	if state.fatal != nil {
		return "", false, state.fatal
	}
	if err := hooks.Raised(); err != nil {
		raised := asError(err)
		// The raising call knows no position; the node it failed surfaces
		// at does (gonja's "at line N").
		var atNode *Error
		if raised.Line == 0 && renderErr != nil && errors.As(renderError(renderErr), &atNode) {
			raised = &Error{Line: atNode.Line, Column: raised.Column, Message: raised.Message, cause: raised.cause}
		}
		return "", false, raised
	}
	if renderErr != nil {
		return "", false, renderError(renderErr)
	}
	if v, ok := ctx.Get("yaml"); ok && v != nil {
		b, isBool := v.(bool)
		if !isBool {
			return "", false, &Error{Message: fmt.Sprintf("the variable yaml must be true or false, not %v", v)}
		}
		yaml = b
	}
	return string(buf.buf), yaml, nil
}

func getPVCFunction(fns *Functions) func(*exec.Evaluator, *exec.VarArgs) (map[string]interface{}, error) {
	return func(e *exec.Evaluator, args *exec.VarArgs) (map[string]interface{}, error) {
		var name, namespace *exec.Value
		pos := args.Args
		if len(pos) > 2 {
			return nil, fatalErr(e, "get_pvc() takes 2 arguments (name, namespace), got %d", len(pos))
		}
		if len(pos) > 0 {
			name = pos[0]
		}
		if len(pos) > 1 {
			namespace = pos[1]
		}
		for k, v := range args.KwArgs {
			switch {
			case k == "name" && name == nil:
				name = v
			case k == "namespace" && namespace == nil:
				namespace = v
			default:
				return nil, fatalErr(e, "get_pvc() got an unexpected or repeated argument %q", k)
			}
		}
		for _, a := range []struct {
			what string
			v    *exec.Value
		}{{"name", name}, {"namespace", namespace}} {
			if a.v != nil && a.v.UndefinedReason() != "" {
				return nil, fatalErr(e, "get_pvc(name, namespace): the %s is undefined: %s", a.what, a.v.UndefinedReason())
			}
		}
		if name == nil || namespace == nil || !name.IsString() || !namespace.IsString() {
			return nil, fatalErr(e, "get_pvc(name, namespace) needs two string arguments")
		}
		if fns == nil || fns.GetPVC == nil {
			return nil, fatalErr(e, "get_pvc() is not available here")
		}
		pvc, err := fns.GetPVC(name.String(), namespace.String())
		if err != nil {
			return nil, fatalErr(e, "get_pvc(%q, %q): %v", name.String(), namespace.String(), err)
		}
		return pvc, nil
	}
}

// fatal fails the render with an error no Jinja construct can swallow.
func fatal(e *exec.Evaluator, format string, args ...interface{}) *exec.Value {
	return e.Raise(&Error{Message: fmt.Sprintf(format, args...)})
}

func fatalErr(e *exec.Evaluator, format string, args ...interface{}) error {
	return fatal(e, format, args...).Interface().(error)
}

// asError is err as an *Error.
func asError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Message: err.Error()}
}

// finalize is PaV's finalize rule, applied to every {{ }} expression
// starting at start.
func finalize(in *exec.Value, start *tokens.Token) *exec.Value {
	text, err := scalarString(in)
	if err == nil {
		// Not safe: PaV's finalize returns str(value), a plain string even of
		// Markup, so an autoescape block escapes every expression.
		return exec.AsValue(text)
	}
	ferr := &Error{Message: "expression " + err.Error()}
	switch {
	case in.IsUndefined():
		ferr.Message = "expression is undefined: " + in.UndefinedReason()
	case in.IsNil():
		ferr.Message = "expression evaluated to none (expressions must evaluate to a string or a number)"
	}
	if start != nil {
		ferr.Line, ferr.Column = start.Line, start.Col
	}
	return exec.AsValue(ferr)
}

// scalarString prints a string or number as Python's str() does, else errors.
func scalarString(in *exec.Value) (string, error) {
	switch {
	case in.IsNil():
		return "", errors.New("evaluated to undefined or none (expressions must evaluate to a string or a number)")
	case in.IsString():
		return in.String(), nil
	case in.IsBool():
		if in.Bool() {
			return "True", nil
		}
		return "False", nil
	case in.IsInteger():
		return strconv.FormatInt(exec.AsInt(in), 10), nil
	case in.IsFloat():
		return exec.PyFloatString(in.Float()), nil
	case in.IsList():
		return "", errors.New("evaluated to a list (expressions must evaluate to a string or a number; use |tojson)")
	case in.IsDict():
		return "", errors.New("evaluated to a mapping (expressions must evaluate to a string or a number; use |tojson)")
	}
	return "", fmt.Errorf("evaluated to a %s (expressions must evaluate to a string or a number)", exec.PyType(in))
}

// filterToBash quotes a string or number as one shell word (shlex.quote per
// line, newlines as ANSI-C $'\n'), exactly like the original PaV.
func filterToBash(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if in.IsString() || in.IsNumber() || in.IsBool() {
		s, err := scalarString(in)
		if err == nil {
			return exec.AsValue(ToBash(s)) // a str, as the original PaV's
		}
	}
	var what string
	if in.IsNil() {
		what = "undefined or none"
	} else {
		what = describe(in)
	}
	return fatal(e, "filter tobash expects a string or a number, got %s", what)
}

func describe(in *exec.Value) string {
	switch {
	case in.IsList():
		return "a list"
	case in.IsDict():
		return "a mapping"
	}
	return "a " + exec.PyType(in)
}

// ToBash is the |tobash filter on a string.
func ToBash(s string) string {
	if s == "" {
		return "''"
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = shellQuote(l)
		}
	}
	return strings.Join(lines, `$'\n'`)
}

var shellSafe = regexp.MustCompile(`^[\w@%+=:,./-]+$`)

// shellQuote is Python's shlex.quote.
func shellQuote(s string) string {
	if shellSafe.MatchString(s) && isASCII(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func filterToJSON(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if err := exec.ReprSizeError(in); err != nil { // its JSON is no shorter: refused before any walk
		return fatal(e, "filter tojson: %v", err)
	}
	if reason := undefinedIn(in); reason != "" {
		return fatal(e, "tojson: value is undefined (%s)", reason)
	}
	p, err := exec.MethodArgs("tojson", params, 0, 1, "indent")
	if err != nil {
		return fatal(e, "filter tojson: %v", err)
	}
	var indent *string
	switch {
	case p[0] == nil || p[0].IsNil():
	case exec.IsInt(p[0]):
		n := exec.AsInt(p[0])
		if n > maxWidth {
			return fatal(e, "filter tojson: indent %d too large", n)
		}
		s := strings.Repeat(" ", int(max(n, 0)))
		indent = &s
	case p[0].IsString():
		s := p[0].String()
		indent = &s
	default:
		return fatal(e, "filter tojson: indent must be an integer or a string")
	}
	out, err := toJSONIndent(in, indent)
	if err != nil {
		return fatal(e, "tojson: %v", err)
	}
	return exec.AsSafeValue(out)
}

var lineRe = regexp.MustCompile(`at line (\d+)`)

// renderError turns gonja's nested error text into one short *Error.
func renderError(err error) error {
	var perr *Error
	if errors.As(err, &perr) {
		return perr
	}
	msg := err.Error()
	line := 0
	if m := lineRe.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
	}
	// gonja stacks "Unable to ... at line N: <node>: " prefixes, which dump
	// its syntax tree; keep the innermost cause, and with it what was
	// called ("invalid call to filter 'upper': ..."), whose cause may have
	// ": " of its own.
	msg = strings.TrimSuffix(msg, ": ")
	if i := strings.LastIndex(msg, invalidCall); i >= 0 {
		msg = msg[i:]
	} else if i := strings.LastIndex(msg, ": "); i >= 0 {
		msg = msg[i+2:]
	}
	return &Error{Line: line, Message: msg}
}

// invalidCall starts gonja's error for a filter, test or method called
// wrongly (exec.ErrInvalidCall, with what was called).
const invalidCall = "invalid call to "

// parseError turns a gonja parse failure into an *Error without the source dump.
func parseError(err error, source string) error {
	var serr *parser.SyntaxError
	if errors.As(err, &serr) {
		return &Error{Line: serr.Line, Column: serr.Column, Message: serr.Message}
	}
	var perr *Error
	if errors.As(err, &perr) {
		return perr
	}
	msg := err.Error()
	if i := strings.LastIndex(msg, "': "); i >= 0 {
		msg = msg[i+3:]
	}
	return &Error{Message: msg}
}
