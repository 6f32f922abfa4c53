package jinja

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	gonjaexec "github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/tokens"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// TestDifferential renders random templates (gen_test.go) with PaV's engine
// and with real Jinja 3 configured as the original PaV configured it
// (testdata/golden.py --serve), and fails on any difference in output or in
// error/no-error that is not a deliberate divergence (deliberateDivergences).
// It also checks that no render passed PaV's limits (limitsHeld).
//
//	PAV_JINJADIFF_SEED  seed (default 1)
//	PAV_JINJADIFF_N     number of templates (default 2000)
//	PAV_JINJADIFF_ONLY  render only the template of this index (to reproduce one)
//	PAV_JINJADIFF_OUT   write every divergence to this file, one JSON line each, and go on
//	PAV_JINJADIFF_SOURCE compare only this template (with the generator's variables)
//	PAV_JINJADIFF_PENDING report pending divergences (pendingDivergences) too
//	PAV_JINJADIFF_ENABLE features to generate even if pending (comma-separated, or "all")
//
// `make fuzz-jinja N=... SEED=...` runs it longer.
func TestDifferential(t *testing.T) {
	seed := envInt(t, "PAV_JINJADIFF_SEED", 1)
	n := envInt(t, "PAV_JINJADIFF_N", 2000)
	first, last := int64(0), n
	if only := os.Getenv("PAV_JINJADIFF_ONLY"); only != "" {
		first = envInt(t, "PAV_JINJADIFF_ONLY", 0)
		last = first + 1
	}
	disabled := map[string]bool{}
	for feat := range pendingFeatures {
		disabled[feat] = true
	}
	for _, feat := range strings.Split(os.Getenv("PAV_JINJADIFF_ENABLE"), ",") {
		if feat == "all" {
			disabled = map[string]bool{}
		}
		delete(disabled, feat)
	}
	var out *os.File
	if path := os.Getenv("PAV_JINJADIFF_OUT"); path != "" {
		var err error
		if out, err = os.Create(path); err != nil {
			t.Fatal(err)
		}
		defer out.Close()
	}

	o := startOracle(t)
	if src := os.Getenv("PAV_JINJADIFF_SOURCE"); src != "" {
		// one template of one's own, to see what each makes of it
		var vars map[string]interface{}
		if err := utiljson.Unmarshal([]byte(diffVars), &vars); err != nil {
			t.Fatal(err)
		}
		if err := o.send(src); err != nil {
			t.Fatal(err)
		}
		want, err := o.receive()
		if err != nil {
			t.Fatal(err)
		}
		got := renderForDiff(src, vars)
		t.Logf("source: %q\nJinja:  %s\nPaV:    %s\nverdict: %q", src, want, got, compare(want, got, newGen(0, nil)))
		return
	}
	var vars map[string]interface{}
	if err := utiljson.Unmarshal([]byte(diffVars), &vars); err != nil {
		t.Fatal(err)
	}

	type generated struct {
		index  int64
		source string
		gen    *gen
	}
	queue := make(chan generated, 64)
	go func() {
		defer close(queue)
		for i := first; i < last; i++ {
			g := newGen(templateSeed(seed, i), disabled)
			src := g.template()
			if err := o.send(src); err != nil {
				return // the reader reports the oracle's failure
			}
			queue <- generated{i, src, g}
		}
	}()

	var stats struct {
		rendered, jinjaErrors, bothErrors, divergent, deliberate, skipped int
		pending                                                           map[string]int
	}
	stats.pending = map[string]int{}
	start := time.Now()
	for c := range queue {
		want, err := o.receive()
		if err != nil {
			t.Fatalf("oracle: %v", err)
		}
		stats.rendered++
		if stats.rendered%10000 == 0 {
			t.Logf("%d templates, %d fail in both, %d divergent so far", stats.rendered, stats.bothErrors, stats.divergent)
		}
		got := renderForDiff(c.source, vars)
		if msg := limitsHeld(c.source, c.gen.probes, got); msg != "" {
			t.Errorf("template %d (seed %d): a limit did not hold: %s\n%s", c.index, seed, msg, c.source)
		}
		if want.Error != "" {
			stats.jinjaErrors++
			if got.Error != "" {
				stats.bothErrors++
			}
		}
		verdict := compare(want, got, c.gen)
		if out != nil && os.Getenv("PAV_JINJADIFF_OUT_ALL") != "" {
			line, _ := json.Marshal(map[string]interface{}{"index": c.index, "verdict": verdict, "source": c.source, "jinja": want.String(), "pav": got.String()})
			fmt.Fprintf(out, "%s\n", line)
		}
		switch {
		case verdict == "":
			continue
		case strings.HasPrefix(verdict, "skip:"):
			stats.skipped++
			t.Logf("template %d skipped (%s)", c.index, verdict)
			continue
		case strings.HasPrefix(verdict, "deliberate:"):
			stats.deliberate++
			continue
		}
		if p := pending(c.source); p != "" && os.Getenv("PAV_JINJADIFF_PENDING") == "" {
			stats.pending[p]++
			continue
		}
		stats.divergent++
		report := fmt.Sprintf("template %d (PAV_JINJADIFF_SEED=%d PAV_JINJADIFF_ONLY=%d): %s\nsource: %q\nJinja:  %s\nPaV:    %s",
			c.index, seed, c.index, verdict, c.source, want, got)
		if out != nil {
			line, _ := json.Marshal(map[string]interface{}{"index": c.index, "seed": seed, "verdict": verdict, "source": c.source,
				"jinja": want.String(), "pav": got.String()})
			fmt.Fprintf(out, "%s\n", line)
			continue
		}
		t.Error(report)
		if stats.divergent >= 10 {
			t.Fatalf("stopping after %d divergences", stats.divergent)
		}
	}
	if stats.rendered != int(last-first) {
		t.Fatalf("the oracle answered %d of %d templates", stats.rendered, last-first)
	}
	t.Logf("seed %d: %d templates (Jinja %s) in %v: %d fail in Jinja (%d in both, %.1f%%), %d deliberate divergences, %d skipped, %d pending %v, %d divergent",
		seed, stats.rendered, o.version, time.Since(start).Round(time.Millisecond), stats.jinjaErrors, stats.bothErrors,
		100*float64(stats.bothErrors)/float64(max(stats.rendered, 1)), stats.deliberate, stats.skipped,
		sum(stats.pending), stats.pending, stats.divergent)
	if out != nil && stats.divergent > 0 {
		t.Errorf("%d divergences, written to %s", stats.divergent, out.Name())
	}
}

