package exec

import (
	"fmt"
	"maps"
	"reflect"
	"sync"

	"github.com/nikolalohinski/gonja/v2/parser"
	"github.com/nikolalohinski/gonja/v2/tokens"
	"github.com/pkg/errors"
)

type Environment struct {
	Filters           *FilterSet
	ControlStructures *ControlStructureSet
	Tests             *TestSet
	Context           *Context
	Methods           Methods
	// Interrupt, when set, is asked before every statement, expression and
	// filter call is executed, and at the end (PaV); its error ends the
	// rendering. Once it fails it should keep failing, as a deadline does.
	Interrupt func() error
	// Hooks, when set, are PaV's additions to a rendering; environments
	// inherited from this one share them.
	Hooks *Hooks
}

// Hooks are what an embedder adds to a rendering, as Jinja's environment
// options do (PaV). Use one Hooks per rendering: it records the rendering's
// first Python exception.
type Hooks struct {
	// Finalize, when set, turns the value of every {{ }} into what is
	// written, as Jinja's finalize; start is the {{ token.
	Finalize func(v *Value, start *tokens.Token) *Value
	// Enter, when set, is called before the body of each loop iteration
	// and macro call; its error ends the rendering. Exit is called after.
	Enter func() error
	Exit  func()
	// Limits bound the strings and lists operators build.
	Limits Limits

	raised error
}

// Raised is the first error raised in the rendering (Raise), or nil.
func (h *Hooks) Raised() error {
	if h == nil {
		return nil
	}
	return h.raised
}

// Raise fails the rendering with err, as a Python exception does: no
// construct of the template swallows it (the items of a list, a test, a
// filter or `or` would otherwise ignore or replace an error value). It
// returns err as a value for the caller to return.
func (e *Evaluator) Raise(err error) *Value {
	if h := e.Environment.Hooks; h != nil && h.raised == nil {
		h.raised = err
	}
	return AsValue(err)
}

// interrupted is Interrupt's answer, or the error raised, nil without one.
func (env *Environment) interrupted() error {
	if err := env.Hooks.Raised(); err != nil {
		return err
	}
	if env.Interrupt == nil {
		return nil
	}
	return env.Interrupt()
}

// limits are the Hooks' limits, none without hooks.
func (env *Environment) limits() Limits {
	if env.Hooks == nil {
		return Limits{}
	}
	return env.Hooks.Limits
}

// enter runs the Enter hook around body.
func (env *Environment) enter(body func() error) error {
	h := env.Hooks
	if h == nil || h.Enter == nil {
		return body()
	}
	if err := h.Enter(); err != nil {
		return err
	}
	if h.Exit != nil {
		defer h.Exit()
	}
	return body()
}

// Enter runs body as the body of a loop iteration or a macro call (Hooks.Enter).
func (r *Renderer) Enter(body func() error) error { return r.Environment.enter(body) }

type FilterSet struct {
	filters map[string]FilterFunction
	lock    sync.Mutex
}

func NewFilterSet(filters map[string]FilterFunction) *FilterSet {
	return &FilterSet{
		filters: filters,
	}
}

// Exists returns true if the given filter is already registered
func (f *FilterSet) Exists(name string) bool {
	f.lock.Lock()
	defer f.lock.Unlock()
	_, existing := f.filters[name]
	return existing
}

// Get returns true and the named filter if it is already registered
func (f *FilterSet) Get(name string) (FilterFunction, bool) {
	f.lock.Lock()
	defer f.lock.Unlock()
	filter, ok := f.filters[name]
	return filter, ok
}

// Register registers a new filter. If there's already a filter with the same
// name, Register will panic. You usually want to call this
// function in the filter's init() function:
// http://golang.org/doc/effective_go.html#init
func (f *FilterSet) Register(name string, fn FilterFunction) error {
	if f.Exists(name) {
		return errors.Errorf("filter with name '%s' is already registered", name)
	}
	f.lock.Lock()
	defer f.lock.Unlock()
	f.filters[name] = fn
	return nil
}

