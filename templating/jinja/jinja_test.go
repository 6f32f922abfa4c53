package jinja

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nikolalohinski/gonja/v2/exec"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// goldenCase is one case of testdata/golden.json, rendered by real Jinja 3
// (testdata/golden.py) configured like the original PaV.
type goldenCase struct {
	Name   string                 `json:"name"`
	Source string                 `json:"source"`
	Vars   map[string]interface{} `json:"vars"`
	Output *string                `json:"output"`
	YAML   bool                   `json:"yaml"`
	Error  string                 `json:"error"`
}

func testFunctions() *Functions {
	return &Functions{GetPVC: func(name, namespace string) (map[string]interface{}, error) {
		if name == "missing" {
			return nil, errors.New("not found")
		}
		return map[string]interface{}{
			"metadata": map[string]interface{}{"name": name, "namespace": namespace},
			"spec":     map[string]interface{}{"volumeName": "pv-" + name},
		}, nil
	}}
}

// deliberateDivergences are where PaV does not do what Jinja 3 does, on
// purpose: the one list of them, each a row of docs/reference.md's table
// (TestDeliberateDivergencesDocumented). PaV fails where Jinja renders, with
// an error containing one of errContains; the golden cases
// (knownDivergences) and the differential tester (TestDifferential) accept
// such a failure only for these.
var deliberateDivergences = []struct {
	name, reason string
	errContains  []string
	// jinjaContains: Jinja's error or output, where PaV renders otherwise,
	// names one of these
	jinjaContains []string
	// limit: reached only by a construct built to reach it (the
	// differential tester's stress probes)
	limit bool
}{
	{
		name:        "64-bit integers",
		reason:      "Python's integers are unbounded; PaV's are 64-bit, and an overflow is an error rather than a silent wrap-around",
		errContains: []string{"integer overflow"},
	},
	{
		name: "Limits",
		reason: "a template must not exhaust or hang the process rendering it: strings, lists, widths, loop iterations, nesting, " +
			"tokens and time are bounded (the limits table above); Jinja's sandbox bounds only range()",
		errContains: []string{"too large", "string too long", "list too long", "longer than 4194304 bytes",
			"took longer than", "loop iterations and macro calls", "nested deeper than", "more than 10000 tokens"},
		limit: true,
	},
	{
		name:        "Unknown functions",
		reason:      "a call of a function that does not exist fails when the template is compiled, even in a branch never taken; Jinja fails only when the call runs",
		errContains: []string{"unknown function"},
	},
	{
		name:        "No complex numbers",
		reason:      "a negative number raised to a fractional power is an error; Python makes a complex number, which PaV has no use for",
		errContains: []string{"the result is complex"},
	},
	{
		name:   "Key order of the context's objects",
		reason: "the context's objects are Go maps, iterated in sorted key order; Jinja keeps the JSON's order (the differential tester's variables are in sorted order)",
	},
	{
		name:   "Last digit of `**`",
		reason: "a float power is Go's math.Pow, correctly rounded for 6e-05 ** 2 (3.6e-09) where glibc's pow, which Python calls, is an ulp off (3.6000000000000004e-09); the differential tester takes floats an ulp apart for this divergence",
	},
	{
		name: "Filters return lists",
		reason: "map, select, reject, selectattr, rejectattr, batch, slice, unique, items and reverse (of a list) return lists, where Jinja's return generators or iterators: " +
			"their length, items, last item and truth work as a list's, where Jinja's fail, or are true even when empty",
		jinjaContains: []string{"'generator'", "<generator object", "_reverseiterator", "'reversed'", "<reversed object"},
	},
	{
		name:   "`range()` is a list",
		reason: "range() returns a list, not a range object (the differential tester generates it only where the two behave alike: iterated, indexed, filtered)",
	},
}

