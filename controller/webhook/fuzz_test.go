package webhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/albertofaria/pav/templating"
)

// review is an AdmissionReview creating the PavProvisioner spec (JSON).
func review(spec string) []byte {
	obj := `{"apiVersion":"pav.albertofaria.github.io/v1alpha1","kind":"PavProvisioner","metadata":{"name":"p"},"spec":` + spec + `}`
	b, _ := json.Marshal(&admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  &admissionv1.AdmissionRequest{UID: "u", Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: []byte(obj)}}})
	return b
}

// stagingEnv is a spec whose staging pod has the given values as environment.
func stagingEnv(values ...string) string {
	env := make([]string, len(values))
	for i, v := range values {
		j, _ := json.Marshal(v)
		env[i] = fmt.Sprintf(`{"name":"V%d","value":%s}`, i, j)
	}
	return `{"provisioningModes":["Static"],"volumeStaging":{"podTemplate":{"spec":{"containers":[{"name":"c","image":"i","env":[` +
		strings.Join(env, ",") + `]}]}}}}`
}

// FuzzHandler: any body, as any pod may send it, gets an answer (a review
// with the request's UID, or an HTTP error), with the real validation behind
// it; never a panic or a hang. Seeded with the template bombs and the
// costliest literal specs at and past the bounds.
func FuzzHandler(f *testing.F) {
	for _, body := range worstBodies() {
		f.Add(body)
	}
	container := `{"name":"c","image":"i"}`
	for _, n := range []int{templating.MaxPodContainers, templating.MaxPodContainers + 1} {
		f.Add(review(`{"provisioningModes":["Static"],"volumeStaging":{"podTemplate":{"spec":{"containers":[` + strings.Repeat(container+",", n-1) + container + `]}}}}`))
	}
	f.Add(review(`{"provisioningModes":["Static"],"volumeStaging":{"podTemplate":{"spec":` + strings.Repeat(`{"a":`, templating.MaxSpecDepth) + `1` + strings.Repeat(`}`, templating.MaxSpecDepth) + `}}}`))
	sum := "{{ 1" + strings.Repeat("+1", 128<<10) + " }}"
	issue := make([]string, 12) // the issue's ~3 MiB review
	for i := range issue {
		issue[i] = sum
	}
	f.Add(review(stagingEnv("{{ pvc.metadata.name }}")))
	f.Add(review(stagingEnv(issue...)))
	f.Add(review(stagingEnv("{{ 'a'" + strings.Repeat("~'a'", 60000) + " }}")))
	f.Add(review(stagingEnv(strings.Repeat("{% set x|replace('=', '') %}", 6000) + strings.Repeat("{% endset %}", 6000))))
	f.Add(review(stagingEnv("{{ ('x ' * 2000000)|wordwrap(65536)|length }}")))
	f.Add(review(stagingEnv(strings.Repeat("{% set s = ('x' * 4000000)|upper %}", 600))))
	f.Add(review(`{"provisioningModes":"Dynamic"}`))
	f.Add([]byte(`{"request":{"uid":"u","operation":"UPDATE","object":{"spec":{}},"oldObject":[]}}`))
	f.Add([]byte(`{"request":null}`))
	h := &Handler{Check: templating.Check}
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(body)))
		switch rec.Code {
		case http.StatusOK:
			var in, out admissionv1.AdmissionReview
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
				t.Fatalf("answer %q: %v", rec.Body.String(), err)
			}
			if json.Unmarshal(body, &in) == nil && in.Request != nil && out.Response.UID != in.Request.UID {
				t.Fatalf("answer for UID %q, request's %q", out.Response.UID, in.Request.UID)
			}
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("status %d: %s", rec.Code, rec.Body.String())
		}
	})
}