// pendingDivergences are classes of divergence found and not fixed yet: a
// divergent template whose source matches one is counted as pending, not
// failed. Each entry goes once its fix lands (the tester then checks it).
var pendingDivergences = []struct {
	name  string
	match func(src string) bool
}{}

func re(expr string) func(string) bool { return regexp.MustCompile(expr).MatchString }

// both matches what a and b match.
func both(a, b func(string) bool) func(string) bool {
	return func(s string) bool { return a(s) && b(s) }
}

// pending is the pending divergence class src may belong to, or "".
func pending(src string) string {
	for _, p := range pendingDivergences {
		if p.match(src) {
			return p.name
		}
	}
	return ""
}

// pendingFeatures are features of the generator that find divergences
// not fixed yet, each with where it is tracked; the generator leaves them
// out unless PAV_JINJADIFF_ENABLE names them. Empty once they are fixed.
var pendingFeatures = map[string]string{}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func templateSeed(seed, index int64) int64 {
	return int64(uint64(seed)*0x9E3779B97F4A7C15 + uint64(index))
}

func envInt(t *testing.T, name string, def int64) int64 {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, s, err)
	}
	return v
}

// result is one render's outcome, by Jinja or by PaV.
type result struct {
	Output  *string `json:"output"`
	YAML    bool    `json:"yaml"`
	Error   string  `json:"error"`
	Timeout bool    `json:"timeout"`
	// PaV's only
	err     error
	elapsed time.Duration
}

func (r result) String() string {
	switch {
	case r.Timeout:
		return "timed out"
	case r.Error != "":
		return "error: " + r.Error
	case r.Output == nil:
		return "no output"
	}
	return fmt.Sprintf("%q (yaml %v)", *r.Output, r.YAML)
}

func renderForDiff(src string, vars map[string]interface{}) result {
	var r result
	for try := 0; try < 2; try++ {
		begin := time.Now()
		out, isYAML, err := render(src, vars)
		r = result{YAML: isYAML, err: err, elapsed: time.Since(begin)}
		if err == nil {
			r.Output = &out
			return r
		}
		r.Error = err.Error()
		if !errors.Is(err, ErrDeadline) {
			return r
		}
		// out of time on a loaded machine: once more
	}
	r.Timeout = true
	return r
}

