package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/kubeclient"
	"github.com/albertofaria/pav/templating"
)

// Path is where the webhook answers AdmissionReviews for PavProvisioners.
const Path = "/validate-pavprovisioner"

// MaxRequestBytes bounds an AdmissionReview, refused (413) before it is
// decoded. A review carries the object and, for an update, its old version,
// each with kubectl's last-applied-configuration annotation: four copies of
// a spec of up to templating.MaxSpecBytes, and room for the rest.
const MaxRequestBytes = 4*templating.MaxSpecBytes + 512<<10

// CheckFunc validates a PavProvisioner and, if it is valid, finds what it
// likely got wrong (templating.Check): the API server shows the warnings to
// the user, who may still create or update the object.
type CheckFunc func(p *v1alpha1.PavProvisioner) (errs, warnings field.ErrorList)

// Bounds on the reviews a Handler works on at once. A body is read whole,
// within bodyReadTimeout, before its review takes a place in the queue, so
// that a client dribbling its body holds only its share of bodyBytes, never
// a slot. Each review running holds its body and what decoding and
// compiling its spec (bounded by templating.CheckSpecBounds) take. Slots go
// to the clients in turn (fairQueue), so the API server's reviews are not
// stuck behind a flood from one pod. A review that finds no room for its
// body, no place in the queue, or waits longer than maxReviewWait (well
// within the API server's timeoutSeconds, 10), is answered "busy" at once.
const (
	maxReviews      = 4
	maxWaiting      = 64
	maxReviewWait   = 5 * time.Second
	bodyReadTimeout = 3 * time.Second
	// bodyBytes bounds the bodies held at once (being read, waiting or
	// running), and bodyBytesPerClient those of one client address.
	bodyBytes          = 32 << 20
	bodyBytesPerClient = 8 << 20
	// busyPeekBytes is how much of a review answered "busy" is read to
	// find its UID (the API server writes it near the start).
	busyPeekBytes = 64 << 10
)

// Handler validates PavProvisioners on CREATE and UPDATE. Updates that do not
// touch the spec (metadata such as finalizers, status) are always allowed, so
// a provisioner that an older PaV accepted can still be cleaned up; a spec
// change is validated whatever the object's state, being deleted included.
type Handler struct {
	Check CheckFunc
	// Metrics counts the reviews (nil: not counted).
	Metrics *Metrics

	once   sync.Once
	queue  *fairQueue // maxReviews slots, maxWaiting places
	bodies *byteBudget
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.once.Do(func() {
		if h.queue == nil {
			h.queue = newFairQueue(maxReviews, maxWaiting)
		}
		if h.bodies == nil {
			h.bodies = newByteBudget(bodyBytes, bodyBytesPerClient)
		}
	})
	result := resultBadRequest
	defer h.Metrics.observe(time.Now(), &result)
	client := clientOf(r)
	if r.ContentLength > MaxRequestBytes {
		refuse(w, io.LimitReader(r.Body, busyPeekBytes), tooLarge(r.ContentLength), http.StatusRequestEntityTooLarge)
		return
	}
	reserved := int64(MaxRequestBytes)
	if r.ContentLength >= 0 {
		reserved = r.ContentLength
	}
	if !h.bodies.take(client, reserved) {
		result = resultBusy
		refuse(w, io.LimitReader(r.Body, busyPeekBytes), busy(), http.StatusTooManyRequests)
		return
	}
	defer func() { h.bodies.give(client, reserved) }()
	// The server's ReadTimeout is for a whole connection's request; the
	// body gets less, and no slot while it arrives.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(bodyReadTimeout))
	body, err := readBody(http.MaxBytesReader(w, r.Body, reserved), r.ContentLength)
	if err != nil {
		var tooLong *http.MaxBytesError
		if errors.As(err, &tooLong) {
			refuse(w, bytes.NewReader(body[:min(len(body), busyPeekBytes)]), tooLarge(-1), http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, fmt.Sprintf("reading the AdmissionReview: %v", err), http.StatusBadRequest)
		return
	}
	// What the body holds from now on (a chunked one reserved the most).
	h.bodies.give(client, reserved-int64(len(body)))
	reserved = int64(len(body))

	if !h.queue.acquire(r.Context(), client, maxReviewWait) {
		result = resultBusy
		refuse(w, bytes.NewReader(body[:min(len(body), busyPeekBytes)]), busy(), http.StatusTooManyRequests)
		return
	}
	defer h.queue.release()
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
		http.Error(w, fmt.Sprintf("not an AdmissionReview: %v", err), http.StatusBadRequest)
		return
	}
	resp := h.review(review.Request)
	resp.UID = review.Request.UID
	result = reviewResult(resp)
	writeReview(w, review.TypeMeta, resp)
}