// knownDivergences are golden cases where PaV does not do what Jinja does:
// deliberately (divergence names one of deliberateDivergences). For each,
// the test asserts PaV's own behaviour instead: the render must fail with an
// error containing errContains. If one starts to render, the test fails, and
// the entry must be reconsidered.
var knownDivergences = map[string]struct{ divergence, errContains, pending string }{
	"int-overflow-error-or-big":  {divergence: "64-bit integers", errContains: "integer overflow"},
	"int-overflow-negate-min":    {divergence: "64-bit integers", errContains: "integer overflow"},
	"int-overflow-abs-min":       {divergence: "64-bit integers", errContains: "integer overflow"},
	"int-overflow-int-of-float":  {divergence: "64-bit integers", errContains: "integer overflow"},
	"int-overflow-int-of-string": {divergence: "64-bit integers", errContains: "integer overflow"},
	"int-overflow-round":         {divergence: "64-bit integers", errContains: "integer overflow"},
	"int-overflow-literal":       {divergence: "64-bit integers", errContains: "integer overflow"},
	"int-overflow-sum":           {divergence: "64-bit integers", errContains: "integer overflow"},
	"center-huge":                {divergence: "Limits", errContains: "filter center: argument 1000000000 too large"},
	"string-multiply-huge":       {divergence: "Limits", errContains: "repetition result too large"},
	"unknown-function-untaken":   {divergence: "Unknown functions", errContains: "unknown function 'frob'"},
	"complex-power":              {divergence: "No complex numbers", errContains: "the result is complex"},
	// Found by the differential tester and not fixed yet (its
	// pendingDivergences): PaV still differs; once it does what Jinja does,
	// the test fails until the entry goes. None now.
}

// TestDeliberateDivergencesDocumented: docs/reference.md's table of
// deliberate divergences has one row per deliberateDivergences entry, and
// each known golden divergence is one of them.
func TestDeliberateDivergencesDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/reference.md")
	if err != nil {
		t.Fatal(err)
	}
	const heading = "### Deliberate divergences from Jinja 3"
	_, table, ok := strings.Cut(string(doc), heading)
	if !ok {
		t.Fatalf("docs/reference.md lacks %q", heading)
	}
	if i := strings.Index(table, "\n#"); i >= 0 {
		table = table[:i]
	}
	var rows []string
	for _, line := range strings.Split(table, "\n") {
		if cells := strings.Split(line, "|"); len(cells) > 2 && !strings.HasPrefix(strings.TrimSpace(cells[1]), "-") {
			rows = append(rows, strings.TrimSpace(cells[1]))
		}
	}
	var want []string
	names := map[string]bool{}
	for _, d := range deliberateDivergences {
		want = append(want, d.name)
		names[d.name] = true
	}
	if got := strings.Join(rows[1:], ", "); got != strings.Join(want, ", ") {
		t.Errorf("docs/reference.md's deliberate divergences are %q, want %q (deliberateDivergences)", got, strings.Join(want, ", "))
	}
	for c, d := range knownDivergences {
		if d.pending == "" && !names[d.divergence] {
			t.Errorf("known divergence %s: %q is not one of deliberateDivergences", c, d.divergence)
		}
	}
}

func TestGoldenAgainstJinja(t *testing.T) {
	data, err := os.ReadFile("testdata/golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []goldenCase
	if err := utiljson.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) < 50 {
		t.Fatalf("only %d golden cases", len(cases))
	}
	seen := map[string]bool{}
	for _, c := range cases {
		seen[c.Name] = true
		t.Run(c.Name, func(t *testing.T) {
			out, isYAML, err := render(c.Source, c.Vars)
			if d, ok := knownDivergences[c.Name]; ok && d.pending != "" {
				agrees := c.Error != "" && err != nil || c.Error == "" && err == nil && out == *c.Output
				if agrees {
					t.Fatalf("pending divergence (%s) is fixed: remove its entry from knownDivergences", d.pending)
				}
				return
			}
			if d, ok := knownDivergences[c.Name]; ok {
				if err == nil {
					t.Fatalf("known divergence (%s): want an error containing %q, but rendered %q", d.divergence, d.errContains, out)
				}
				if !strings.Contains(err.Error(), d.errContains) {
					t.Fatalf("known divergence (%s): error %q lacks %q", d.divergence, err, d.errContains)
				}
				return
			}
			if c.Error != "" {
				if err == nil {
					t.Fatalf("Jinja fails (%s) but we rendered %q", c.Error, out)
				}
				if strings.Contains(err.Error(), c.Source) && len(c.Source) > 20 {
					t.Errorf("error dumps the template source: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Jinja renders %q but we fail: %v", *c.Output, err)
			}
			if out != *c.Output {
				t.Errorf("output\n got: %q\nwant: %q", out, *c.Output)
			}
			if isYAML != c.YAML {
				t.Errorf("yaml = %v, want %v", isYAML, c.YAML)
			}
		})
	}
	for name := range knownDivergences {
		if !seen[name] {
			t.Errorf("known divergence %q names no golden case", name)
		}
	}
}

func render(src string, vars map[string]interface{}) (string, bool, error) {
	tpl, err := Compile(src)
	if err != nil {
		return "", false, err
	}
	return tpl.Render(vars, testFunctions())
}

func TestErrorsCarryPosition(t *testing.T) {
	cases := []struct {
		src        string
		line, col  int
		msgContain string
	}{
		{"a\nb {{ missing }}", 2, 3, "undefined"},
		{"{{ x | nosuch }}", 1, 8, "unknown filter 'nosuch'"},
		{"\n\n{% if x is nosuch %}{% endif %}", 3, 0, "unknown test 'nosuch'"},
		{"{{ frob(1) }}", 1, 4, "unknown function 'frob'"},
		{"{{ 1 + }}", 1, 0, ""},
		{"{% include 'x' %}", 1, 0, "include"},
		// raised by the call, which knows no position: the line of the node
		{"a\n\n{{ 'x'.nope() }}", 3, 0, "unknown method 'nope'"},
	}
	for _, c := range cases {
		_, _, err := render(c.src, map[string]interface{}{"x": int64(1)})
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%q: error %v is not *Error", c.src, err)
			continue
		}
		if e.Line != c.line || (c.col != 0 && e.Column != c.col) {
			t.Errorf("%q: position %d:%d, want %d:%d (%v)", c.src, e.Line, e.Column, c.line, c.col, e)
		}
		if !strings.Contains(e.Message, c.msgContain) {
			t.Errorf("%q: message %q lacks %q", c.src, e.Message, c.msgContain)
		}
	}
}

