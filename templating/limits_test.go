package templating

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/albertofaria/pav/crds/v1alpha1"
)

// hostile is a provisioner with n templates, tmpl(0) to tmpl(n-1), in its
// staging pod's environment.
func hostile(t testing.TB, n int, tmpl func(i int) string) *v1alpha1.PavProvisioner {
	p := provisioner(t, minimal)
	env := make([]interface{}, n)
	for i := range env {
		env[i] = map[string]interface{}{"name": fmt.Sprintf("V%d", i), "value": tmpl(i)}
	}
	container := map[string]interface{}{"name": "stage", "image": "busybox", "env": env}
	p.Spec.VolumeStaging.PodTemplate.Object = map[string]interface{}{
		"spec": map[string]interface{}{"containers": []interface{}{container}},
	}
	return p
}

// sum is a template of size bytes, a left-deep chain {{ 1+1+1+... }}: the
// costliest to compile per byte.
func sum(size int) string { return "{{ 1" + strings.Repeat("+1", (size-8)/2) + " }}" }

// A provisioner's templates together are bounded before any is compiled:
// past the bound, none is (the broken one is not reported).
func TestTemplateBytesBound(t *testing.T) {
	each, total := maxTemplateBytes/4, 0
	p := hostile(t, 5, func(i int) string {
		tmpl := sum(each)
		if i == 0 {
			tmpl = "{{ ( }}" + strings.Repeat(" ", each-7)
		}
		total += len(tmpl)
		return tmpl
	})
	errs := Validate(p)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), fmt.Sprintf("may have %d bytes together, these have %d", maxTemplateBytes, total)) {
		t.Errorf("Validate = %v, want only the bound on the templates' bytes", errs)
	}
	// Literal strings do not count.
	p = hostile(t, 5, func(int) string { return strings.Repeat("x", each) })
	if errs := Validate(p); len(errs) != 0 {
		t.Errorf("Validate of literal strings = %v", errs)
	}
}

// BenchmarkValidateHostile measures validating the payload, a dozen
// 256 KiB {{ 1+1+... }} templates (what one ~3 MiB AdmissionReview carries),
// and the most expensive provisioner within the bounds: templates of just
// under maxTokens up to maxTemplateBytes. retained-MiB is the heap the
// compiled provisioner keeps (a lower bound of the peak; the allocations per
// op are an upper bound).
func BenchmarkValidateHostile(b *testing.B) {
	for _, c := range []struct {
		name    string
		n, size int
	}{{"issue-12x256KiB", 12, 256 << 10}, {"within-bounds", maxTemplateBytes / 10000, 10000}} {
		p := hostile(b, c.n, func(int) string { return sum(c.size) })
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var before, after runtime.MemStats
			var keep *Compiled
			for b.Loop() {
				b.StopTimer()
				runtime.GC()
				runtime.ReadMemStats(&before)
				b.StartTimer()
				keep, _, _ = compile(p)
				b.StopTimer()
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.StartTimer()
			}
			b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/(1<<20), "retained-MiB")
			runtime.KeepAlive(keep)
		})
	}
}