// readBody reads a body of length bytes (-1: unknown) into one buffer of
// that length, not a series of growing ones.
func readBody(r io.Reader, length int64) ([]byte, error) {
	if length < 0 {
		return io.ReadAll(r)
	}
	var buf bytes.Buffer
	buf.Grow(int(length) + bytes.MinRead) // ReadFrom wants MinRead free for the read that finds the end
	_, err := buf.ReadFrom(r)
	return buf.Bytes(), err
}

func busy() metav1.Status {
	return apierrors.NewTooManyRequests("PaV's admission webhook is busy validating other PavProvisioners; try again", 1).Status()
}

// tooLarge is the answer to a review of more than MaxRequestBytes (size:
// its length, -1 if unknown).
func tooLarge(size int64) metav1.Status {
	n := "more"
	if size >= 0 {
		n = fmt.Sprint(size)
	}
	msg := fmt.Sprintf("the AdmissionReview has %s bytes, PaV's admission webhook reads at most %d: a PavProvisioner's spec may have at most %d bytes of JSON",
		n, MaxRequestBytes, templating.MaxSpecBytes)
	return metav1.Status{Status: metav1.StatusFailure, Code: http.StatusRequestEntityTooLarge, Reason: metav1.StatusReasonRequestEntityTooLarge, Message: msg}
}

func writeReview(w http.ResponseWriter, tm metav1.TypeMeta, resp *admissionv1.AdmissionResponse) {
	out := admissionv1.AdmissionReview{TypeMeta: tm, Response: resp}
	if out.APIVersion == "" {
		out.APIVersion, out.Kind = "admission.k8s.io/v1", "AdmissionReview"
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&out)
}

// clientOf is who sent a review, for fairness: its address without the port
// (one client may open many connections).
func clientOf(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// refuse denies a review the handler does not work on, with status, which
// the user sees (the API server needs the review's UID for that, read from
// prefix: without one near the start of the body, the answer is a bare HTTP
// code).
func refuse(w http.ResponseWriter, prefix io.Reader, status metav1.Status, code int) {
	tm, uid, ok := peekReview(prefix)
	if !ok {
		http.Error(w, status.Message, code)
		return
	}
	resp := deny(status)
	resp.UID = uid
	writeReview(w, tm, resp)
}

// peekReview reads an AdmissionReview's type and request UID as a stream,
// never holding more of it than one JSON token.
func peekReview(r io.Reader) (tm metav1.TypeMeta, uid types.UID, ok bool) {
	dec := json.NewDecoder(r)
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return tm, "", false
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return tm, "", false
		}
		switch key {
		case "apiVersion":
			err = dec.Decode(&tm.APIVersion)
		case "kind":
			err = dec.Decode(&tm.Kind)
		case "request":
			uid, ok = peekUID(dec)
			return tm, uid, ok
		default:
			err = skipValue(dec)
		}
		if err != nil {
			return tm, "", false
		}
	}
	return tm, "", false
}

func peekUID(dec *json.Decoder) (types.UID, bool) {
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", false
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return "", false
		}
		if key == "uid" {
			var uid types.UID
			return uid, dec.Decode(&uid) == nil && uid != ""
		}
		if skipValue(dec) != nil {
			return "", false
		}
	}
	return "", false
}

