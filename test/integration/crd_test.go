//go:build integration

package integration

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/albertofaria/pav/crds/v1alpha1"
)

// The CRD's own rules (crds/pavprovisioners.yaml: required fields, enums, list
// bounds, the CEL rule on the name, the status conditions' schema), which hold
// with no PaV process running: a real API server applies them, and its error
// names the field.
func TestCRDValidation(t *testing.T) {
	e := newEnv(t)
	staging := map[string]any{"podTemplate": map[string]any{}}
	n := 0
	name := func() string { n++; return fmt.Sprintf("crd%d-%s", n, e.ns) }
	create := func(body map[string]any) error {
		raw, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		err = e.client.PavV1alpha1().RESTClient().Post().Resource(v1alpha1.Plural).Body(raw).Do(e.ctx).Error()
		if err == nil {
			e.forceDeleteProvisioner(body["metadata"].(map[string]any)["name"].(string))
		}
		return err
	}
	object := func(name string, spec map[string]any) map[string]any {
		o := map[string]any{"apiVersion": v1alpha1.SchemeGroupVersion.String(), "kind": "PavProvisioner",
			"metadata": map[string]any{"name": name}}
		if spec != nil {
			o["spec"] = spec
		}
		return o
	}
	withModes := func(modes ...any) map[string]any {
		if modes == nil {
			modes = []any{} // an empty list, not null
		}
		return map[string]any{"provisioningModes": modes, "volumeStaging": staging}
	}

	for _, tt := range []struct {
		name string
		obj  map[string]any
		want []string // in the error, in this order; none: accepted
	}{
		{"both modes", object(name(), withModes("Dynamic", "Static")), nil},
		{"one mode", object(name(), withModes("Static")), nil},
		{"name with a dot", object("a.b-"+e.ns[:min(len(e.ns), 40)], withModes("Dynamic")), []string{"metadata.name must be a DNS label"}},
		{"name above 63 characters", object(strings.Repeat("a", 64), withModes("Dynamic")), []string{"metadata.name must be a DNS label"}},
		{"no spec", object(name(), nil), []string{"spec: Required value"}},
		{"no provisioningModes", object(name(), map[string]any{"volumeStaging": staging}), []string{"spec.provisioningModes: Required value"}},
		{"no volumeStaging", object(name(), map[string]any{"provisioningModes": []any{"Dynamic"}}), []string{"spec.volumeStaging: Required value"}},
		{"no modes", object(name(), withModes()), []string{"spec.provisioningModes", "at least 1 items"}},
		{"unknown mode", object(name(), withModes("Sometimes")), []string{"spec.provisioningModes[0]", `Unsupported value: "Sometimes"`}},
		{"a mode twice", object(name(), withModes("Dynamic", "Dynamic")), []string{"spec.provisioningModes[1]", `Duplicate value: "Dynamic"`}},
		{"three modes", object(name(), withModes("Dynamic", "Static", "Dynamic")), []string{"spec.provisioningModes", "at most 2 items"}},
		{"podLogsInEvents not a boolean", object(name(), map[string]any{"provisioningModes": []any{"Dynamic"}, "volumeStaging": staging, "podLogsInEvents": "yes"}),
			[]string{"spec.podLogsInEvents", "must be of type boolean"}},
		// Stored objects of before spec.inlineVolumePolicy keep decoding.
		{"inlineVolumes alone", object(name(), map[string]any{"provisioningModes": []any{"Dynamic"}, "volumeStaging": staging, "inlineVolumes": true}), nil},
		{"inline policy", object(name(), withInline(staging, map[string]any{"name": "size", "pattern": "[0-9]+", "enum": []any{"1", "2"}, "default": "1", "maxLength": 3})), nil},
		{"inline default not in enum", object(name(), withInline(staging, map[string]any{"name": "size", "enum": []any{"1"}, "default": "2"})),
			[]string{"spec.inlineVolumePolicy.attributes[0]", "default must be one of enum"}},
		{"inline default longer than maxLength", object(name(), withInline(staging, map[string]any{"name": "size", "maxLength": 1, "default": "22"})),
			[]string{"spec.inlineVolumePolicy.attributes[0]", "default is longer than maxLength"}},
		{"inline attribute of kubelet's", object(name(), withInline(staging, map[string]any{"name": "csi.storage.k8s.io/pod.name"})),
			[]string{"spec.inlineVolumePolicy.attributes[0].name", "keys under csi.storage.k8s.io/ are kubelet's"}},
		{"inline attribute twice", object(name(), withInline(staging, map[string]any{"name": "a"}, map[string]any{"name": "a"})),
			[]string{"spec.inlineVolumePolicy.attributes[1]", "Duplicate value"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := create(tt.obj)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted, want an error saying %q", tt.want)
			}
			if !containsInOrder(err.Error(), tt.want) {
				t.Errorf("error %q, want it to say %q", err, tt.want)
			}
		})
	}

	// A rule on the whole object names the field it is about (not "<nil>").
	p := e.provisioner(name(), func(s *v1alpha1.PavProvisionerSpec) { s.TopologyKeys = []string{"example.com/zone"} })
	changed := p.DeepCopy()
	changed.Spec.TopologyKeys = []string{"example.com/rack"}
	if _, err := e.pav.Update(e.ctx, changed, metav1.UpdateOptions{}); err == nil ||
		!containsInOrder(err.Error(), []string{"spec.topologyKeys: Invalid value", "spec.topologyKeys cannot change"}) || strings.Contains(err.Error(), "<nil>") {
		t.Errorf("changing spec.topologyKeys: %v, want an error at spec.topologyKeys", err)
	}

	// The status, written through its subresource, follows metav1.Condition's schema.
	p = e.provisioner(name(), nil)
	for _, tt := range []struct {
		name   string
		mutate func(*v1alpha1.PavProvisionerStatus)
		want   []string
	}{
		{"condition reason not CamelCase", func(s *v1alpha1.PavProvisionerStatus) { s.Conditions[0].Reason = "not valid" },
			[]string{"status.conditions[0].reason", "should match"}},
		{"condition status not True, False or Unknown", func(s *v1alpha1.PavProvisionerStatus) { s.Conditions[0].Status = "Maybe" },
			[]string{"status.conditions[0].status", `Unsupported value: "Maybe"`}},
		{"negative observedGeneration", func(s *v1alpha1.PavProvisionerStatus) { s.ObservedGeneration = -1 },
			[]string{"status.observedGeneration", "greater than or equal to 0"}},
	} {
		t.Run("status/"+tt.name, func(t *testing.T) {
			cp := p.DeepCopy()
			cp.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: metav1.Now()}}
			tt.mutate(&cp.Status)
			_, err := e.pav.UpdateStatus(e.ctx, cp, metav1.UpdateOptions{})
			if err == nil || !containsInOrder(err.Error(), tt.want) {
				t.Errorf("UpdateStatus: %v, want an error saying %q", err, tt.want)
			}
		})
	}
}

// containsInOrder reports whether s holds each of parts, one after another.
func containsInOrder(s string, parts []string) bool {
	for _, part := range parts {
		i := strings.Index(s, part)
		if i < 0 {
			return false
		}
		s = s[i+len(part):]
	}
	return true
}

// withInline is a spec serving inline volumes with attrs declared.
func withInline(staging map[string]any, attrs ...map[string]any) map[string]any {
	list := make([]any, len(attrs))
	for i, a := range attrs {
		list[i] = a
	}
	return map[string]any{"provisioningModes": []any{"Dynamic"}, "volumeStaging": staging, "inlineVolumes": true,
		"inlineVolumePolicy": map[string]any{"attributes": list}}
}
