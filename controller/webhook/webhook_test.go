package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/internal/metricstest"
	"github.com/albertofaria/pav/kubeclient"
	"github.com/albertofaria/pav/kubeclient/generated/clientset/fake"
)

func TestGenerateUsable(t *testing.T) {
	names := DNSNames("pav-webhook", "pav")
	now := time.Now()
	c, err := Generate(names, now)
	if err != nil {
		t.Fatal(err)
	}
	if !c.usable(names, now) {
		t.Error("fresh certificate not usable")
	}
	if c.usable(DNSNames("other", "pav"), now) {
		t.Error("certificate usable for another service")
	}
	if c.usable(names, now.Add(5*365*24*time.Hour)) {
		t.Error("certificate usable near its expiry")
	}
}

func TestEnsureSecretReusesAndRenews(t *testing.T) {
	kube := fake.NewSimpleClientset()
	ctx := context.Background()
	names := DNSNames("svc", "pav")
	a, err := EnsureSecret(ctx, kube, "pav", "cert", names)
	if err != nil {
		t.Fatal(err)
	}
	b, err := EnsureSecret(ctx, kube, "pav", "cert", names)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Cert, b.Cert) {
		t.Error("second call replaced a usable certificate")
	}
	c, err := EnsureSecret(ctx, kube, "pav", "cert", DNSNames("renamed", "pav"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a.Cert, c.Cert) {
		t.Error("certificate for the wrong names kept")
	}
}

func TestPatchCABundle(t *testing.T) {
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "pav"},
		Webhooks:   []admissionregistrationv1.ValidatingWebhook{{Name: "a"}, {Name: "b"}},
	}
	kube := fake.NewSimpleClientset(cfg)
	if err := PatchCABundle(context.Background(), kube, "pav", []byte("CA")); err != nil {
		t.Fatal(err)
	}
	got, _ := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(context.Background(), "pav", metav1.GetOptions{})
	for _, w := range got.Webhooks {
		if string(w.ClientConfig.CABundle) != "CA" {
			t.Errorf("webhook %s: caBundle %q", w.Name, w.ClientConfig.CABundle)
		}
	}
}

func TestHandler(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := &Handler{Check: func(p *v1alpha1.PavProvisioner) (field.ErrorList, field.ErrorList) {
		if len(p.Spec.ProvisioningModes) == 0 {
			return field.ErrorList{field.Required(field.NewPath("spec", "provisioningModes"), "")}, nil
		}
		return nil, nil
	}, Metrics: NewMetrics(reg)}
	valid := &v1alpha1.PavProvisioner{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1alpha1.PavProvisionerSpec{ProvisioningModes: []v1alpha1.ProvisioningMode{v1alpha1.Dynamic}}}
	invalid := &v1alpha1.PavProvisioner{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	invalidWithFinalizer := invalid.DeepCopy()
	invalidWithFinalizer.Finalizers = []string{"x"}
	now := metav1.Now()
	deletingInvalid := invalid.DeepCopy()
	deletingInvalid.DeletionTimestamp = &now
	deletingInvalidNoFinalizer := deletingInvalid.DeepCopy()
	deletingInvalidNoFinalizer.Finalizers = nil
	deletingInvalid.Finalizers = []string{"x"}
	deletingValid := valid.DeepCopy()
	deletingValid.DeletionTimestamp = &now
	invalid2 := invalid.DeepCopy()
	invalid2.Spec.VolumeStaging = &v1alpha1.VolumeStaging{}

	for _, tc := range []struct {
		name     string
		op       admissionv1.Operation
		obj, old *v1alpha1.PavProvisioner
		allowed  bool
	}{
		{"create valid", admissionv1.Create, valid, nil, true},
		{"create invalid", admissionv1.Create, invalid, nil, false},
		{"update to invalid spec", admissionv1.Update, invalid2, valid, false},
		{"metadata-only update of an invalid object", admissionv1.Update, invalidWithFinalizer, invalid, true},
		{"finalizer removal while deleting an invalid object", admissionv1.Update, deletingInvalidNoFinalizer, deletingInvalid, true},
		{"spec change to invalid while deleting", admissionv1.Update, deletingInvalid, deletingValid, false},
		{"delete", admissionv1.Delete, invalid, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := &admissionv1.AdmissionRequest{UID: "uid-1", Operation: tc.op, Object: raw(tc.obj)}
			if tc.old != nil {
				req.OldObject = raw(tc.old)
			}
			body, _ := json.Marshal(&admissionv1.AdmissionReview{
				TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: req})
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(body)))
			var out admissionv1.AdmissionReview
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
				t.Fatalf("response %q: %v", rec.Body.String(), err)
			}
			if out.Response.UID != "uid-1" || out.Response.Allowed != tc.allowed {
				t.Fatalf("response %+v, want allowed=%v", out.Response, tc.allowed)
			}
			if !tc.allowed && !bytes.Contains([]byte(out.Response.Result.Message), []byte("spec.provisioningModes")) {
				t.Errorf("denial does not name the field: %q", out.Response.Result.Message)
			}
		})
	}
	checkReviews(t, reg, map[string]float64{resultAllowed: 4, resultDenied: 3, resultWarned: 0, resultBusy: 0, resultBadRequest: 0})
}

