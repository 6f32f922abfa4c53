package authoring

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every PavProvisioner shipped in examples/ passes, trial render included
// (as `pav validate examples/*/*.yaml`), and so do those the soak, the
// cluster benchmarks and the original PaV's system tests use.
func TestValidateExamples(t *testing.T) {
	files, err := filepath.Glob("../examples/*/*.yaml")
	if err != nil || len(files) < 6 {
		t.Fatalf("examples: %v %v", files, err)
	}
	files = append(files, "../test/soak/testdata/provisioners.yaml", "../test/benchcluster/testdata/provisioners.yaml",
		"../test/upstream/system-tests/provisioner.yaml")
	out, _, err := run(t, newValidateCmd, files...)
	if err != nil || out != "valid\n" {
		t.Errorf("examples: %v\n%s", err, out)
	}
}

const trialBroken = `# a provisioner whose templates compile but fail once evaluated
apiVersion: pav.albertofaria.github.io/v1alpha1
kind: PavProvisioner
metadata:
  name: broken
spec:
  provisioningModes: [Dynamic]
  volumeCreation:
    capacity: "{{ requestedMinCapacity }}"
  volumeDeletion:
    podTemplate: >-
      {% set yaml = true %}{spec: [}
  volumeStaging:
    podTemplate:
      spec:
        containers:
          - name: stage
            image: busybox
            command: [sh, -c, "mkdir /data/volume"]
  volumeUnstaging:
    podTemplate:
      spec:
        containers:
          - name: unstage
            image: busybox
            args:
              - "{{ node.metadata.name.nope() }}"
`

// A trial render finds what only evaluation shows, at its place in the file:
// output that is not YAML, an expression that fails; and warns of a staging
// pod that cannot create /pav/volume.
func TestValidateTrialRender(t *testing.T) {
	f := filepath.Join(t.TempDir(), "broken.yaml")
	if err := os.WriteFile(f, []byte(trialBroken), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := run(t, newValidateCmd, "-f", f)
	if err == nil || !strings.Contains(err.Error(), "3 problem(s)") {
		t.Errorf("error %v, want 3 problems\n%s", err, out)
	}
	for _, want := range []string{
		f + `:11:5: PavProvisioner "broken": spec.volumeDeletion.podTemplate: Invalid value: "{spec: [}": the template set yaml to true but its output is not valid YAML`,
		f + `:27:17: PavProvisioner "broken": spec.volumeUnstaging.podTemplate.spec.containers[0].args[0]: invalid call to method 'nope' of str: unknown method 'nope'`,
		f + `:16:9: warning: PavProvisioner "broken": spec.volumeStaging.podTemplate.spec.containers: Invalid value: no container of the staging pod can create /pav/volume`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// -o json: one object per finding, for CI; the exit status as with text.
func TestValidateJSON(t *testing.T) {
	f := filepath.Join(t.TempDir(), "broken.yaml")
	if err := os.WriteFile(f, []byte(trialBroken), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := run(t, newValidateCmd, "-o", "json", f)
	if err == nil {
		t.Error("no error for a broken provisioner")
	}
	var found []finding
	if err := json.Unmarshal([]byte(out), &found); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if len(found) != 3 {
		t.Fatalf("%d findings, want 3:\n%s", len(found), out)
	}
	if f0 := found[0]; f0.File != f || f0.Line != 11 || f0.Column != 5 || f0.Severity != "error" || !strings.HasPrefix(f0.Message, `PavProvisioner "broken": spec.volumeDeletion.podTemplate`) {
		t.Errorf("first finding %+v", f0)
	}
	if w := found[2]; w.Severity != "warning" || w.Line != 16 {
		t.Errorf("last finding %+v, want the warning", w)
	}
	out, _, err = run(t, newValidateCmd, "-o", "json", "testdata/provisioner.yaml")
	if err != nil || strings.TrimSpace(out) != "[]" {
		t.Errorf("valid file: %v %q", err, out)
	}
}

// A YAML syntax error is at its line in the file, not in its document.
func TestValidateYAMLSyntaxErrorAtFileLine(t *testing.T) {
	f := filepath.Join(t.TempDir(), "two.yaml")
	doc := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n   bad: [x\n"
	if err := os.WriteFile(f, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := run(t, newValidateCmd, f)
	if want := f + ":9: YAML: mapping values are not allowed in this context"; err == nil || strings.TrimSpace(out) != want {
		t.Errorf("output %q (%v), want %q", out, err, want)
	}
}
