package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/klog/v2"
)

// loggingChildEnv makes the test binary a child that parses its arguments
// as `pav node`'s logging flags, applies them and logs one line at V(3).
const loggingChildEnv = "PAV_TEST_LOGGING_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(loggingChildEnv) != "" {
		loggingChild(strings.Fields(os.Getenv(loggingChildEnv)))
		return
	}
	os.Exit(m.Run())
}

func loggingChild(args []string) {
	cmd := &cobra.Command{Use: "child", RunE: func(*cobra.Command, []string) error { return nil }}
	c := addLoggingFlags(cmd.Flags())
	cmd.SetGlobalNormalizationFunc(cliflag.WordSepNormalizeFunc)
	if err := cmd.ParseFlags(args); err != nil {
		os.Stdout.WriteString("parse: " + err.Error() + "\n")
		os.Exit(2)
	}
	if err := applyLogging(c); err != nil {
		os.Stdout.WriteString("apply: " + err.Error() + "\n")
		os.Exit(2)
	}
	klog.V(3).InfoS("Logging works", "key", "value")
	klog.Flush()
	os.Exit(0)
}

// runLoggingChild runs the child with args and returns what it wrote.
func runLoggingChild(t *testing.T, args string) (string, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), loggingChildEnv+"="+args)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestLoggingFormatJSON: --logging-format=json makes every line a JSON
// object with the message and its keys; -v is honoured.
func TestLoggingFormatJSON(t *testing.T) {
	out, err := runLoggingChild(t, "--logging-format=json -v=3")
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var found bool
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("not a JSON line: %q (%v)", sc.Text(), err)
		}
		if line["msg"] == "Logging works" && line["key"] == "value" {
			found = true
		}
	}
	if !found {
		t.Errorf("no JSON line with the message and its key in:\n%s", out)
	}
}

// TestLoggingFlagsDashesAndUnderscores: the text format by default;
// klog's underscore spellings and its dropped flags still parse; an
// unknown format is refused with the formats there are.
func TestLoggingFlagsDashesAndUnderscores(t *testing.T) {
	out, err := runLoggingChild(t, "--v=3 --log_flush_frequency=3s --logtostderr=true")
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(out, `"Logging works" key="value"`) || json.Valid(bytes.TrimSpace([]byte(out))) {
		t.Errorf("want klog's text line, got:\n%s", out)
	}
	out, err = runLoggingChild(t, "--logging-format=xml")
	if err == nil || !strings.Contains(out, "Unsupported log format") {
		t.Errorf("--logging-format=xml: want a refusal, got %v:\n%s", err, out)
	}
}
