package templating

import (
	"fmt"
	"strings"
	"testing"
)

// spec.inlineVolumePolicy as the webhook checks it: only with
// inlineVolumes, names as label keys (none of kubelet's) once each,
// patterns that compile, bounded lengths and counts, defaults that fit.
func TestInlineVolumePolicyValidation(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      []string
	}{
		{name: "valid", doc: `
inlineVolumes: true
inlineVolumePolicy:
  attributes:
    - {name: size, pattern: "[0-9]+Mi", maxLength: 6, default: 16Mi}
    - {name: example.com/tier, enum: [fast, safe], required: true}
  namespaceSelector: {matchLabels: {inline: "yes"}}
  maxVolumesPerPod: 2
  maxVolumesPerNamespace: 20
`},
		{name: "without inlineVolumes", doc: `
inlineVolumePolicy: {attributes: [{name: size}]}
`, want: []string{"spec.inlineVolumePolicy: Forbidden: only with spec.inlineVolumes: true"}},
		{name: "bad declarations", doc: `
inlineVolumes: true
inlineVolumePolicy:
  attributes:
    - {name: "not a key", pattern: "("}
    - {name: csi.storage.k8s.io/pod.name}
    - {name: size, enum: [a, b], default: c}
    - {name: size, maxLength: 5000}
    - {name: tier, pattern: "[a-z]+", default: "X"}
    - {name: req, required: true, default: x}
  namespaceSelector: {matchExpressions: [{key: a, operator: Nope}]}
  maxVolumesPerPod: 0
`, want: []string{
			`spec.inlineVolumePolicy.attributes[0].name: Invalid value: "not a key"`,
			`spec.inlineVolumePolicy.attributes[0].pattern: Invalid value: "("`,
			`spec.inlineVolumePolicy.attributes[1].name: Invalid value: "csi.storage.k8s.io/pod.name": keys under csi.storage.k8s.io/ are kubelet's`,
			`spec.inlineVolumePolicy.attributes[2].default: Invalid value: "c": it must be one of "a", "b"`,
			`spec.inlineVolumePolicy.attributes[3].maxLength: Invalid value: 5000`,
			`spec.inlineVolumePolicy.attributes[3].name: Duplicate value: "size"`,
			`spec.inlineVolumePolicy.attributes[4].default: Invalid value: "X": it must match the pattern "[a-z]+"`,
			`spec.inlineVolumePolicy.attributes[5].default: Invalid value: "x": a required attribute has no default`,
			`spec.inlineVolumePolicy.maxVolumesPerPod: Invalid value: 0`,
			`spec.inlineVolumePolicy.namespaceSelector: Invalid value`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := errorStrings(Validate(provisioner(t, withSection(tc.doc))))
			if len(got) != len(tc.want) {
				t.Fatalf("errors:\n%s\nwant %d", strings.Join(got, "\n"), len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("error %d = %q, want it to contain %q", i, got[i], w)
				}
			}
		})
	}
}

// A pattern matches the whole value, not a part of it.
func TestInlineAttributesWholeMatch(t *testing.T) {
	pol := provisioner(t, withSection(`
inlineVolumes: true
inlineVolumePolicy: {attributes: [{name: size, pattern: "[0-9]+"}]}
`)).Spec.InlineVolumePolicy
	if _, err := InlineAttributes(pol, map[string]string{"size": "12; rm -rf /"}); err == nil {
		t.Error("a value with a matching prefix was accepted")
	}
	if got, err := InlineAttributes(pol, map[string]string{"size": "12"}); err != nil || got["size"] != "12" {
		t.Errorf("got %v, %v", got, err)
	}
}

// However many attributes a pod has, the message stays short.
func TestInlineAttributesMessageBounded(t *testing.T) {
	attrs := map[string]string{}
	for i := range 1000 {
		attrs[strings.Repeat("k", 300)+string(rune('a'+i%26))+strings.Repeat("x", i%7)] = "v"
	}
	_, err := InlineAttributes(nil, attrs)
	if err == nil || len(err.Error()) > 1024 || !strings.Contains(err.Error(), "more") {
		t.Fatalf("error of %d bytes: %.200v", len(fmt.Sprint(err)), err)
	}
}