func TestRenderNeverMutatesVars(t *testing.T) {
	vars := map[string]interface{}{"pvc": map[string]interface{}{"metadata": map[string]interface{}{"name": "orig"}}}
	if _, _, err := render("{% set pvc.metadata.name = 'changed' %}{{ pvc.metadata.name }}", vars); err != nil {
		t.Logf("render: %v", err) // an error is fine; mutation is not
	}
	if got := vars["pvc"].(map[string]interface{})["metadata"].(map[string]interface{})["name"]; got != "orig" {
		t.Fatalf("caller's vars mutated: name = %v", got)
	}
}

func TestLiteral(t *testing.T) {
	for src, lit := range map[string]bool{"plain text": true, "1Gi": true, "{{ x }}": false, "{% if %}": false, "a {# c #}": false} {
		tpl, err := Compile(src)
		if err != nil {
			if lit {
				t.Errorf("%q: %v", src, err)
			}
			continue
		}
		if tpl.IsLiteral() != lit {
			t.Errorf("%q: IsLiteral = %v", src, tpl.IsLiteral())
		}
	}
}

func TestConcurrentRender(t *testing.T) {
	tpl, err := Compile("{% for i in items %}{{ i }}-{{ name }}{% endfor %}")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan string)
	for i := 0; i < 8; i++ {
		go func() {
			out, _, err := tpl.Render(map[string]interface{}{"items": []interface{}{int64(1), int64(2)}, "name": "n"}, nil)
			if err != nil {
				out = err.Error()
			}
			done <- out
		}()
	}
	for i := 0; i < 8; i++ {
		if got := <-done; got != "1-n2-n" {
			t.Fatalf("got %q", got)
		}
	}
}

func TestToJSONMatchesPythonFloats(t *testing.T) {
	for f, want := range map[float64]string{1: "1.0", 0.1: "0.1", 1e16: "1e+16", 1e15: "1000000000000000.0", 1.5e-5: "1.5e-05", -2.5: "-2.5", 123456.789: "123456.789"} {
		if got := exec.PyFloatString(f); got != want {
			t.Errorf("PyFloatString(%v) = %q, want %q", f, got, want)
		}
	}
	out, err := ToJSON(map[string]interface{}{"k": "a\nb"})
	if err != nil || strings.Contains(out, "\n") {
		t.Fatalf("tojson %q, %v", out, err)
	}
}

