// Command conformancereport summarizes the storage conformance suite's JUnit reports (ginkgo's,
// written by hack/cluster/conformance.sh into DIR/<example>/junit.xml) as Markdown: per example
// the tests that ran, passed and failed, the tests the suite skipped grouped by its reason, and
// each failure with the first line of its message.
//
//	conformancereport DIR EXAMPLE...
//
// Specs the focus or skip filtered out are not counted (ginkgo reports them as skipped without a
// reason). It exits 1 if a test failed or a report is missing.
package main

import (
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// The parts of ginkgo's JUnit report read here (github.com/onsi/ginkgo/v2/reporters).
type junitReport struct {
	Suites []struct {
		Cases []junitCase `xml:"testcase"`
	} `xml:"testsuite"`
}

type junitCase struct {
	Name    string   `xml:"name,attr"`
	Status  string   `xml:"status,attr"`
	Time    float64  `xml:"time,attr"`
	Skipped *message `xml:"skipped"`
	Failure *message `xml:"failure"`
	Error   *message `xml:"error"`
}

type message struct {
	Message string `xml:"message,attr"`
}

// summary is one example's results.
type summary struct {
	Example  string
	Passed   []string
	Failed   []failure
	Skipped  map[string][]string // reason -> tests
	Duration float64             // seconds, of the tests that ran
}

type failure struct{ Test, Message string }

// driverPrefix is the start of every test name of the external storage suite.
var driverPrefix = regexp.MustCompile(`^(\[It\] )?External Storage \[Driver: [^]]*\] `)

func summarize(example string, r io.Reader) (*summary, error) {
	var rep junitReport
	if err := xml.NewDecoder(r).Decode(&rep); err != nil {
		return nil, fmt.Errorf("decoding the JUnit report: %w", err)
	}
	s := &summary{Example: example, Skipped: map[string][]string{}}
	for _, suite := range rep.Suites {
		for _, c := range suite.Cases {
			if !driverPrefix.MatchString(c.Name) {
				continue // the suite's setup and teardown nodes
			}
			name := driverPrefix.ReplaceAllString(c.Name, "")
			switch c.Status {
			case "passed":
				s.Passed = append(s.Passed, name)
			case "skipped", "pending":
				// "skipped - REASON" if the test called Skip; plain "skipped" if filtered out
				reason, ok := strings.CutPrefix(c.Skipped.text(), "skipped - ")
				if !ok {
					continue
				}
				reason = firstLine(reason)
				s.Skipped[reason] = append(s.Skipped[reason], name)
			default: // failed, panicked, interrupted, timedout, aborted
				msg := c.Failure.text()
				if msg == "" {
					msg = c.Error.text()
				}
				s.Failed = append(s.Failed, failure{name, c.Status + ": " + firstLine(msg)})
			}
			if c.Status != "skipped" && c.Status != "pending" {
				s.Duration += c.Time
			}
		}
	}
	sort.Strings(s.Passed)
	sort.Slice(s.Failed, func(i, j int) bool { return s.Failed[i].Test < s.Failed[j].Test })
	return s, nil
}

func (m *message) text() string {
	if m == nil {
		return ""
	}
	return m.Message
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

func (s *summary) skippedCount() int {
	n := 0
	for _, tests := range s.Skipped {
		n += len(tests)
	}
	return n
}

func write(w io.Writer, sums []*summary) {
	fmt.Fprintln(w, "| example | passed | failed | skipped | time of the tests run |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, s := range sums {
		fmt.Fprintf(w, "| %s | %d | %d | %d | %.0f min |\n", s.Example, len(s.Passed), len(s.Failed), s.skippedCount(), s.Duration/60)
	}
	for _, s := range sums {
		fmt.Fprintf(w, "\n### %s\n\n", s.Example)
		if len(s.Failed) > 0 {
			fmt.Fprintln(w, "Failed:")
			fmt.Fprintln(w)
			for _, f := range s.Failed {
				fmt.Fprintf(w, "- `%s`: %s\n", f.Test, strings.ReplaceAll(f.Message, "|", `\|`))
			}
			fmt.Fprintln(w)
		}
		fmt.Fprintln(w, "Passed:")
		fmt.Fprintln(w)
		for _, t := range s.Passed {
			fmt.Fprintf(w, "- `%s`\n", t)
		}
		reasons := make([]string, 0, len(s.Skipped))
		for r := range s.Skipped {
			reasons = append(reasons, r)
		}
		sort.Strings(reasons)
		if len(reasons) > 0 {
			fmt.Fprintln(w)
			fmt.Fprintln(w, "| skipped by the suite, because | tests |")
			fmt.Fprintln(w, "|---|---|")
			for _, r := range reasons {
				fmt.Fprintf(w, "| %s | %d |\n", strings.ReplaceAll(r, "|", `\|`), len(s.Skipped[r]))
			}
		}
	}
}

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: conformancereport DIR EXAMPLE...")
		os.Exit(2)
	}
	var sums []*summary
	failed := false
	for _, ex := range os.Args[2:] {
		f, err := os.Open(filepath.Join(os.Args[1], ex, "junit.xml"))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			failed = true
			continue
		}
		s, err := summarize(ex, f)
		f.Close()
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", ex, err)
			failed = true
			continue
		}
		failed = failed || len(s.Failed) > 0
		sums = append(sums, s)
	}
	write(os.Stdout, sums)
	if failed {
		os.Exit(1)
	}
}
