package templating

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/albertofaria/pav/crds/v1alpha1"
)

// specWith is a Static provisioner's spec whose staging pod has pod (the
// pod template's spec, JSON).
func specWith(pod string) string {
	return `{"provisioningModes":["Static"],"volumeStaging":{"podTemplate":{"spec":` + pod + `}}}`
}

// list is n copies of item (%d: its index), as a JSON list.
func list(n int, item string) string {
	items := make([]string, n)
	for i := range items {
		items[i] = strings.ReplaceAll(item, "%d", fmt.Sprint(i))
	}
	return "[" + strings.Join(items, ",") + "]"
}

// Each bound lets its limit through and refuses one more, naming the field,
// with Validate (the decoded spec) as with CheckSpecBounds (its JSON).
func TestSpecBounds(t *testing.T) {
	container := `{"name":"c%d","image":"i"}`
	containers := func(n int) string {
		return `{"containers":` + list(n/2, container) + `,"initContainers":` + list(n-n/2, container) + `}`
	}
	env := func(n int) string {
		return `{"containers":[{"name":"c","image":"i","env":` + list(n, `{"name":"V%d"}`) + `}]}`
	}
	volumes := func(n int) string {
		return `{"containers":[{"name":"c","image":"i"}],"volumes":` + list(n, `{"name":"v%d","emptyDir":{}}`) + `}`
	}
	deep := func(levels int) string { // levels below spec
		return specWith(`{"containers":[{"name":"c","image":"i"}],"nodeSelector":{"a":"b"},"x":` +
			strings.Repeat(`{"a":`, levels-4) + `1` + strings.Repeat(`}`, levels-4) + `}`)
	}
	args := func(n int) string { // n values
		return specWith(`{"containers":[{"name":"c","image":"i","args":` + list(n-10, `"a"`) + `}]}`)
	}
	pod := func(size int) string { // a pod template of about size bytes
		return `{"podTemplate":{"spec":{"containers":[{"name":"c","image":"i","args":["` + strings.Repeat("x", size-70) + `"]}]}}}`
	}
	big := func(size int) string { // a section of about size bytes
		return `{"provisioningModes":["Static"],"volumeStaging":` + pod(size) + `}`
	}
	third := MaxSpecBytes/3 + 100
	bigSpec := `{"provisioningModes":["Static"],"volumeStaging":` + pod(third) + `,"volumeUnstaging":` + pod(third) + `,"volumeValidation":` + pod(third) + `}`
	for _, tc := range []struct {
		name      string
		ok, over  string
		wantError string
	}{
		{"containers", specWith(containers(MaxPodContainers)), specWith(containers(MaxPodContainers + 1)),
			"spec.volumeStaging.podTemplate.spec.initContainers: Forbidden: a pod template may have at most 32 containers"},
		{"env", specWith(env(MaxContainerEnvVar)), specWith(env(MaxContainerEnvVar + 1)),
			"spec.volumeStaging.podTemplate.spec.containers[0].env: Forbidden: a container may have at most 256 entries"},
		{"volumes", specWith(volumes(MaxPodVolumes)), specWith(volumes(MaxPodVolumes + 1)),
			"spec.volumeStaging.podTemplate.spec.volumes: Forbidden: a pod template may have at most 128 volumes"},
		{"values", args(MaxSpecValues), args(MaxSpecValues + 1), "spec: Forbidden: a spec may have at most 8192 JSON values"},
		{"depth", deep(MaxSpecDepth), deep(MaxSpecDepth + 1), "nested more than 32 levels below spec"},
		{"section", big(MaxSectionBytes - 100), big(MaxSectionBytes + 100), "spec.volumeStaging: Forbidden: a section may have 131072 bytes of JSON"},
		{"spec", big(MaxSectionBytes - 100), bigSpec, "spec: Forbidden: a spec may have 262144 bytes of JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if errs := CheckSpecBounds([]byte(tc.ok)); len(errs) > 0 {
				t.Errorf("at the bound: %v", errs)
			}
			errs := CheckSpecBounds([]byte(tc.over))
			if len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.wantError) {
				t.Errorf("past the bound: %v, want one error with %q", errs, tc.wantError)
			}
			p := provisioner(t, minimal)
			p.Spec = v1alpha1.PavProvisionerSpec{}
			if err := json.Unmarshal([]byte(tc.over), &p.Spec); err != nil {
				return // not a spec the decoded path can hold
			}
			if errs := Validate(p); len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.wantError) {
				t.Errorf("Validate past the bound: %.300v, want one error with %q", errs, tc.wantError)
			}
		})
	}
}