// skipValue reads past one JSON value, token by token.
func skipValue(dec *json.Decoder) error {
	depth := 0
	for {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		switch t {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 0 {
			return nil
		}
	}
}

// reviewedObject is what the handler decodes of a PavProvisioner before
// its spec is known to be within bounds: nothing of the metadata but what
// validation reads, the spec as it came.
type reviewedObject struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Spec json.RawMessage `json:"spec"`
}

func (h *Handler) review(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	allow := &admissionv1.AdmissionResponse{Allowed: true}
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return allow
	}
	var obj reviewedObject
	if err := json.Unmarshal(req.Object.Raw, &obj); err != nil {
		return deny(apierrors.NewBadRequest(fmt.Sprintf("decoding PavProvisioner: %v", err)).Status())
	}
	if req.Operation == admissionv1.Update {
		var old reviewedObject
		if err := json.Unmarshal(req.OldObject.Raw, &old); err == nil && sameJSON(old.Spec, obj.Spec) {
			return allow
		}
	}
	gk := schema.GroupKind{Group: v1alpha1.GroupName, Kind: v1alpha1.Kind}
	if errs := templating.CheckSpecBounds(obj.Spec); len(errs) > 0 {
		return deny(apierrors.NewInvalid(gk, obj.Metadata.Name, errs).Status())
	}
	p := v1alpha1.PavProvisioner{TypeMeta: obj.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: obj.Metadata.Name, Namespace: obj.Metadata.Namespace}}
	if len(obj.Spec) > 0 {
		if err := json.Unmarshal(obj.Spec, &p.Spec); err != nil {
			return deny(apierrors.NewBadRequest(fmt.Sprintf("decoding PavProvisioner: %v", err)).Status())
		}
	}
	errs, warnings := h.Check(&p)
	if len(errs) > 0 {
		return deny(apierrors.NewInvalid(gk, p.Name, errs).Status())
	}
	for _, w := range warnings {
		allow.Warnings = append(allow.Warnings, w.Error())
	}
	return allow
}

// sameJSON reports whether two JSON texts are the same but for whitespace
// (the API server encodes an object's old and new versions alike, keys
// sorted).
func sameJSON(a, b []byte) bool {
	var ca, cb bytes.Buffer
	return json.Compact(&ca, a) == nil && json.Compact(&cb, b) == nil && bytes.Equal(ca.Bytes(), cb.Bytes())
}

func deny(s metav1.Status) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Allowed: false, Result: &s}
}

// Server serves the webhook over TLS with certificates from a Secret and
// keeps the CA bundle of the ValidatingWebhookConfiguration up to date.
type Server struct {
	Kube              kubeclient.Interface
	Namespace         string // of the Secret and Service
	SecretName        string
	ServiceName       string
	WebhookConfigName string
	Addr              string
	Handler           http.Handler
	// ExtraNames are more DNS names or IP addresses for the certificate
	// (e.g. when the API server calls the webhook by URL).
	ExtraNames []string
	// RecheckInterval is how often the Secret is checked for certificates
	// to renew, besides whenever it changes (default: an hour).
	RecheckInterval time.Duration
	// ClientCAFile, if set, is a PEM file of the CAs whose client
	// certificates are let in (the API server's): any other caller is
	// refused at the TLS handshake. ClientNames, if set, are the names (CN
	// or DNS SAN) one of which that certificate must carry.
	ClientCAFile string
	ClientNames  []string
	// ClientCAOptional: a ClientCAFile that does not exist (yet) lets any
	// caller in until it does (an optional ConfigMap not created).
	ClientCAOptional bool

	now func() time.Time // the clock for certificate decisions; nil: time.Now

	ready    atomic.Bool
	draining atomic.Bool
	// bundled: the webhook configuration carries our CA (or there is none
	// to keep): until then the API server would refuse our certificate.
	bundled atomic.Bool

	refreshing sync.Mutex                      // one refresh at a time, so cert and certs move forward together
	certs      atomic.Pointer[Certs]           // the Secret's content as last read
	cert       atomic.Pointer[tls.Certificate] // served
	recheck    chan struct{}                   // re-read the Secret now
	newBundle  chan struct{}                   // certs.CACert changed
	addr       net.Addr                        // where it listens, set before ready
}

