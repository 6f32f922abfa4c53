package templating

import (
	"context"
	"slices"
	"strings"
	"testing"
)

func trialOf(t *testing.T, doc string) (errs, warnings []string) {
	t.Helper()
	c, err := Compile(provisioner(t, doc))
	if err != nil {
		t.Fatalf("does not compile: %v", err)
	}
	e, w := c.Trial(context.Background())
	return errorStrings(e), errorStrings(w)
}

// A staging pod's section, its container running script.
func stagingWith(container string) string {
	return `
apiVersion: pav.albertofaria.github.io/v1alpha1
kind: PavProvisioner
metadata:
  name: test
spec:
  provisioningModes: [Dynamic]
  volumeCreation:
    capacity: 1Gi
  volumeStaging:
    podTemplate:
      spec:
        containers:
` + indent(container, "          ")
}

// What compiles but fails once evaluated is an error at its field: output
// that is not YAML, a pod PaV refuses, an expression that fails.
func TestTrialFindsEvaluationErrors(t *testing.T) {
	for _, tt := range []struct{ name, section, want string }{
		{"output not YAML", `
volumeDeletion:
  podTemplate: "{% set yaml = true %}{spec: [}"`, "spec.volumeDeletion.podTemplate: Invalid value"},
		{"invalid pod", `
volumeExpansion:
  podTemplate:
    spec:
      restartPolicy: "{{ 'Always' }}"
      containers: [{name: grow, image: busybox}]`, "spec.volumeExpansion.podTemplate.spec.restartPolicy: Forbidden"},
		{"expression error", `
volumeUnstaging:
  podTemplate:
    spec:
      containers: [{name: x, image: "{{ node.metadata.name.nope() }}"}]`, "spec.volumeUnstaging.podTemplate.spec.containers[0].image"},
		{"capacity not a quantity", `
topologyKeys: [kubernetes.io/hostname]
storageCapacity:
  capacity: "{{ nodeName }}"`, "spec.storageCapacity.capacity"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			errs, _ := trialOf(t, withSection(tt.section))
			if len(errs) != 1 || !strings.Contains(errs[0], tt.want) {
				t.Errorf("errors %q, want one saying %q", errs, tt.want)
			}
		})
	}
}

// Class parameters are unknown offline: those a template needs get values;
// a name the context lacks still fails.
func TestTrialGivesParametersValues(t *testing.T) {
	errs, _ := trialOf(t, withSection(`
volumeDeletion:
  podTemplate:
    metadata:
      namespace: "{{ params.namespace }}"
    spec:
      containers: [{name: rm, image: "{{ params.image }}", args: ["{{ get_pvc(params.inner, pvc.metadata.namespace).spec.resources.requests.storage }}"]}]
snapshotDeletion:
  podTemplate:
    spec:
      nodeName: "{{ snapshotHandle.split('/')[0] }}"
      containers: [{name: rm, image: busybox, args: ["{{ snapshotParams.where }}", "{{ snapshot.metadata.annotations['x'] | default('') }}"]}]`))
	if len(errs) != 0 {
		t.Errorf("errors %q", errs)
	}
	errs, _ = trialOf(t, withSection(`
volumeDeletion:
  podTemplate:
    spec:
      containers: [{name: rm, image: "{{ pvc.metadata.nmae }}"}]`))
	if len(errs) != 1 || !strings.Contains(errs[0], "has no attribute 'nmae'") {
		t.Errorf("errors %q, want the misspelt attribute", errs)
	}
}

func TestTrialWarnsOfAStagingPodThatCannotCreateTheVolume(t *testing.T) {
	for _, tt := range []struct {
		name, container string
		warn            bool
	}{
		{"script without /pav", "- {name: s, image: busybox, command: [/bin/sh, -c, 'mkdir /data/volume']}", true},
		{"script in args", "- {name: s, image: busybox, command: [bash], args: [-c, 'echo hi']}", true},
		{"script writing /pav/volume", "- {name: s, image: busybox, command: [sh, -c, 'mkdir /pav/volume']}", false},
		{"path in the environment", "- {name: s, image: busybox, command: [sh, -c, 'mkdir $OUT'], env: [{name: OUT, value: /pav/volume}]}", false},
		{"image's entrypoint", "- {name: s, image: busybox}", false},
		{"another program", "- {name: s, image: busybox, command: [/usr/bin/stager]}", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			errs, warnings := trialOf(t, stagingWith(tt.container))
			if len(errs) > 0 {
				t.Fatalf("errors %q", errs)
			}
			got := slices.ContainsFunc(warnings, func(w string) bool { return strings.Contains(w, "can create /pav/volume") })
			if got != tt.warn || len(warnings) > 1 {
				t.Errorf("warnings %q, want a warning: %v", warnings, tt.warn)
			}
		})
	}
}

// An inline volume's context has no claim: a creation that needs one fails
// for every inline volume, and says so.
func TestTrialInlineVolumes(t *testing.T) {
	doc := withSection(`
inlineVolumes: true
volumeDeletion:
  podTemplate:
    metadata:
      namespace: "{{ pvc.metadata.namespace }}"
    spec:
      containers: [{name: rm, image: busybox}]`)
	errs, _ := trialOf(t, doc)
	if len(errs) != 1 || !strings.Contains(errs[0], "spec.volumeDeletion.podTemplate.metadata.namespace") || !strings.HasSuffix(errs[0], "(for an inline volume)") {
		t.Errorf("errors %q, want the inline deletion's", errs)
	}
	errs, _ = trialOf(t, strings.Replace(doc, "pvc.metadata.namespace", "inlinePod.namespace if inlinePod is defined else pvc.metadata.namespace", 1))
	if len(errs) != 0 {
		t.Errorf("errors %q", errs)
	}
}

// A template that fails in static and dynamic validation alike is one problem.
func TestTrialReportsAProblemOnce(t *testing.T) {
	errs, _ := trialOf(t, minimal+`  volumeValidation:
    maxCapacity: "{{ requestedMinCapacity.nope() }}"
`)
	if len(errs) != 1 {
		t.Errorf("errors %q, want one", errs)
	}
}
