package controller

import (
	"bytes"
	"errors"
	"io"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/albertofaria/pav/controller/webhook"
	"github.com/albertofaria/pav/crds"
	"github.com/albertofaria/pav/protocol"
)

func manifestDocs(t *testing.T) []map[string]interface{} {
	t.Helper()
	b, err := os.ReadFile("../deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var docs []map[string]interface{}
	for {
		var obj map[string]interface{}
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			return docs
		} else if err != nil {
			t.Fatalf("deployment.yaml: %v", err)
		}
		if len(obj) > 0 {
			docs = append(docs, obj)
		}
	}
}

func find(docs []map[string]interface{}, kind, name string) map[string]interface{} {
	for _, d := range docs {
		md, _ := d["metadata"].(map[string]interface{})
		if d["kind"] == kind && md["name"] == name {
			return d
		}
	}
	return nil
}

// deployment.yaml carries a copy of the CRD (one file to install); it must
// not drift from crds/pavprovisioners.yaml, which the binary embeds.
func TestDeploymentCRDMatchesEmbedded(t *testing.T) {
	var want map[string]interface{}
	if err := yaml.Unmarshal(crds.CustomResourceDefinition, &want); err != nil {
		t.Fatal(err)
	}
	got := find(manifestDocs(t), "CustomResourceDefinition", crds.Name)
	if got == nil {
		t.Fatal("deployment.yaml has no PavProvisioner CRD")
	}
	// Compare through JSON so YAML number types match.
	if !reflect.DeepEqual(normalize(t, got), normalize(t, want)) {
		t.Fatal("the CRD in deployment.yaml differs from crds/pavprovisioners.yaml; copy it again")
	}
}

func normalize(t *testing.T, v interface{}) interface{} {
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out interface{}
	if err := yaml.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// The names the spec and the code rely on.
func TestDeploymentNames(t *testing.T) {
	docs := manifestDocs(t)
	for _, o := range []struct{ kind, name string }{
		{"Namespace", "pav"},
		{"Deployment", "controller-agent"},
		{"DaemonSet", "node-agent"},
		{"Service", "pav-webhook"},
		{"ValidatingWebhookConfiguration", "pav.albertofaria.github.io"},
	} {
		if find(docs, o.kind, o.name) == nil {
			t.Errorf("deployment.yaml has no %s %s", o.kind, o.name)
		}
	}
	vwc := find(docs, "ValidatingWebhookConfiguration", "pav.albertofaria.github.io")
	if vwc == nil {
		return
	}
	hooks, _ := vwc["webhooks"].([]interface{})
	for _, h := range hooks {
		cc := h.(map[string]interface{})["clientConfig"].(map[string]interface{})
		svc := cc["service"].(map[string]interface{})
		if svc["path"] != webhook.Path || svc["name"] != "pav-webhook" || svc["namespace"] != "pav" {
			t.Errorf("webhook clientConfig %v does not match the controller's defaults", svc)
		}
	}
}

// The policies that keep the node plugin's annotations to the node plugin
// list exactly protocol.NodePluginAnnotations: one left out there is one
// the node plugin may not write (policy pav-node-scope) and the controller
// may forge (pav-controller-scope).
func TestPoliciesListTheNodePluginAnnotations(t *testing.T) {
	docs := manifestDocs(t)
	var want []string
	for _, a := range protocol.NodePluginAnnotations {
		want = append(want, "'"+strings.TrimPrefix(a, protocol.ReservedPrefix)+"'")
	}
	sort.Strings(want)
	for _, name := range []string{"pav-controller-scope", "pav-node-scope"} {
		policy := find(docs, "ValidatingAdmissionPolicy", name)
		if policy == nil {
			t.Fatalf("deployment.yaml has no ValidatingAdmissionPolicy %s", name)
		}
		var expr string
		for _, v := range policy["spec"].(map[string]interface{})["variables"].([]interface{}) {
			if v := v.(map[string]interface{}); v["name"] == "nodePluginAnnotations" {
				expr = v["expression"].(string)
			}
		}
		open, end := strings.Index(expr, "["), strings.Index(expr, "]")
		if open < 0 || end < open {
			t.Fatalf("%s: variable nodePluginAnnotations %q is not a list", name, expr)
		}
		got := strings.Split(expr[open+1:end], ", ")
		sort.Strings(got)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s lists the node plugin's annotations %v, want %v", name, got, want)
		}
	}
}

// Policy pav-controller-scope lets the controller write on a
// VolumeSnapshotContent only csi-snapshotter's annotation and finalizer:
// the names it writes must be those, or its own writes are refused.
func TestControllerScopeNamesTheSnapshotContentWrites(t *testing.T) {
	policy := find(manifestDocs(t), "ValidatingAdmissionPolicy", "pav-controller-scope")
	if policy == nil {
		t.Fatal("deployment.yaml has no ValidatingAdmissionPolicy pav-controller-scope")
	}
	var exprs []string
	for _, v := range policy["spec"].(map[string]interface{})["validations"].([]interface{}) {
		exprs = append(exprs, v.(map[string]interface{})["expression"].(string))
	}
	all := strings.Join(exprs, "\n")
	for _, name := range []string{annSnapshotBeingCreated, finalizerContentBound} {
		if !strings.Contains(all, "'"+name+"'") {
			t.Errorf("pav-controller-scope does not name %q", name)
		}
	}
}