// Replace replaces an already registered filter with a new implementation. Use this
// function with caution since it allows you to change existing filter behaviour.
func (f *FilterSet) Replace(name string, fn FilterFunction) error {
	if !f.Exists(name) {
		return errors.Errorf("filter with name '%s' does not exist (therefore cannot be overridden)", name)
	}
	f.lock.Lock()
	defer f.lock.Unlock()
	f.filters[name] = fn
	return nil
}

func (f *FilterSet) Update(other *FilterSet) *FilterSet {
	if other == nil {
		return f
	}
	f.lock.Lock()
	other.lock.Lock()
	defer f.lock.Unlock()
	defer other.lock.Unlock()
	maps.Copy(f.filters, other.filters)
	return f
}

type ControlStructureSet struct {
	statements map[string]parser.ControlStructureParser
	lock       sync.Mutex
}

func NewControlStructureSet(statements map[string]parser.ControlStructureParser) *ControlStructureSet {
	return &ControlStructureSet{
		statements: statements,
	}
}

// Exists returns true if the given test is already registered
func (c *ControlStructureSet) Exists(name string) bool {
	c.lock.Lock()
	defer c.lock.Unlock()
	_, existing := c.statements[name]
	return existing
}

func (c *ControlStructureSet) Get(name string) (parser.ControlStructureParser, bool) {
	c.lock.Lock()
	defer c.lock.Unlock()
	parser, existing := c.statements[name]
	return parser, existing
}

// Register registers a new tag. You usually want to call this
// function in the tag's init() function:
// http://golang.org/doc/effective_go.html#init
func (c *ControlStructureSet) Register(name string, parser parser.ControlStructureParser) error {
	if c.Exists(name) {
		return errors.Errorf("ControlStructure '%s' is already registered", name)
	}
	c.lock.Lock()
	defer c.lock.Unlock()
	c.statements[name] = parser
	return nil
}

// Replace replaces an already registered tag with a new implementation. Use this
// function with caution since it allows you to change existing tag behaviour.
func (c *ControlStructureSet) Replace(name string, parser parser.ControlStructureParser) error {
	if !c.Exists(name) {
		return errors.Errorf("ControlStructure '%s' does not exist (therefore cannot be overridden)", name)
	}
	c.lock.Lock()
	defer c.lock.Unlock()
	c.statements[name] = parser
	return nil
}

func (c *ControlStructureSet) Update(other *ControlStructureSet) *ControlStructureSet {
	c.lock.Lock()
	defer c.lock.Unlock()
	other.lock.Lock()
	defer other.lock.Unlock()
	maps.Copy(c.statements, other.statements)
	return c
}

// TestSet maps test names to their TestFunction handler
type TestSet struct {
	tests map[string]TestFunction
	lock  sync.Mutex
}

func NewTestSet(tests map[string]TestFunction) *TestSet {
	return &TestSet{
		tests: tests,
	}
}

func (t *TestSet) validate(name string, fn TestFunction) error {
	testFn := reflect.ValueOf(fn)
	testType := testFn.Type()
	if testType.Kind() != reflect.Func || testType.NumIn() != 3 || testType.NumOut() != 2 {
		return fmt.Errorf("test '%s' is not a function with 3 arguments and 2 returns", name)
	}

	firstArgumentType := testType.In(0)
	switch firstArgumentType {
	case reflect.TypeFor[*Evaluator](), reflect.TypeFor[*Context]():
		// valid
	default:
		return fmt.Errorf("test '%s' first argument is neither of type *exec.Context nor *exec.Evaluator", name)
	}

	if testType.In(1) != reflect.TypeFor[*Value]() {
		return fmt.Errorf("test '%s' second argument is not of type *exec.Value", name)
	}
	if testType.In(2) != reflect.TypeFor[*VarArgs]() {
		return fmt.Errorf("test '%s' third argument is not of type *exec.VarArgs", name)
	}
	if testType.Out(0) != reflect.TypeFor[bool]() {
		return fmt.Errorf("test '%s' first returned variable is not of type bool", name)
	}
	if testType.Out(1) != reflect.TypeFor[error]() {
		return fmt.Errorf("test '%s' second returned variable is not of type error", name)
	}

	return nil
}

// Exists returns true if the given test is already registered
func (t *TestSet) Exists(name string) bool {
	t.lock.Lock()
	defer t.lock.Unlock()
	_, existing := t.tests[name]
	return existing
}