// checkReviews compares pav_webhook_requests_total by result, and checks
// each review was timed.
func checkReviews(t *testing.T, reg prometheus.Gatherer, want map[string]float64) {
	t.Helper()
	for result, n := range want {
		l := map[string]string{"result": result}
		if v, ok := metricstest.Scrape(t, reg, "pav_webhook_requests_total", l); !ok || v != n {
			t.Errorf("pav_webhook_requests_total{result=%s} = %v (present %v), want %v", result, v, ok, n)
		}
		if v, _ := metricstest.Scrape(t, reg, "pav_webhook_request_duration_seconds", l); v != n {
			t.Errorf("pav_webhook_request_duration_seconds{result=%s}: %v observations, want %v", result, v, n)
		}
	}
}

// A valid provisioner with warnings is allowed, with the warnings.
func TestHandlerReturnsWarnings(t *testing.T) {
	h := &Handler{
		Check: func(*v1alpha1.PavProvisioner) (field.ErrorList, field.ErrorList) {
			return nil, field.ErrorList{field.Invalid(field.NewPath("spec", "volumeCreation", "capacity"), field.OmitValueType{}, "'x' is not a variable")}
		},
		Metrics: NewMetrics(prometheus.NewRegistry()),
	}
	p := &v1alpha1.PavProvisioner{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	body, _ := json.Marshal(&admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  &admissionv1.AdmissionRequest{UID: "uid-1", Operation: admissionv1.Create, Object: raw(p)}})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(body)))
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
		t.Fatalf("response %q: %v", rec.Body.String(), err)
	}
	if want := "spec.volumeCreation.capacity: Invalid value: 'x' is not a variable"; !out.Response.Allowed || len(out.Response.Warnings) != 1 || out.Response.Warnings[0] != want {
		t.Errorf("response allowed=%v warnings %q, want allowed with %q", out.Response.Allowed, out.Response.Warnings, want)
	}
	if v := testutil.ToFloat64(h.Metrics.requests.WithLabelValues(resultWarned)); v != 1 {
		t.Errorf("reviews counted as warned: %v, want 1", v)
	}
}

func raw(p *v1alpha1.PavProvisioner) runtime.RawExtension {
	b, _ := json.Marshal(p)
	return runtime.RawExtension{Raw: b}
}

// An oversized AdmissionReview is refused before it is decoded.
func TestHandlerRefusesOversizedReviews(t *testing.T) {
	h := &Handler{Check: func(*v1alpha1.PavProvisioner) (field.ErrorList, field.ErrorList) { return nil, nil }, Metrics: NewMetrics(prometheus.NewRegistry())}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(make([]byte, MaxRequestBytes+1))))
	if rec.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("status %d (%s), want 413", rec.Code, rec.Body.String())
	}
	if v := testutil.ToFloat64(h.Metrics.requests.WithLabelValues(resultBadRequest)); v != 1 {
		t.Errorf("reviews counted as bad requests: %v, want 1", v)
	}
}