// objectAddress is where Python's repr of a method names its object's
// address, which PaV makes up: never the same. Filters may have changed
// its case, wrapped it over lines (with any wrapstring) or quoted it
// (wrappedAddress, matched once only letters and digits are left: a
// 64-bit Linux address begins 0x7f).
var (
	objectAddress  = regexp.MustCompile(`at 0x[0-9a-f]+>`)
	wrappedAddress = regexp.MustCompile(`(?i)0x7f[0-9a-f]{6,}`)
	whitespace     = regexp.MustCompile(`[^0-9A-Za-z]+`)
)

// sameOutput: the outputs are equal but for the objects' addresses.
func sameOutput(jinja, pav string) bool {
	if objectAddress.ReplaceAllString(jinja, "at 0x…>") == objectAddress.ReplaceAllString(pav, "at 0x…>") {
		return true
	}
	unwrapped := func(s string) string {
		return wrappedAddress.ReplaceAllString(whitespace.ReplaceAllString(s, ""), "0x…")
	}
	return wrappedAddress.MatchString(whitespace.ReplaceAllString(jinja, "")) && unwrapped(jinja) == unwrapped(pav)
}

// addressCutShort: the outputs differ only where PaV's holds its made-up
// address (exec.MadeUpAddress), at least two of its characters in a row, and
// Jinja's hex digits, as when a slice or a filter kept only part of a
// method's repr.
func addressCutShort(jinja, pav string) bool {
	j, p := []rune(jinja), []rune(pav)
	if len(j) != len(p) {
		return false
	}
	isAddress := func(i int) bool { return i >= 0 && i < len(p) && strings.ContainsRune("0x7fXF", p[i]) }
	for i := range j {
		if j[i] == p[i] {
			continue
		}
		if !isAddress(i) || !isAddress(i-1) && !isAddress(i+1) || !strings.ContainsRune("0123456789abcdefxABCDEFX", j[i]) {
			return false
		}
	}
	return true
}

// addressSpread: the outputs differ only where PaV's holds its made-up
// address whole, its characters at a fixed stride (a method's repr
// iterated with something between its characters), in either case, and
// Jinja's hex digits.
func addressSpread(jinja, pav string) bool {
	origJ, origP := []rune(jinja), []rune(pav)
	j, p := []rune(strings.ToLower(jinja)), []rune(strings.ToLower(pav))
	if len(j) != len(p) || len(j) != len(origJ) || len(p) != len(origP) {
		return false
	}
	isHex := func(r rune) bool { return strings.ContainsRune("0123456789abcdefx", r) }
	covered := make([]bool, len(p))
	for start := range p {
		if p[start] != '0' || j[start] != '0' {
			continue
		}
		for stride := 1; stride <= 64 && start+(len(gonjaexec.MadeUpAddress)-1)*stride < len(p); stride++ {
			k := 0
			for ; k < len(gonjaexec.MadeUpAddress); k++ {
				if i := start + k*stride; p[i] != rune(gonjaexec.MadeUpAddress[k]) || !isHex(j[i]) {
					break
				}
			}
			if k == len(gonjaexec.MadeUpAddress) {
				for k := range len(gonjaexec.MadeUpAddress) {
					covered[start+k*stride] = true
				}
			}
		}
	}
	for i := range origJ {
		if origJ[i] != origP[i] && !covered[i] {
			return false
		}
	}
	return true
}

// floatNumber is a float as Python prints it.
var floatNumber = regexp.MustCompile(`-?[0-9]+\.[0-9]+(e[-+][0-9]+)?|-?[0-9]+e[-+][0-9]+`)

// floatsAnUlpApart: the outputs differ only in floats, each at most an ulp
// from its counterpart (the deliberate divergence of a float power's last
// digit): an ulp of the larger in magnitude.
func floatsAnUlpApart(jinja, pav string) bool {
	js, ps := floatNumber.FindAllString(jinja, -1), floatNumber.FindAllString(pav, -1)
	if len(js) == 0 || len(js) != len(ps) || floatNumber.ReplaceAllString(jinja, "f") != floatNumber.ReplaceAllString(pav, "f") {
		return false
	}
	for i := range js {
		a, errA := strconv.ParseFloat(js[i], 64)
		b, errB := strconv.ParseFloat(ps[i], 64)
		// an ulp of the larger one: two of the smaller where a and b
		// straddle a power of two (-2**-53 and the float above it)
		larger := math.Max(math.Abs(a), math.Abs(b))
		if errA != nil || errB != nil || math.Abs(a-b) > math.Nextafter(larger, math.Inf(1))-larger {
			return false
		}
	}
	return true
}

