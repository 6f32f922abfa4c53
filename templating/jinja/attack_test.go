package jinja

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Inputs an attacker (or a typo) can hand the Jinja engine through a
// PavProvisioner or an AdmissionReview: each must end with a clear error,
// quickly and in bounded memory, never crash or hang the process (issue 9).
var attacks = map[string]string{
	"nested lists":            "{{ " + strings.Repeat("[", 60000) + " }}",
	"nested parentheses":      "{{ " + strings.Repeat("(", 50000) + " }}",
	"nested dicts":            "{{ " + strings.Repeat("{'a':", 30000) + " }}",
	"nested ifs":              strings.Repeat("{% if true %}", 20000) + "x" + strings.Repeat("{% endif %}", 20000),
	"nested fors":             strings.Repeat("{% for i in [1] %}", 20000) + "x" + strings.Repeat("{% endfor %}", 20000),
	"unary chain":             "{{ " + strings.Repeat("not ", 60000) + "1 }}",
	"minus chain":             "{{ " + strings.Repeat("- ", 60000) + "1 }}",
	"replace blow-up":         "{% set ns = namespace(s='aaaaaaaaaa') %}{% for i in range(12) %}{% set ns.s = ns.s|replace('a', 'aaaaaaaaaa') %}{% endfor %}{{ ns.s|length }}",
	"join blow-up":            "{{ (range(100000)|list)|join('x' * 1000) }}",
	"indent blow-up":          "{{ ('a\n' * 100000)|indent(60000) }}",
	"wordwrap blow-up":        "{% set ns = namespace(s='a ') %}{% for i in range(30) %}{% set ns.s = (ns.s ~ ns.s)|wordwrap(1) %}{% endfor %}{{ ns.s|length }}",
	"center blow-up":          "{{ 'a'|center(999999999) }}",
	"format width":            "{{ '{:>999999999}'.format('x') }}",
	"format nested width":     "{{ '{:>{w}}'.format('x', w=999999999) }}",
	"format precision":        "{{ '{:5.999999999f}'.format(1.5) }}",
	"percent width":           "{{ '%999999999s' % 'x' }}",
	"upper in a loop":         "{% set ns = namespace(s='a') %}{% for i in range(40) %}{% set ns.s = (ns.s ~ ns.s)|upper %}{% endfor %}{{ ns.s|length }}",
	"repetition":              "{{ 'a' * 999999999 }}",
	"list repetition":         "{{ ([1] * 99999999)|length }}",
	"list concatenation loop": "{% set ns = namespace(l=[1]) %}{% for i in range(40) %}{% set ns.l = ns.l + ns.l %}{% endfor %}{{ ns.l|length }}",
	"string concat loop":      "{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}",
	"nested loops":            "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}",
	"recursive macro":         "{% macro m(n) %}{{ m(n) }}{% endmacro %}{{ m(1) }}",
	"recursive loop":          "{% for x in [1] recursive %}{{ loop([x]) }}{% endfor %}",
	"slow recursive loop":     "{% for i in range(1000) recursive %}{% if loop.depth == 1 %}{{ loop(range(999)) }}{% endif %}{% set x = ('x' * 4000)|upper|lower %}{% endfor %}",
	"slow loop":               "{% for i in range(1000) %}{% for j in range(999) %}{% set x = ('x' * 4000)|upper|lower %}{% endfor %}{% endfor %}",
	"dict keys blow-up":       "{% set ns = namespace(d={}) %}{% for i in range(100000) %}{% set _ = ns.d.update({i: 'x' * 1000}) %}{% endfor %}{{ ns.d|length }}",
	"nested filtered sets":    strings.Repeat("{% set x|replace('=', '') %}", 6000) + strings.Repeat("{% endset %}", 6000),
	"nested sets in brackets": strings.Repeat("{% set x|replace(')', '=') %}", 6000) + strings.Repeat("{% endset %}", 6000),
	"long sum":                "{{ 1" + strings.Repeat("+1", 100000) + " }}",
	"long concatenation":      "{{ 'a'" + strings.Repeat("~'a'", 60000) + " }}",
	"many statements":         strings.Repeat("{% set s = ('x' * 4000000)|upper %}", 600),
	"many method calls":       "{% set s = 'x' * 4000000 %}{{ (" + strings.Repeat("s.upper()|length + ", 1200) + "0) }}",
	"slow filters":            "{% for i in range(1000) %}{{ range(100000)|map('string')|sort|join|length }}{% endfor %}",
	// a 4 MiB string is 4 million items to the filters that list them
	"list of a long string":    "{{ ('x' * 4000000)|list|length }}",
	"sort of a long string":    "{{ ('x' * 4000000)|sort|length }}",
	"reverse of a long string": "{{ ('x' * 4000000)|list|reverse|length }}",
	"unique of a long string":  "{{ ('x' * 4000000)|unique|list|length }}",
	"sum of a long list":       "{% set l = ('ab' * 130000)|list %}{{ l|sum(start='')|length }}",
	// a list of one long string shared a thousand times is cheap to build,
	// and 4 GB as text; so are a method's or a format's repeated fields
	"shared items printed":      "{{ (['x' * 4000000] * 1000)|string|length }}",
	"shared items pprinted":     "{{ (['x' * 4000000] * 1000)|pprint|length }}",
	"shared items formatted":    "{{ '{}'.format(['x' * 4000000] * 1000)|length }}",
	"shared items in Markup":    "{{ ('{}'|safe).format(['x' * 4000000] * 1000)|length }}",
	"shared items concatenated": "{{ (['x' * 4000000] * 1000 ~ 'a')|length }}",
	"format fields blow-up":     "{{ ('{0}' * 1000).format('x' * 4000000)|length }}",
	"percent fields blow-up":    "{{ (('%s' * 1000) % (('x' * 4000000,) * 1000))|length }}",
	"divisibleby formatting":    "{{ ('%s' * 1000) is divisibleby(('x' * 4000000,) * 1000) }}",
	"even of a wide format":     "{{ ('%999999999d' * 2) is even }}",
	"str join blow-up":          "{{ ('x' * 4000000).join(['a'] * 1000)|length }}",
	"expandtabs blow-up":        "{{ ('a\t' * 2000000).expandtabs(1000)|length }}",
	"urlencode of shared pairs": "{{ ([('k', 'x' * 4000000)] * 1000)|urlencode|length }}",
	"join of shared lists":      "{{ ([['x' * 2000000]] * 1000)|join|length }}",
	"xmlattr of shared values":  "{{ dict(a='x' * 3000000, b='x' * 3000000)|xmlattr|length }}",
	"translate blow-up":         "{{ ('a' * 4000000).translate({97: 'x' * 1000})|length }}",
	"split into millions":       "{{ ('x' * 4000000).split('x')|length }}",
	"splitlines into millions":  "{{ ('\\n' * 4000000).splitlines()|length }}",
	"split words into millions": "{{ ('x ' * 2000000).split()|length }}",
	// a tuple holding one tuple twice, 40 levels deep, is 2**40 items to
	// walk: compared, hashed, sorted or converted (exec.ValueItems ends the
	// walk; on a slow machine the render's deadline may be reported first)
	"shared tuples compared": sharedTuples + "{{ ns.t == ns.u }}",
	"shared tuples in":       sharedTuples + "{{ ns.t in [ns.u] }}",
	"shared tuples unique":   sharedTuples + "{{ [ns.t]|unique|list|length }}",
	"shared tuples sorted":   sharedTuples + "{{ [ns.t, ns.u]|sort|length }}",
	"shared tuples grouped":  sharedTuples + "{{ [ns.t, ns.u]|groupby(0)|length }}",
	"shared tuples as JSON":  sharedTuples + "{{ ns.t|tojson|length }}",
	// pprint of a deep value: each level asks whether its repr fits, and
	// its indents grow with the depth
	"deep pprint": "{% set ns = namespace(l=[]) %}{% for i in range(20000) %}{% set ns.l = [ns.l, {'k': 'v'}] %}{% endfor %}{{ ns.l|pprint|length }}",
}