// Beyond the reviews it runs and queues, the handler answers at once that it
// is busy, as a denial with 429 the API server passes to the user; a review
// waiting in the queue runs when a slot frees.
func TestHandlerAnswersBusy(t *testing.T) {
	entered, release := make(chan string, 3), make(chan struct{})
	h := &Handler{
		Check: func(p *v1alpha1.PavProvisioner) (field.ErrorList, field.ErrorList) {
			entered <- p.Name
			<-release
			return nil, nil
		},
		queue:   newFairQueue(1, 1),
		Metrics: NewMetrics(prometheus.NewRegistry()),
	}
	send := func(name string) *admissionv1.AdmissionReview {
		p := &v1alpha1.PavProvisioner{ObjectMeta: metav1.ObjectMeta{Name: name}}
		body, _ := json.Marshal(&admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request:  &admissionv1.AdmissionRequest{UID: types.UID("uid-" + name), Operation: admissionv1.Create, Object: raw(p)}})
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(body)))
		var out admissionv1.AdmissionReview
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
			t.Errorf("%s: response %d %q: %v", name, rec.Code, rec.Body.String(), err)
			return nil
		}
		if out.Response.UID != types.UID("uid-"+name) || out.Kind != "AdmissionReview" {
			t.Errorf("%s: response %+v", name, out)
		}
		return &out
	}
	done := make(chan *admissionv1.AdmissionReview, 2)
	go func() { done <- send("running") }()
	if got := <-entered; got != "running" {
		t.Fatalf("validating %s", got)
	}
	go func() { done <- send("waiting") }()
	for h.queue.waitingFor("192.0.2.1") == 0 { // until the second review waits for the slot (httptest's client address)
		time.Sleep(time.Millisecond)
	}
	busy := send("busy")
	if busy == nil || busy.Response.Allowed || busy.Response.Result.Code != http.StatusTooManyRequests ||
		!bytes.Contains([]byte(busy.Response.Result.Message), []byte("busy")) {
		t.Fatalf("third review: %+v, want a denial with 429", busy.Response)
	}
	close(release)
	for range 2 {
		if out := <-done; out == nil || !out.Response.Allowed {
			t.Errorf("queued or running review not allowed: %+v", out)
		}
	}
	if got := <-entered; got != "waiting" {
		t.Errorf("validated %s second, want the queued review", got)
	}
	if v := testutil.ToFloat64(h.Metrics.requests.WithLabelValues(resultBusy)); v != 1 {
		t.Errorf("reviews counted as busy: %v, want 1", v)
	}
}

// The UID of a review answered busy is found in a stream, wherever it is in
// the request; without one the answer is a bare 429.
func TestPeekReview(t *testing.T) {
	for body, want := range map[string]types.UID{
		`{"kind":"AdmissionReview","request":{"uid":"u1","object":{}}}`:                                                              "u1",
		`{"request":{"object":{"a":[1,{"uid":"no"}],"uid":"x"},"uid":"u2"},"kind":"A"}`:                                              "u2",
		`{"apiVersion":"admission.k8s.io/v1","request":{"object":{"spec":"` + strings.Repeat("x", busyPeekBytes) + `"},"uid":"u3"}}`: "",
		`{"request":{"uid":""}}`: "",
		`[]`:                     "",
	} {
		_, uid, ok := peekReview(io.LimitReader(strings.NewReader(body), busyPeekBytes))
		if uid != want || ok != (want != "") {
			t.Errorf("peekReview(%.60s) = %q, %v; want %q", body, uid, ok, want)
		}
	}
}

// usable reports whether certs are a valid chain for dnsNames for a while yet.
func (c *Certs) usable(dnsNames []string, now time.Time) bool {
	leaf := c.parseLeaf()
	return leaf != nil && !now.Add(renewBefore).After(leaf.NotAfter) &&
		verifies(leaf, parseCerts(c.CACert), dnsNames, now)
}

// EnsureSecret is EnsureSecretAt at the current time.
func EnsureSecret(ctx context.Context, kube kubeclient.Interface, namespace, name string, dnsNames []string) (*Certs, error) {
	return EnsureSecretAt(ctx, kube, namespace, name, dnsNames, time.Now())
}

// admissionReview is a CREATE review of p, as the API server sends it.
func admissionReview(p *v1alpha1.PavProvisioner) []byte {
	body, _ := json.Marshal(&admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  &admissionv1.AdmissionRequest{UID: types.UID("uid-" + p.Name), Operation: admissionv1.Create, Object: raw(p)}})
	return body
}

// Clients that dribble their bodies hold no slot: with more of them than
// slots, an ordinary review is answered meanwhile; each slow body is cut off
// at the read deadline, without its client closing it.
func TestSlowBodiesHoldNoSlot(t *testing.T) {
	h := &Handler{Check: func(*v1alpha1.PavProvisioner) (field.ErrorList, field.ErrorList) { return nil, nil }}
	srv := httptest.NewServer(h)
	defer srv.Close()
	const slow = 2 * maxReviews
	answers := make(chan int, slow)
	var writers []*io.PipeWriter
	for range slow {
		r, w := io.Pipe()
		writers = append(writers, w)
		req, _ := http.NewRequest(http.MethodPost, srv.URL+Path, r)
		req.ContentLength = 1000
		go func() {
			resp, err := srv.Client().Do(req)
			if err != nil {
				answers <- 0
				return
			}
			resp.Body.Close()
			answers <- resp.StatusCode
		}()
		if _, err := w.Write([]byte(`{"apiVersion":`)); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		for _, w := range writers {
			w.Close()
		}
	}()
	for h.bodies == nil || h.bodies.heldBy("127.0.0.1") < slow*1000 { // every slow body is being read
		time.Sleep(time.Millisecond)
	}
	resp, err := srv.Client().Post(srv.URL+Path, "application/json", bytes.NewReader(admissionReview(&v1alpha1.PavProvisioner{ObjectMeta: metav1.ObjectMeta{Name: "p"}})))
	if err != nil {
		t.Fatal(err)
	}
	var out admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Response == nil || !out.Response.Allowed {
		t.Errorf("ordinary review among %d slow bodies: %d %+v (%v), want allowed", slow, resp.StatusCode, out.Response, err)
	}
	resp.Body.Close()
	for range slow {
		if code := <-answers; code != http.StatusBadRequest {
			t.Errorf("a slow body was answered %d, want 400 (cut off at the read deadline)", code)
		}
	}
}