// compare says how PaV's result differs from Jinja's: "" when it does not,
// "deliberate: ..." for a deliberate divergence, "skip: ..." when the two
// cannot be compared, else what differs.
func compare(jinja, pav result, g *gen) string {
	switch {
	case jinja.Timeout:
		return "skip: Jinja ran out of time"
	case pav.Timeout:
		return "skip: PaV ran out of time twice"
	case jinja.Error != "" && pav.Error != "":
		return ""
	case jinja.Error != "":
		if d := deliberateInJinja(jinja.Error); d != "" {
			return "deliberate: " + d
		}
		return "Jinja fails, PaV renders"
	case pav.Error != "":
		if d := deliberate(pav.Error, g, jinja); d != "" {
			return "deliberate: " + d
		}
		return "Jinja renders, PaV fails"
	case !sameOutput(*jinja.Output, *pav.Output):
		if floatsAnUlpApart(*jinja.Output, *pav.Output) {
			return "deliberate: Last digit of `**`"
		}
		if d := deliberateInJinja(*jinja.Output); d != "" {
			return "deliberate: " + d
		}
		if g.used[featAddress] && addressCutShort(*jinja.Output, *pav.Output) {
			return "skip: an object's address cut short"
		}
		if g.used[featAddress] && addressSpread(*jinja.Output, *pav.Output) {
			return "skip: an object's address spread out"
		}
		return "outputs differ"
	case jinja.YAML != pav.YAML:
		return "yaml differs"
	}
	return ""
}

// deliberate names the deliberate divergence that explains PaV's error,
// where Jinja rendered, or "".
func deliberate(pavErr string, g *gen, jinja result) string {
	for _, d := range deliberateDivergences {
		for _, s := range d.errContains {
			if !strings.Contains(pavErr, s) {
				continue
			}
			// A limit may only be reached by a construct built to reach it.
			if d.limit && !g.used[featStress] && len(*jinja.Output) <= maxOutputBytes {
				return ""
			}
			return d.name
		}
	}
	return ""
}

// deliberateInJinja names the deliberate divergence that Jinja's error or
// output (where PaV's differs) shows, or "".
func deliberateInJinja(jinja string) string {
	for _, d := range deliberateDivergences {
		for _, s := range d.jinjaContains {
			if strings.Contains(jinja, s) {
				return d.name
			}
		}
	}
	return ""
}

var probeValue = regexp.MustCompile(`^(-?[0-9]+);`)

// limitsHeld checks one PaV render against PaV's limits, independently of
// the code that enforces them: "" if they held, else what was passed.
func limitsHeld(src string, probes []limitProbe, pav result) string {
	if pav.Output != nil && len(*pav.Output) > maxOutputBytes {
		return fmt.Sprintf("output of %d bytes", len(*pav.Output))
	}
	// Not a timing assertion: a render that took four times its deadline
	// and still succeeded was not bounded by it.
	if pav.err == nil && pav.elapsed > 4*maxRenderTime {
		return fmt.Sprintf("rendered in %v, deadline %v", pav.elapsed, maxRenderTime)
	}
	if pav.Output == nil {
		return ""
	}
	count := 0
	depth, deepest := 0, 0
	_, _ = tokens.LexChecked(src, pavConfig, func(tok *tokens.Token) error {
		switch tok.Type {
		case tokens.Whitespace:
			return nil
		case tokens.LeftParenthesis, tokens.LeftBracket, tokens.LeftBrace:
			depth++
			deepest = max(deepest, depth)
		case tokens.RightParenthesis, tokens.RightBracket, tokens.RightBrace:
			depth--
		}
		count++
		return nil
	})
	if count > maxTokens {
		return fmt.Sprintf("compiled %d tokens", count)
	}
	if deepest > maxNesting {
		return fmt.Sprintf("compiled brackets nested %d deep", deepest)
	}
	for _, p := range probes {
		i := strings.Index(*pav.Output, p.marker)
		if i < 0 {
			return fmt.Sprintf("probe %s (%s) missing from the output", p.marker, p.what)
		}
		m := probeValue.FindStringSubmatch((*pav.Output)[i+len(p.marker):])
		if m == nil {
			return fmt.Sprintf("probe %s (%s) printed no number", p.marker, p.what)
		}
		if v, _ := strconv.ParseInt(m[1], 10, 64); v > p.max {
			return fmt.Sprintf("%s: %d, limit %d", p.what, v, p.max)
		}
	}
	return ""
}