// FuzzCompileRender: arbitrary sources never hang or hit a runtime error
// (recovered panics are reported as errors, so they are looked for there).
func FuzzCompileRender(f *testing.F) {
	data, _ := os.ReadFile("testdata/cases.json")
	var cases []goldenCase
	_ = json.Unmarshal(data, &cases)
	for _, c := range cases {
		f.Add(c.Source)
	}
	for _, src := range attacks { // attack_test.go: what once crashed or hung a process
		f.Add(src)
	}
	f.Add("{{ ('x ' * 2000000)|wordwrap(65536)|length }}") // quadratic in gonja's wordwrap
	f.Add("{% set x|replace('(', '=') %}{{ '{%' }}{% endset %}{{ x }}")
	f.Add("{% raw %}{% if %}((({% endraw %}{{ 1 }}")
	vars := map[string]interface{}{"x": int64(1), "s": "str", "l": []interface{}{int64(1), "a"}, "d": map[string]interface{}{"k": "v"}}
	f.Fuzz(func(t *testing.T, src string) {
		// PAV_FUZZ_TRACE=dir keeps each worker's current input in dir/<pid>,
		// to find the input of a worker that makes no progress.
		if dir := os.Getenv("PAV_FUZZ_TRACE"); dir != "" {
			f := fmt.Sprintf("%s/%d", dir, os.Getpid())
			_ = os.WriteFile(f, []byte(src), 0o644)
			defer os.Remove(f)
		}
		done := make(chan struct{})
		var err error
		go func() {
			defer close(done)
			var tpl *Template
			if tpl, err = Compile(src); err == nil {
				_, _, err = tpl.Render(vars, testFunctions())
			}
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("render of %q did not finish", src)
		}
		// Panics are recovered into errors; a runtime error among them is
		// a bug in gonja or here (index out of range, nil dereference).
		if err != nil && strings.Contains(err.Error(), "runtime error") {
			t.Fatalf("%q: %v", src, err)
		}
	})
}

func BenchmarkRender(b *testing.B) {
	src := strings.Repeat("{% if pvc.metadata.name %}\n  name: {{ pvc.metadata.name | tojson }}\n{% endif %}\ncmd: {{ params.cmd | tobash }}\n", 13)
	tpl, err := Compile(src)
	if err != nil {
		b.Fatal(err)
	}
	vars := map[string]interface{}{
		"pvc":    map[string]interface{}{"metadata": map[string]interface{}{"name": "data"}},
		"params": map[string]interface{}{"cmd": "echo 'hi'\nexit 0"},
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, _, err := tpl.Render(vars, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// ToJSON prints v as Jinja's |tojson does: json.dumps(v, sort_keys=True) with
// Python's separators (", " and ": "), non-ASCII escaped, and <, >, &, '
// escaped for HTML safety. The result never contains a newline (only
// tojson(indent=...) adds some).
func ToJSON(v interface{}) (string, error) {
	return toJSONIndent(v, nil)
}

// A render error keeps its innermost cause without gonja's syntax-tree
// dumps, and with it what was called wrongly, whose cause may hold ": ".
func TestRenderErrorKeepsTheCall(t *testing.T) {
	for src, want := range map[string]string{
		"{{ 'x'|upper(1) }}":            "invalid call to filter 'upper': received 1 unexpected positional argument",
		"{{ '{:d}'.format('x') }}":      "invalid call to method 'format' of str: Unknown format code 'd' for object of type 'str'",
		"{{ 1 is divisibleby(0) }}":     "invalid call to test 'divisibleby': integer division or modulo by zero",
		"{{ 'x'[1:'a'] }}":              "slice end is not an integer",
		"{{ 'a' ~ ('x'|truncate(2)) }}": "invalid call to filter 'truncate': expected length >= 3, got 2",
	} {
		_, _, err := render(src, map[string]interface{}{})
		var e *Error
		if !errors.As(err, &e) || e.Message != want {
			t.Errorf("%s: error %v, want the message %q", src, err, want)
		}
	}
}

// TestFiltersReturnLists pins the deliberate divergence "Filters return
// lists": PaV's map, select and reverse results are lists, where Jinja's
// are generators and iterators.
func TestFiltersReturnLists(t *testing.T) {
	for src, want := range map[string]string{
		"{{ [1, 2]|reverse|length }}":                     "2",
		"{{ [1, 2]|map('string')|list|length }}":          "2",
		"{{ [1, 2]|select('odd')|length }}":               "1",
		"{{ [1, 2]|reverse|string }}":                     "[2, 1]",
		"{% if []|select %}y{% else %}n{% endif %}":       "n",
		"{{ [1, 2, 3]|reverse|last }}|{{ 'ab'|reverse }}": "1|ba",
	} {
		got, _, err := render(src, nil)
		if err != nil || got != want {
			t.Errorf("%s = %q, %v; want %q", src, got, err, want)
		}
	}
}