// sharedTuples builds ns.t and ns.u, equal and apart, each a tuple of one
// tuple twice, 40 levels deep.
const sharedTuples = "{% set ns = namespace(t=(1,), u=(1,)) %}{% for i in range(40) %}" +
	"{% set ns.t = (ns.t, ns.t) %}{% set ns.u = (ns.u, ns.u) %}{% endfor %}"

// sizeAttacks are the attacks a size limit stops, before they allocate
// what they ask for: not the render's deadline, which comes too late.
var sizeAttacks = []string{"shared items printed", "shared items pprinted", "shared items formatted",
	"shared items in Markup", "shared items concatenated", "format fields blow-up", "percent fields blow-up",
	"divisibleby formatting", "even of a wide format", "str join blow-up", "expandtabs blow-up", "translate blow-up",
	"urlencode of shared pairs", "join of shared lists", "xmlattr of shared values",
	"split into millions", "splitlines into millions", "split words into millions"}

func TestSizeAttacksFailOnSize(t *testing.T) {
	for _, name := range sizeAttacks {
		t.Run(name, func(t *testing.T) {
			tpl, err := Compile(attacks[name])
			if err == nil {
				_, _, err = tpl.Render(map[string]interface{}{}, testFunctions())
			}
			if err == nil || errors.Is(err, ErrDeadline) || !regexp.MustCompile(`too (large|long)|longer than|more than`).MatchString(err.Error()) {
				t.Errorf("err = %v, want a size limit's", err)
			}
		})
	}
}

