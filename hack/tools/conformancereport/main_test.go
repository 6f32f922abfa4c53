package main

import (
	"reflect"
	"strings"
	"testing"
)

// A JUnit report as ginkgo writes it: a setup node, a passed, a failed, an interrupted test,
// two skipped by the suite for one reason, and one filtered out by the focus.
const report = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="7" disabled="1" errors="1" failures="1" time="100">
  <testsuite name="Kubernetes e2e suite" tests="7">
    <testcase name="[SynchronizedBeforeSuite]" classname="Kubernetes e2e suite" status="passed" time="3"></testcase>
    <testcase name="[It] External Storage [Driver: host-directory] [Testpattern: Dynamic PV (default fs)] volumes should store data" classname="Kubernetes e2e suite" status="passed" time="60"></testcase>
    <testcase name="[It] External Storage [Driver: host-directory] [Testpattern: Dynamic PV (default fs)] capacity provides storage capacity information" classname="Kubernetes e2e suite" status="failed" time="300">
      <failure message="[FAILED] no CSIStorageCapacity objects&#xA;more detail" type="failed">full text</failure>
    </testcase>
    <testcase name="[It] External Storage [Driver: host-directory] [Testpattern: Dynamic PV (default fs)] subPath should support non-existent path" classname="Kubernetes e2e suite" status="interrupted" time="20">
      <error message="interrupted by timeout" type="interrupted"></error>
    </testcase>
    <testcase name="[It] External Storage [Driver: host-directory] [Testpattern: Dynamic PV (block volmode)] volumes should store data" classname="Kubernetes e2e suite" status="skipped" time="0.1">
      <skipped message="skipped - Driver host-directory doesn&#39;t support Block -- skipping"></skipped>
    </testcase>
    <testcase name="[It] External Storage [Driver: host-directory] [Testpattern: Dynamic PV (block volmode)] volumes should allow exec of files on the volume" classname="Kubernetes e2e suite" status="skipped" time="0.1">
      <skipped message="skipped - Driver host-directory doesn&#39;t support Block -- skipping"></skipped>
    </testcase>
    <testcase name="[It] External Storage [Driver: host-directory] [Testpattern: Dynamic PV (default fs)] disruptive should stop kubelet [Disruptive]" classname="Kubernetes e2e suite" status="skipped" time="0">
      <skipped message="skipped"></skipped>
    </testcase>
  </testsuite>
</testsuites>`

func TestSummarize(t *testing.T) {
	s, err := summarize("host-directory", strings.NewReader(report))
	if err != nil {
		t.Fatal(err)
	}
	want := &summary{
		Example: "host-directory",
		Passed:  []string{"[Testpattern: Dynamic PV (default fs)] volumes should store data"},
		Failed: []failure{
			{"[Testpattern: Dynamic PV (default fs)] capacity provides storage capacity information", "failed: [FAILED] no CSIStorageCapacity objects"},
			{"[Testpattern: Dynamic PV (default fs)] subPath should support non-existent path", "interrupted: interrupted by timeout"},
		},
		Skipped: map[string][]string{"Driver host-directory doesn't support Block -- skipping": {
			"[Testpattern: Dynamic PV (block volmode)] volumes should store data",
			"[Testpattern: Dynamic PV (block volmode)] volumes should allow exec of files on the volume",
		}},
		Duration: 380,
	}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("got  %+v\nwant %+v", s, want)
	}

	var b strings.Builder
	write(&b, []*summary{s})
	for _, line := range []string{
		"| host-directory | 1 | 2 | 2 | 6 min |",
		"- `[Testpattern: Dynamic PV (default fs)] capacity provides storage capacity information`: failed: [FAILED] no CSIStorageCapacity objects",
		"| Driver host-directory doesn't support Block -- skipping | 2 |",
	} {
		if !strings.Contains(b.String(), line+"\n") {
			t.Errorf("the Markdown lacks line %q:\n%s", line, b.String())
		}
	}
}

func TestSummarizeRefusesGarbage(t *testing.T) {
	if _, err := summarize("x", strings.NewReader("not xml")); err == nil {
		t.Error("no error for a report that is not XML")
	}
}