// Ready reports whether the server is serving with a certificate the API
// server trusts (its CA is in the webhook configuration) and is not draining.
func (s *Server) Ready() bool { return s.ready.Load() && s.bundled.Load() && !s.draining.Load() }

// Drain prepares a graceful stop: Ready turns false (so the replica leaves
// the Service's endpoints), and every answer closes its connection (so the
// API server's next request opens a new one, which goes to a ready replica),
// while requests that still arrive are answered until Run's context ends.
// Idle connections are not closed here: the API server may be writing a
// request into one at that very moment (a "broken pipe" it does not retry).
func (s *Server) Drain() { s.draining.Store(true) }

func (s *Server) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}

func (s *Server) names() []string {
	return append(DNSNames(s.ServiceName, s.Namespace), s.ExtraNames...)
}

// Run obtains the certificate, starts serving and, until ctx ends, renews
// the certificate when due (serving the Secret's current one, whichever
// replica renewed it) and keeps the CA bundle in place (re-patching if
// someone re-applies the manifest).
func (s *Server) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	s.recheck = make(chan struct{}, 1)
	s.newBundle = make(chan struct{}, 1)

	// Watch the one Secret (by name, which a Role's resourceNames can allow)
	// from the start, so that no change after the first read is missed.
	secrets := kubeclient.NewInformer(s.Kube, s.Kube.CoreV1().Secrets(s.Namespace), &corev1.Secret{}, 0,
		kubeclient.Selector{Field: "metadata.name=" + s.SecretName})
	secretChanged := func(obj interface{}) {
		if m, err := meta.Accessor(obj); err == nil && m.GetName() == s.SecretName {
			notify(s.recheck)
		}
	}
	_, err := secrets.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    secretChanged,
		UpdateFunc: func(_, n interface{}) { secretChanged(n) },
		// A deleted Secret is re-created by the next refresh.
		DeleteFunc: func(interface{}) { notify(s.recheck) },
	})
	if err != nil {
		cancel()
		return fmt.Errorf("watching Secret %s/%s: %w", s.Namespace, s.SecretName, err)
	}
	secretsStopped := kubeclient.Run(ctx, secrets)
	defer func() {
		cancel() // first: the informer stops when ctx ends
		secretsStopped()
	}()

	tlsConfig := &tls.Config{
		// Every handshake takes the current certificate: a renewed one
		// is served without a restart.
		GetCertificate: s.getCertificate,
		MinVersion:     tls.VersionTLS12,
	}
	if s.ClientCAFile != "" {
		tlsConfig.NextProtos = []string{"h2", "http/1.1"} // as ServeTLS sets on the config it is given
		ca, err := newClientAuth(s.ClientCAFile, s.ClientNames, s.ClientCAOptional, tlsConfig)
		if err != nil {
			return err
		}
		tlsConfig.GetConfigForClient = ca.configForClient
	}
	if err := retry(ctx, func() error { return s.refresh(ctx) }); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return fmt.Errorf("webhook listener: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle(Path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.draining.Load() {
			w.Header().Set("Connection", "close")
		}
		s.Handler.ServeHTTP(w, r)
	}))
	srv := &http.Server{
		Handler: mux,
		// The API server waits at most 30 s (timeoutSeconds) for an answer;
		// a client that sends or reads slowly must not hold a connection longer.
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       90 * time.Second,
		MaxHeaderBytes:    64 << 10,
		TLSConfig:         tlsConfig,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeTLS(ln, "", "") }()
	s.addr = ln.Addr()
	s.ready.Store(true)
	klog.InfoS("Serving admission webhook", "addr", s.Addr)

	go s.keepCert(ctx)
	if s.WebhookConfigName != "" {
		go s.keepCABundle(ctx)
	} else {
		s.bundled.Store(true)
	}
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		return nil
	case err := <-errc:
		return err
	}
}

