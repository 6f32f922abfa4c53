package templating

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/protocol"
)

// FuzzValidate: any YAML document, valid or not, must be validated (and, if
// valid, evaluated for every phase) without panicking or hanging.
func FuzzValidate(f *testing.F) {
	f.Add(minimal)
	f.Add(withSection("volumeCreation:\n  capacity: \"{{ requestedMinCapacity }}\"\n  handle: \"{% set yaml = true %}[{{ x }}\"\n"))
	f.Add(withSection("volumeValidation:\n  podTemplate: {spec: {containers: [{name: c, image: i, ports: [{containerPort: \"{% set yaml = true %}{{ 1 }}\"}]}]}}\n"))
	f.Add("spec: {provisioningModes: [Static], volumeStaging: {podTemplate: 3}}")
	f.Add("spec: {volumeUnstaging: {podTemplate: {spec: {containers: [[]], volumes: {a: b}}}}}")
	// The bombs: more template bytes than a provisioner may have, templates
	// past the token and nesting bounds, and past the render deadline.
	for _, tmpl := range []string{
		sum(256 << 10),
		"{{ 'a'" + strings.Repeat("~'a'", 60000) + " }}",
		strings.Repeat("{% set x|replace('=', '') %}", 6000) + strings.Repeat("{% endset %}", 6000),
		"{{ ('x ' * 2000000)|wordwrap(65536)|length }}",
		strings.Repeat("{% set s = ('x' * 4000000)|upper %}", 600),
	} {
		j, _ := json.Marshal(tmpl)
		f.Add(withSection("volumeCreation:\n  capacity: 1Gi\n  handle: " + string(j) + "\n"))
	}
	f.Add(withSection("volumeCreation:\n  capacity: 1Gi\n  handle: \"" + strings.Repeat(sum(20000)+" ", 13) + "\"\n"))
	f.Fuzz(func(t *testing.T, doc string) {
		j, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			return
		}
		p := &v1alpha1.PavProvisioner{}
		if json.Unmarshal(j, p) != nil {
			return
		}
		errs := Validate(p)
		c, err := Compile(p)
		if (err == nil) != (len(errs) == 0) {
			t.Fatalf("Validate found %d problems, Compile returned %v", len(errs), err)
		}
		if err != nil {
			return
		}
		ctx := context.Background()
		_, _ = c.DynamicValidation(ctx, dynReq(), nil)
		_, _ = c.StaticValidation(ctx, StaticRequest{PV: testPV()}, nil)
		_, _ = c.Creation(ctx, dynReq(), nil)
		_, _ = c.Deletion(ctx, dynReq(), nil)
		if cfg, err := c.Staging(ctx, stageReq(), nil); err == nil {
			protocol.BuildPod(cfg.PodTemplate, protocol.PodOptions{Name: "x", HostDir: "/h"})
		}
		_, _ = c.Unstaging(ctx, stageReq(), nil)
	})
}