func (t *TestSet) Get(name string) (TestFunction, bool) {
	t.lock.Lock()
	defer t.lock.Unlock()
	fn, existing := t.tests[name]
	return fn, existing
}

// Register registers a new test. If there's already a test with the same
// name, RegisterTest will error out.
func (t *TestSet) Register(name string, fn TestFunction) error {
	if t.Exists(name) {
		return errors.Errorf("test with name '%s' is already registered", name)
	}
	t.lock.Lock()
	defer t.lock.Unlock()
	if err := t.validate(name, fn); err != nil {
		return err
	}
	t.tests[name] = fn
	return nil
}

// Replace replaces an already registered test with a new implementation. Use this
// function with caution since it allows you to change existing test behaviour.
func (t *TestSet) Replace(name string, fn TestFunction) error {
	if !t.Exists(name) {
		return errors.Errorf("test with name '%s' does not exist (therefore cannot be overridden)", name)
	}
	t.lock.Lock()
	defer t.lock.Unlock()
	if err := t.validate(name, fn); err != nil {
		return err
	}
	t.tests[name] = fn
	return nil
}

func (t *TestSet) Update(other *TestSet) *TestSet {
	t.lock.Lock()
	defer t.lock.Unlock()
	other.lock.Lock()
	defer other.lock.Unlock()
	for name, test := range other.tests {
		if err := t.validate(name, test); err != nil {
			continue
		}
		t.tests[name] = test
	}
	return t
}

type Method[I any] func(self I, selfValue *Value, arguments *VarArgs) (any, error)

type Methods struct {
	Bool  *MethodSet[bool]
	Int   *MethodSet[int]
	Float *MethodSet[float64]
	Str   *MethodSet[string]
	Dict  *MethodSet[map[string]any]
	List  *MethodSet[[]any]
}

type MethodSet[I any] struct {
	methods map[string]Method[I]
	lock    sync.Mutex
}

func NewMethodSet[I any](methods map[string]Method[I]) *MethodSet[I] {
	return &MethodSet[I]{
		methods: methods,
	}
}

func (m *MethodSet[I]) Get(name string) (Method[I], bool) {
	m.lock.Lock()
	defer m.lock.Unlock()
	method, existing := m.methods[name]
	return method, existing
}

// With is a copy of the set where over's methods replace or add to its own (PaV).
func (m *MethodSet[I]) With(over map[string]Method[I]) *MethodSet[I] {
	m.lock.Lock()
	defer m.lock.Unlock()
	all := maps.Clone(m.methods)
	maps.Copy(all, over)
	return NewMethodSet(all)
}

func (m *MethodSet[I]) Exists(name string) bool {
	m.lock.Lock()
	defer m.lock.Unlock()
	_, existing := m.methods[name]
	return existing
}

// CheckItems is asked by a filter that walks the items of in, or builds a
// list of them, before it does (PaV): more than Limits.ListItems items is
// an error raised, and Interrupt's answer ends it too (a deadline), as
// building millions of values takes seconds. It returns nil to go on.
func (e *Evaluator) CheckItems(filter string, in *Value) *Value {
	if lim := e.Environment.limits().ListItems; lim > 0 && (in.IsList() || in.IsString() || in.IsDict()) && in.Len() > lim {
		return e.Raise(fmt.Errorf("filter %s: more than %d items", filter, lim))
	}
	return e.Interrupted()
}

// Interrupted is Interrupt's answer as a value, nil to go on (PaV): asked
// by filters that work long, between items.
func (e *Evaluator) Interrupted() *Value {
	if err := e.Environment.interrupted(); err != nil {
		return AsValue(err)
	}
	return nil
}

// Tick is Interrupted once in every 1024 items a filter's loop counts with
// i, nil otherwise (PaV); nil for no evaluator (a filter called directly).
func (e *Evaluator) Tick(i int) *Value {
	if e == nil || i%1024 != 0 {
		return nil
	}
	return e.Interrupted()
}

// Limits are the Hooks' limits, none without hooks (PaV).
func (e *Evaluator) Limits() Limits { return e.Environment.limits() }