func (s *Server) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return s.cert.Load(), nil
}

// refresh reads the Secret (renewing its certificates when due) and serves
// what it holds.
func (s *Server) refresh(ctx context.Context) error {
	s.refreshing.Lock()
	defer s.refreshing.Unlock()
	certs, err := EnsureSecretAt(ctx, s.Kube, s.Namespace, s.SecretName, s.names(), s.clock())
	if err != nil {
		return err
	}
	old := s.certs.Load()
	if old != nil && old.equal(certs) {
		return nil
	}
	if old == nil || !bytes.Equal(old.Cert, certs.Cert) || !bytes.Equal(old.Key, certs.Key) {
		pair, err := tls.X509KeyPair(certs.Cert, certs.Key)
		if err != nil {
			return fmt.Errorf("loading the webhook certificate of Secret %s/%s: %w", s.Namespace, s.SecretName, err)
		}
		s.cert.Store(&pair)
		klog.InfoS("Loaded webhook serving certificate", "secret", klog.KRef(s.Namespace, s.SecretName), "notAfter", pair.Leaf.NotAfter)
	}
	s.certs.Store(certs)
	if old == nil || !bytes.Equal(old.CACert, certs.CACert) {
		notify(s.newBundle)
	}
	return nil
}

// keepCert refreshes the certificate periodically and whenever the Secret
// changes.
func (s *Server) keepCert(ctx context.Context) {
	interval := s.RecheckInterval
	if interval <= 0 {
		interval = time.Hour
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-s.recheck:
		}
		if err := retry(ctx, func() error { return s.refresh(ctx) }); err != nil {
			klog.ErrorS(err, "Refreshing the webhook certificate")
		}
	}
}

// keepCABundle patches the Secret's CA bundle into the configuration now,
// whenever the bundle changes, and whenever the configuration changes.
//
// Replicas never fight: the Secret is the one source of the bundle, and a
// replica re-reads it before answering a change of the configuration, so a
// replica that has not yet seen a new bundle (its informer lags) does not put
// the old one back over another replica's patch.
func (s *Server) keepCABundle(ctx context.Context) {
	inf := kubeclient.NewInformer(s.Kube, s.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations(),
		&admissionregistrationv1.ValidatingWebhookConfiguration{}, 0, kubeclient.Selector{Field: "metadata.name=" + s.WebhookConfigName})
	configChanged := make(chan struct{}, 1)
	poke := func(interface{}) { notify(configChanged) }
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: poke, UpdateFunc: func(_, n interface{}) { poke(n) }})
	defer kubeclient.Run(ctx, inf)() // waits for the informer, which stops with ctx
	patch := func() error {
		return PatchCABundle(ctx, s.Kube, s.WebhookConfigName, s.certs.Load().CACert)
	}
	for {
		var err error
		select {
		case <-ctx.Done():
			return
		case <-s.newBundle:
			err = retry(ctx, patch)
		case <-configChanged:
			err = retry(ctx, func() error {
				if err := s.refresh(ctx); err != nil {
					return err
				}
				return patch()
			})
		}
		if err != nil {
			klog.ErrorS(err, "Patching the webhook CA bundle")
			continue
		}
		s.bundled.Store(true)
	}
}

// notify wakes up the receiver of c (a channel with a buffer of one) without
// blocking: wake-ups that find one pending coalesce.
func notify(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func retry(ctx context.Context, f func() error) error {
	delay := 500 * time.Millisecond
	for {
		err := f()
		if err == nil {
			return nil
		}
		klog.ErrorS(err, "Webhook certificate or CA bundle: retrying", "in", delay)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
		if delay < 30*time.Second {
			delay *= 2
		}
	}
}