// The bodies one client holds are bounded: past its share, a review is
// answered busy at once, while another client's is still read.
func TestBodyBudgetPerClient(t *testing.T) {
	b := newByteBudget(3*MaxRequestBytes, 2*MaxRequestBytes)
	if !b.take("a", MaxRequestBytes) || !b.take("a", MaxRequestBytes) {
		t.Fatal("a client's first two bodies refused")
	}
	if b.take("a", 1) {
		t.Error("a client took more than its share")
	}
	if !b.take("b", MaxRequestBytes) {
		t.Error("another client refused while there was room")
	}
	if b.take("c", 1) {
		t.Error("a body taken past the total")
	}
	b.give("a", MaxRequestBytes)
	if !b.take("c", 1) {
		t.Error("room given back not taken")
	}
}

// A spec past the bounds is refused, naming the bound, before it is decoded
// and compiled; an update that leaves the spec as it was is allowed without
// either, and a spec change of an object being deleted is checked as any.
func TestHandlerBoundsTheSpecBeforeDecoding(t *testing.T) {
	checked := 0
	h := &Handler{Check: func(*v1alpha1.PavProvisioner) (field.ErrorList, field.ErrorList) { checked++; return nil, nil }}
	containers := make([]string, 120000)
	for i := range containers {
		containers[i] = fmt.Sprintf(`{"name":"c%d","image":"i"}`, i)
	}
	huge := `{"provisioningModes":["Static"],"volumeStaging":{"podTemplate":{"spec":{"containers":[` + strings.Join(containers, ",") + `]}}}}`
	many := `{"provisioningModes":["Static"],"volumeStaging":{"podTemplate":{"spec":{"containers":[` + strings.Join(containers[:maxReviews*10], ",") + `]}}}}`
	deleting := func(spec string) string {
		return `{"apiVersion":"pav.albertofaria.github.io/v1alpha1","kind":"PavProvisioner","metadata":{"name":"p","deletionTimestamp":"2026-01-01T00:00:00Z","finalizers":["x"]},"spec":` + spec + `}`
	}
	for _, tc := range []struct {
		name      string
		body      []byte
		code      int
		wantError string
	}{
		{"over the body limit", review(huge), http.StatusRequestEntityTooLarge, "PaV's admission webhook reads at most"},
		{"too many containers", review(many), http.StatusUnprocessableEntity, "at most 32 containers of all kinds"},
		{"too many containers while deleting", update(deleting(many), deleting(`{"provisioningModes":["Static"]}`)), http.StatusUnprocessableEntity, "at most 32 containers of all kinds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(tc.body)))
			var out admissionv1.AdmissionReview
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
				t.Fatalf("response %d %.200q: %v", rec.Code, rec.Body.String(), err)
			}
			if r := out.Response; r.UID != "u" || r.Allowed || r.Result.Code != int32(tc.code) || !strings.Contains(r.Result.Message, tc.wantError) {
				t.Errorf("response %+v, want a denial %d with %q", r, tc.code, tc.wantError)
			}
		})
	}
	if checked != 0 {
		t.Errorf("%d specs past the bounds were checked", checked)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(update(deleting(many), strings.Replace(deleting(many), `"finalizers":["x"]`, `"finalizers":[]`, 1)))))
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil || !out.Response.Allowed || checked != 0 {
		t.Errorf("finalizer removal of an object being deleted: %.300q (checked %d), want allowed without a check", rec.Body.String(), checked)
	}
}

// update is an UPDATE review of the PavProvisioner old to obj (JSON).
func update(obj, old string) []byte {
	b, _ := json.Marshal(&admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "u", Operation: admissionv1.Update,
			Object: runtime.RawExtension{Raw: []byte(obj)}, OldObject: runtime.RawExtension{Raw: []byte(old)}}})
	return b
}