func TestAttacksFailCleanly(t *testing.T) {
	for name, src := range attacks {
		t.Run(name, func(t *testing.T) {
			tpl, err := Compile(src)
			if err == nil {
				var out string
				out, _, err = tpl.Render(map[string]interface{}{}, testFunctions())
				if err == nil {
					t.Fatalf("rendered %d bytes, want an error", len(out))
				}
			}
			if _, ok := err.(*Error); !ok {
				t.Errorf("error %T %v is not a template *Error", err, err)
			}
			if strings.Contains(err.Error(), "runtime error") {
				t.Errorf("runtime error: %v", err)
			}
			t.Logf("%s: %v", name, truncateForLog(err.Error()))
		})
	}
}

// Work within every per-step limit (a million iterations of bounded string
// operations, no output; a thousand statements, or thousands of calls in one
// expression, each bounded) still ends at the render's deadline.
func TestRenderDeadline(t *testing.T) {
	for _, name := range []string{"slow loop", "slow recursive loop", "many statements", "many method calls", "slow filters"} {
		t.Run(name, func(t *testing.T) {
			tpl, err := Compile(attacks[name])
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = tpl.Render(map[string]interface{}{}, testFunctions())
			if !errors.Is(err, ErrDeadline) {
				t.Errorf("err = %v, want the render deadline", err)
			}
		})
	}
}

// Compiling has a deadline too (maxTokens bounds its work; a loaded machine
// may still be slow): past it, the template is refused with ErrDeadline.
func TestCompileDeadline(t *testing.T) {
	defer func(limit time.Duration) { compileTimeLimit = limit }(compileTimeLimit)
	compileTimeLimit = 0
	_, err := Compile("{{ 1" + strings.Repeat(" + 1", 200) + " }}")
	if !errors.Is(err, ErrDeadline) {
		t.Errorf("err = %v, want the compile deadline", err)
	}
}

// The bounds are checked on gonja's tokens as its lexer reads them: what is
// inside a string literal is text, whatever brackets or `=` it holds.
func TestTokenBounds(t *testing.T) {
	for src, want := range map[string]string{
		"{{ 1" + strings.Repeat("+1", maxTokens) + " }}":                                                   "more than 10000 tokens",
		"{{ " + strings.Repeat("(", maxNesting+1) + "1" + strings.Repeat(")", maxNesting+1) + " }}":        "brackets nested deeper than 100",
		strings.Repeat("{% if 1 %}", maxNesting+1) + strings.Repeat("{% endif %}", maxNesting+1):           "blocks nested deeper than 100",
		strings.Repeat("{% set x|replace('=', '') %}", maxNesting+1) + strings.Repeat("{% endset %}", 101): "blocks nested deeper than 100",
		strings.Repeat("{% set x = ('(' ~ \"=\") %}", 2*maxNesting) + "{{ x }}":                            "",
		strings.Repeat("{% set x = ({'a': [1]}) %}", 2*maxNesting) + "{{ '((((' ~ x.a[0] }}":               "",
	} {
		_, err := Compile(src)
		switch {
		case want == "" && err != nil:
			t.Errorf("Compile(%.60q...) = %v, want no error", src, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("Compile(%.60q...) = %v, want %q", src, err, want)
		}
	}
}

func truncateForLog(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}