// ---------------------------------------------------------------- the oracle

// oracle is one long-lived python3 running testdata/golden.py --serve.
type oracle struct {
	cmd     *exec.Cmd
	in      *bufio.Writer
	stdin   interface{ Close() error }
	out     *bufio.Reader
	version string
}

// startOracle starts the oracle; without Jinja it installs Debian's
// python3-jinja2 (as root), else skips, or fails when CI is set.
func startOracle(t *testing.T) *oracle {
	python, err := jinjaPython()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no Jinja to compare with: %v", err)
		}
		t.Skipf("no Jinja to compare with: %v", err)
	}
	cmd := exec.Command(python, "testdata/golden.py", "--serve")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	o := &oracle{cmd: cmd, in: bufio.NewWriter(stdin), stdin: stdin, out: bufio.NewReaderSize(stdout, 1<<20)}
	t.Cleanup(func() {
		_ = o.stdin.Close()
		_ = cmd.Wait()
	})
	line, err := o.out.ReadBytes('\n')
	if err != nil {
		t.Fatalf("oracle %s: %v", python, err)
	}
	var hello struct{ Jinja, Python string }
	if err := json.Unmarshal(line, &hello); err != nil {
		t.Fatalf("oracle said %q: %v", line, err)
	}
	o.version = hello.Jinja
	t.Logf("oracle: Jinja %s on Python %s (%s)", hello.Jinja, hello.Python, python)
	return o
}

// jinjaPython is a python3 that imports jinja2: the one on PATH, else
// Debian's (installed with apt-get if missing, as root).
func jinjaPython() (string, error) {
	candidates := []string{"python3", "/usr/bin/python3"}
	for _, py := range candidates {
		if exec.Command(py, "-c", "import jinja2").Run() == nil {
			return py, nil
		}
	}
	if os.Geteuid() != 0 {
		return "", errors.New("python3 cannot import jinja2, and installing Debian's python3-jinja2 needs root")
	}
	install := func() error {
		cmd := exec.Command("apt-get", "install", "-y", "--no-install-recommends", "python3-jinja2")
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("apt-get install python3-jinja2: %v: %s", err, out)
		}
		return nil
	}
	if install() != nil {
		if out, err := exec.Command("apt-get", "update").CombinedOutput(); err != nil {
			return "", fmt.Errorf("apt-get update: %v: %s", err, out)
		}
		if err := install(); err != nil {
			return "", err
		}
	}
	if err := exec.Command("/usr/bin/python3", "-c", "import jinja2").Run(); err != nil {
		return "", fmt.Errorf("python3-jinja2 installed, but /usr/bin/python3 cannot import jinja2: %v", err)
	}
	return "/usr/bin/python3", nil
}

func (o *oracle) send(src string) error {
	line, err := json.Marshal(map[string]interface{}{"source": src, "vars": json.RawMessage(diffVars)})
	if err != nil {
		return err
	}
	if _, err := o.in.Write(append(line, '\n')); err != nil {
		return err
	}
	return o.in.Flush()
}

func (o *oracle) receive() (result, error) {
	line, err := o.out.ReadBytes('\n')
	if err != nil {
		return result{}, err
	}
	var r result
	if err := json.Unmarshal(line, &r); err != nil {
		return result{}, fmt.Errorf("%q: %v", line, err)
	}
	return r, nil
}

