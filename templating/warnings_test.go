package templating

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWarningsNameUnknownVariables(t *testing.T) {
	p := provisioner(t, minimalNoCreation+`  volumeCreation:
    capacity: "{{ requestedMinCapcity }}"
  volumeExpansion:
    podTemplate:
      spec:
        containers:
          - name: c
            image: "{{ params.image }}"
            command: ["{{ capacity }}", "{% set x = 1 %}{{ x }}{{ frobnicate }}", "{{ node.metadata.name }}"]
  volumeModification:
    podTemplate:
      spec:
        containers:
          - name: c
            image: img
            command: ["{{ currentMutableParams.a }}{{ mutableParams.b }}{{ vac.metadata.name }}{{ currentVac }}", "{{ newParams }}"]
`)
	if errs := Validate(p); len(errs) > 0 {
		t.Fatalf("unknown names must not be errors: %v", errs)
	}
	got := []string{}
	for _, w := range Warnings(p) {
		got = append(got, w.Field+": "+w.Detail)
	}
	want := []string{
		"spec.volumeCreation.capacity: template line 1, column 4: 'requestedMinCapcity' is not a variable of volumeCreation's context (did you mean 'requestedMinCapacity'?)",
		"spec.volumeExpansion.podTemplate.spec.containers[0].command[1]: template line 1, column 26: 'frobnicate' is not a variable of volumeExpansion's context",
		// node is staging's, not expansion's
		"spec.volumeExpansion.podTemplate.spec.containers[0].command[2]: template line 1, column 4: 'node' is not a variable of volumeExpansion's context",
		"spec.volumeModification.podTemplate.spec.containers[0].command[1]: template line 1, column 4: 'newParams' is not a variable of volumeModification's context",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// The examples use only their phases' variables.
func TestExamplesHaveNoWarnings(t *testing.T) {
	files, _ := filepath.Glob("../examples/*/provisioner*.yaml")
	if len(files) == 0 {
		t.Fatal("no examples found")
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if w := Warnings(provisioner(t, string(data))); len(w) > 0 {
			t.Errorf("%s: %v", f, w.ToAggregate())
		}
	}
}
