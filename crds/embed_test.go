package crds

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/albertofaria/pav/crds/v1alpha1"
)

func TestManifest(t *testing.T) {
	u, err := Unstructured()
	if err != nil {
		t.Fatal(err)
	}
	if u.GetName() != Name || u.GetKind() != "CustomResourceDefinition" {
		t.Fatalf("got %s %s", u.GetKind(), u.GetName())
	}
	str := func(path ...string) string {
		s, _, err := unstructured.NestedString(u.Object, path...)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if g := str("spec", "group"); g != v1alpha1.GroupName {
		t.Errorf("group %q", g)
	}
	if s := str("spec", "scope"); s != "Cluster" {
		t.Errorf("scope %q", s)
	}
	if p := str("spec", "names", "plural"); p != v1alpha1.Plural {
		t.Errorf("plural %q", p)
	}
	if k := str("spec", "names", "kind"); k != v1alpha1.Kind {
		t.Errorf("kind %q", k)
	}
	short, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "names", "shortNames")
	if !reflect.DeepEqual(short, []string{v1alpha1.ShortName}) {
		t.Errorf("shortNames %v", short)
	}
	versions, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
	if len(versions) != 1 {
		t.Fatalf("%d versions", len(versions))
	}
	v := versions[0].(map[string]interface{})
	if v["name"] != v1alpha1.Version {
		t.Errorf("version %v", v["name"])
	}
	if _, ok, _ := unstructured.NestedMap(v, "subresources", "status"); !ok {
		t.Error("no status subresource")
	}
	spec, ok, _ := unstructured.NestedMap(v, "schema", "openAPIV3Schema", "properties", "spec")
	if !ok {
		t.Fatal("no spec schema")
	}
	req, _, _ := unstructured.NestedStringSlice(spec, "required")
	if !reflect.DeepEqual(req, []string{"provisioningModes", "volumeStaging"}) {
		t.Errorf("spec.required %v", req)
	}
	checkSectionSchemas(t, spec)
	// The API server refuses the fsGroupPolicy values PaV's validation does.
	enum, _, _ := unstructured.NestedStringSlice(spec, "properties", "volumeStaging", "properties", "fsGroupPolicy", "enum")
	var want []string
	for _, p := range v1alpha1.FSGroupPolicies {
		want = append(want, string(p))
	}
	if !reflect.DeepEqual(enum, want) {
		t.Errorf("fsGroupPolicy enum %v, want %v", enum, want)
	}
}

// literalFields are the sections' fields that are never templates.
var literalFields = map[string]bool{
	"cloning": true, "restoring": true, "allowSetuidAndDevices": true, "recovery": true,
	"fsGroupPolicy": true, "shared": true, "updateStrategy": true,
}

// checkSectionSchemas checks that each section's fields in the schema of
// spec match the Go types exactly, every one of any type.
func checkSectionSchemas(t *testing.T, spec map[string]interface{}) {
	t.Helper()
	sections := map[string][]string{
		"volumeValidation":      {"volumeModes", "accessModes", "minCapacity", "maxCapacity", "podTemplate"},
		"volumeCreation":        {"handle", "capacity", "nodeAffinity", "podTemplate", "cloning", "restoring"},
		"volumeDeletion":        {"podTemplate"},
		"volumeStaging":         {"podTemplate", "allowSetuidAndDevices", "recovery", "fsGroupPolicy", "shared", "updateStrategy"},
		"volumeUnstaging":       {"podTemplate"},
		"volumeExpansion":       {"podTemplate"},
		"snapshotCreation":      {"podTemplate"},
		"snapshotDeletion":      {"podTemplate"},
		"groupSnapshotCreation": {"podTemplate"},
		"groupSnapshotDeletion": {"podTemplate"},
		"volumeModification":    {"podTemplate"},
	}
	// Every section of the schema (an object or one template string) is checked.
	all, _, _ := unstructured.NestedMap(spec, "properties")
	for s, p := range all {
		if _, listed := sections[s]; !listed && p.(map[string]interface{})["x-kubernetes-preserve-unknown-fields"] == true {
			t.Errorf("section %s of the schema is not checked here", s)
		}
	}
	for s, fields := range sections {
		props, ok, _ := unstructured.NestedMap(spec, "properties", s, "properties")
		if !ok {
			t.Errorf("no schema for %s", s)
			continue
		}
		if len(props) != len(fields) {
			t.Errorf("%s: %d fields, want %d", s, len(props), len(fields))
		}
		// A section may also be one template string.
		if sec, _, _ := unstructured.NestedMap(spec, "properties", s); sec["type"] != nil || sec["x-kubernetes-preserve-unknown-fields"] != true {
			t.Errorf("%s: want an object or a string, got type %v", s, sec["type"])
		}
		for _, f := range fields {
			if literalFields[f] {
				continue // a literal, never a template
			}
			p, ok := props[f].(map[string]interface{})
			if !ok || p["x-kubernetes-preserve-unknown-fields"] != true || p["type"] != nil {
				t.Errorf("%s.%s: want any value, got %v", s, f, props[f])
			}
		}
	}
}