// TestLimitsHeldFindsViolations: the differential tester's check of PaV's
// limits fails on a render that passed one.
func TestLimitsHeldFindsViolations(t *testing.T) {
	out := func(s string) result { return result{Output: &s} }
	probe := []limitProbe{{marker: "probe1=", max: maxListItems, what: "list items"}}
	for name, c := range map[string]struct {
		src    string
		probes []limitProbe
		pav    result
	}{
		"output":   {"{{ x }}", nil, out(strings.Repeat("x", maxOutputBytes+1))},
		"probe":    {"{{ x }}", probe, out(fmt.Sprintf("probe1=%d;", maxListItems+1))},
		"no probe": {"{{ x }}", probe, out("")},
		"tokens":   {strings.Repeat("{{ 1 }}", maxTokens/3+1), nil, out("")},
		"brackets": {"{{ " + strings.Repeat("(", maxNesting+1) + "1" + strings.Repeat(")", maxNesting+1) + " }}", nil, out("1")},
		"deadline": {"{{ x }}", nil, result{Output: new(string), elapsed: 5 * maxRenderTime}},
	} {
		if msg := limitsHeld(c.src, c.probes, c.pav); msg == "" {
			t.Errorf("%s: a passed limit went unnoticed", name)
		}
	}
	if msg := limitsHeld("{{ x }}", probe, out(fmt.Sprintf("probe1=%d;", maxListItems))); msg != "" {
		t.Errorf("a render within the limits: %s", msg)
	}
}

// TestCompareForgivesOnlyAddresses: the tester takes outputs that differ in
// an object's address, whole or cut short (only for a template that
// printed a method's repr), and nothing else.
func TestCompareForgivesOnlyAddresses(t *testing.T) {
	out := func(s string) result { return result{Output: &s} }
	printedMethod := &gen{used: map[string]bool{featAddress: true}}
	plain := &gen{used: map[string]bool{}}
	spread := func(s string) string { return strings.Join(strings.Split(s, ""), "1") } // as |join('1')
	wide := func(s string) string { return strings.Join(strings.Split(s, ""), "None5:1a2.5NoneTrue") }
	for _, c := range []struct {
		jinja, pav string
		g          *gen
		same       bool
	}{
		{"<built-in method upper of str object at 0x7f3a5c1e20f0>", "<built-in method upper of str object at 0x7f0000000000>", plain, true},
		{"f0>", "00>", printedMethod, true},
		{"a5c1e20f0>x", "a7f0000000>x", printedMethod, false}, // not the same length
		{"f0>", "00>", plain, false},
		{"[3a5c]", "[0000]", printedMethod, true},
		{"g0>", "00>", printedMethod, false}, // not a hex digit in Jinja's
		{"1.5", "1.0", printedMethod, false}, // 5 is no character of PaV's address
		{spread("<at 0x7f35ecaa1890>"), spread("<at 0x7f0000000000>"), printedMethod, true},
		{spread("<at 0x7f35ecaa1890>"), spread("<at 0x7f0000000000>"), plain, false},
		{spread("<at 0x7f35ecaa1890>") + "2", spread("<at 0x7f0000000000>") + "0", printedMethod, false}, // a 2 after the address
		{spread("<at 0x7f35ecaa189>"), spread("<at 0x7f000000000>"), printedMethod, false},               // not all of it
		{"0x7f3151e1c1a1", "0x7f0000000000", printedMethod, true},
		{"0x7f3151e1c1ag", "0x7f0000000000", printedMethod, false},                                                        // not a hex digit
		{strings.ToUpper(wide("<at 0x7f35ecaa1890>")), strings.ToUpper(wide("<at 0x7f0000000000>")), printedMethod, true}, // |upper, far apart
		{wide("<at 0x7f35ecaa1890>") + "A", wide("<at 0x7f0000000000>") + "a", printedMethod, false},                      // case elsewhere
	} {
		verdict := compare(out(c.jinja), out(c.pav), c.g)
		if same := verdict == "" || strings.HasPrefix(verdict, "skip:"); same != c.same {
			t.Errorf("compare(%q, %q, address printed %v) = %q, want same=%v", c.jinja, c.pav, c.g.used[featAddress], verdict, c.same)
		}
	}
}

// TestFloatsAnUlpApart: a float power's last digit is forgiven up to an ulp
// of the larger float, and nothing more.
func TestFloatsAnUlpApart(t *testing.T) {
	for _, c := range []struct {
		jinja, pav string
		same       bool
	}{
		{"x3.6000000000000004e-09", "x3.6e-09", true},
		{"-1.1102230246251565e-16b", "-1.1102230246251563e-16b", true}, // -2**-53 and the float above it: 2 ulps of the smaller
		{"0.1", "0.10000000000000003", false},                          // 2 ulps
		{"1.5", "1.0", false},
		{"1.5a", "1.5b", false},
	} {
		if got := floatsAnUlpApart(c.jinja, c.pav); got != c.same {
			t.Errorf("floatsAnUlpApart(%q, %q) = %v, want %v", c.jinja, c.pav, got, c.same)
		}
	}
}
