package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/albertofaria/pav/internal/testwait"
	"github.com/albertofaria/pav/kubeclient"
	"github.com/albertofaria/pav/kubeclient/generated/clientset/fake"
)

const year = 365 * 24 * time.Hour

// fakeClock is the time certificates are judged at: tests move it instead of
// sleeping.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func leafOf(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(certPEM)
	if block == nil {
		t.Fatal("no certificate in PEM")
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// verifiesAgainst reports whether leaf is valid for names under the CA bundle.
func verifiesAgainst(leaf *x509.Certificate, bundle []byte, names []string, now time.Time) bool {
	return verifies(leaf, parseCerts(bundle), names, now)
}

const testNS, testSecret, testConfig = "pav", "pav-webhook-cert", "pav.albertofaria.github.io"

func testServer(kube kubeclient.Interface, clock *fakeClock) *Server {
	return &Server{
		Kube: kube, Namespace: testNS, SecretName: testSecret, ServiceName: "pav-webhook",
		WebhookConfigName: testConfig, Addr: "127.0.0.1:0", Handler: http.NotFoundHandler(),
		now: clock.Now,
	}
}

// start runs s until the test ends and waits until it serves.
func start(t *testing.T, s *Server) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	testwait.Until(t, "the server to serve", func() bool {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("Run returned early: %v", err)
		default:
		}
		return s.Ready()
	})
}

// served is the certificate a TLS client gets from s (through GetCertificate).
func served(t *testing.T, s *Server) *x509.Certificate {
	t.Helper()
	conn, err := tls.Dial("tcp", s.addr.String(), &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0]
}

func secretData(t *testing.T, kube kubeclient.Interface) map[string][]byte {
	t.Helper()
	s, err := kube.CoreV1().Secrets(testNS).Get(context.Background(), testSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s.Data
}

// newKube is a fake API server that, like a real one, refuses an update of
// the Secret based on a stale resourceVersion (the fake's tracker takes the
// last write), so that racing replicas meet conflicts as in a cluster.
func newKube(objs ...runtime.Object) *fake.Clientset {
	kube := fake.NewSimpleClientset(objs...)
	var rv int
	stored := map[string]string{} // Secret name -> resourceVersion
	kube.PrependReactor("*", "secrets", func(action k8stesting.Action) (bool, runtime.Object, error) {
		// Reactors run under the fake's lock: check and store are atomic.
		var obj metav1.Object
		switch a := action.(type) {
		case k8stesting.CreateAction:
			obj = a.GetObject().(metav1.Object)
			if _, ok := stored[obj.GetName()]; ok {
				return false, nil, nil // the tracker answers AlreadyExists
			}
		case k8stesting.UpdateAction:
			obj = a.GetObject().(metav1.Object)
			if obj.GetResourceVersion() != stored[obj.GetName()] {
				return true, nil, apierrors.NewConflict(corev1.Resource("secrets"), obj.GetName(), errors.New("stale resourceVersion"))
			}
		case k8stesting.DeleteAction:
			delete(stored, a.GetName())
			return false, nil, nil
		default:
			return false, nil, nil
		}
		rv++
		obj.SetResourceVersion(strconv.Itoa(rv))
		stored[obj.GetName()] = obj.GetResourceVersion()
		return false, nil, nil
	})
	return kube
}

func webhookConfig() *admissionregistrationv1.ValidatingWebhookConfiguration {
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: testConfig},
		Webhooks:   []admissionregistrationv1.ValidatingWebhook{{Name: "a"}, {Name: "b"}},
	}
}

// (a) Two replicas against one API server settle on the Secret's bundle with
// a few updates of the configuration: at start, after someone resets the
// bundle, after a CA rotation, and when one replica's view of the Secret
// lags behind.
func TestReplicasConvergeOnOneCABundle(t *testing.T) {
	kube := newKube(webhookConfig())
	var updates atomic.Int32
	kube.PrependReactor("update", "validatingwebhookconfigurations", func(k8stesting.Action) (bool, runtime.Object, error) {
		updates.Add(1)
		return false, nil, nil // counted only; the tracker stores it
	})
	t0 := time.Now()
	clock := &fakeClock{t: t0}
	a, b := testServer(kube, clock), testServer(kube, clock)
	start(t, a)
	start(t, b)

	ctx := context.Background()
	converged := func() bool {
		s, err := kube.CoreV1().Secrets(testNS).Get(ctx, testSecret, metav1.GetOptions{})
		if err != nil {
			return false
		}
		bundle := s.Data[KeyCACert]
		cfg, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, testConfig, metav1.GetOptions{})
		if err != nil || len(bundle) == 0 {
			return false
		}
		for _, w := range cfg.Webhooks {
			if !bytes.Equal(w.ClientConfig.CABundle, bundle) {
				return false
			}
		}
		return bytes.Equal(a.certs.Load().CACert, bundle) && bytes.Equal(b.certs.Load().CACert, bundle)
	}
	testwait.Until(t, "one CA bundle at start", converged)
	t.Logf("updates after start: %d", updates.Load())

	// Someone re-applies the configuration without a bundle.
	cfg, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, testConfig, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range cfg.Webhooks {
		cfg.Webhooks[i].ClientConfig.CABundle = nil
	}
	if _, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(ctx, cfg, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "the bundle restored", converged)
	t.Logf("updates after a reset: %d", updates.Load())

	// The serving certificate nears expiry: renewed with the same CA, so the
	// bundle and the configuration stay as they are.
	oldBundle := a.certs.Load().CACert
	before := updates.Load()
	clock.Set(served(t, a).NotAfter.Add(-renewBefore / 2))
	notify(a.recheck)
	notify(b.recheck)
	testwait.Until(t, "both replicas to serve the renewed certificate", func() bool {
		leaf := leafOf(t, secretData(t, kube)[KeyCert])
		return leaf.NotAfter.After(clock.Now().Add(renewBefore)) && served(t, a).Equal(leaf) && served(t, b).Equal(leaf)
	})
	if !converged() || !bytes.Equal(a.certs.Load().CACert, oldBundle) || updates.Load() != before {
		t.Error("renewing the serving certificate changed the bundle")
	}

	// The CA nears expiry: both replicas re-check; one rotates, both follow.
	oldLeaf := served(t, a)
	clock.Set(t0.Add(caValidity - caRenewBefore/2))
	notify(a.recheck)
	notify(b.recheck)
	testwait.Until(t, "one bundle after a CA rotation", func() bool {
		return converged() && !bytes.Equal(a.certs.Load().CACert, oldBundle)
	})
	bundle := secretData(t, kube)[KeyCACert]
	if n := len(parseCerts(bundle)); n != 2 {
		t.Errorf("bundle after rotation: %d CAs, want 2", n)
	}
	if !verifiesAgainst(oldLeaf, bundle, a.names(), clock.Now()) {
		t.Error("the certificate served before the rotation does not verify against the new bundle")
	}
	t.Logf("updates after a CA rotation: %d", updates.Load())

	// b has not seen the latest Secret yet (its informer lags) when the
	// configuration changes: it must not put its old bundle back.
	b.refreshing.Lock()
	b.certs.Store(&Certs{CACert: oldBundle})
	b.refreshing.Unlock()
	cfg, err = kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, testConfig, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Webhooks[0].ClientConfig.CABundle = oldBundle
	if _, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(ctx, cfg, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "one bundle after a lagging replica saw a change", converged)

	// Settled: re-checks change nothing.
	before = updates.Load()
	for _, s := range []*Server{a, b} {
		if err := s.refresh(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if !converged() || updates.Load() != before {
		t.Error("a settled state changed on re-check")
	}
	// The test itself made 2 of the updates.
	if n := updates.Load() - 2; n >= 10 {
		t.Errorf("the replicas updated the webhook configuration %d times, want < 10 (fighting?)", n)
	}
	t.Logf("updates in all: %d (2 by the test)", updates.Load())
}

// (b) A certificate near expiry is renewed while serving, with the same CA,
// and the new one is served without a restart; so is one another replica
// stored.
func TestRenewsNearExpiryWithoutRestart(t *testing.T) {
	kube := newKube(webhookConfig())
	t0 := time.Now()
	clock := &fakeClock{t: t0}
	s := testServer(kube, clock)
	start(t, s)

	first := served(t, s)
	caBefore := secretData(t, kube)[KeyCACert]
	clock.Set(first.NotAfter.Add(-renewBefore / 3))
	notify(s.recheck) // what the hourly tick does
	testwait.Until(t, "a renewed certificate to be served", func() bool {
		return !s.cert.Load().Leaf.Equal(first)
	})
	renewed := served(t, s)
	if renewed.Equal(first) {
		t.Fatal("TLS clients still get the old certificate")
	}
	if !renewed.NotAfter.After(clock.Now().Add(renewBefore)) {
		t.Errorf("renewed certificate expires %v, too soon", renewed.NotAfter)
	}
	data := secretData(t, kube)
	if !bytes.Equal(data[KeyCACert], caBefore) {
		t.Error("the CA was replaced although it is valid for years")
	}
	if !bytes.Equal(leafOf(t, data[KeyCert]).Raw, renewed.Raw) {
		t.Error("the served certificate is not the Secret's")
	}
	if !verifiesAgainst(renewed, caBefore, s.names(), clock.Now()) {
		t.Error("the renewed certificate does not verify against the CA")
	}

	// Another replica renews (here: the test, with new material): served
	// at once, without a re-check by this one.
	other, err := Generate(s.names(), clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	sec, err := kube.CoreV1().Secrets(testNS).Get(context.Background(), testSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sec.Data = map[string][]byte{KeyCACert: other.CACert, KeyCAKey: other.CAKey, KeyCert: other.Cert, KeyKey: other.Key}
	if _, err := kube.CoreV1().Secrets(testNS).Update(context.Background(), sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := leafOf(t, other.Cert)
	testwait.Until(t, "the other replica's certificate to be served", func() bool {
		return s.cert.Load().Leaf.Equal(want)
	})
	if !served(t, s).Equal(want) {
		t.Error("TLS clients do not get the other replica's certificate")
	}
}

// (c) The CA's life: serving certificates renewed with it while it is valid
// for long; a year before its end a new CA joins the bundle (the serving
// certificate in use keeps verifying), signs the next serving certificate
// once settled, and the old CA leaves the bundle when it expires. The bundle
// never holds more than two CAs.
func TestCARotation(t *testing.T) {
	kube := fake.NewSimpleClientset()
	ctx := context.Background()
	names := DNSNames("svc", "pav")
	t0 := time.Now()
	ensure := func(at time.Time) *Certs {
		t.Helper()
		c, err := EnsureSecretAt(ctx, kube, "pav", "cert", names, at)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(parseCerts(c.CACert)); n < 1 || n > maxCAs {
			t.Fatalf("bundle of %d CAs", n)
		}
		if !verifiesAgainst(leafOf(t, c.Cert), c.CACert, names, at) {
			t.Fatalf("at %v: Secret holds a certificate that does not verify", at.Sub(t0))
		}
		return c
	}
	c0 := ensure(t0)
	ca0 := parseCerts(c0.CACert)[0]

	// Serving certificate near expiry, CA valid for years: same CA.
	t1 := leafOf(t, c0.Cert).NotAfter.Add(-renewBefore / 2)
	c1 := ensure(t1)
	if !bytes.Equal(c1.CACert, c0.CACert) || !bytes.Equal(c1.CAKey, c0.CAKey) || bytes.Equal(c1.Cert, c0.Cert) {
		t.Fatal("renewal replaced the CA or kept the certificate")
	}
	leaf1 := leafOf(t, c1.Cert)
	if leaf1.NotAfter.After(ca0.NotAfter) {
		t.Error("serving certificate outlives its CA")
	}

	// A year before the CA's end: a new CA first in the bundle, the old one
	// kept, the serving certificate in use unchanged and still verifying.
	t2 := ca0.NotAfter.Add(-caRenewBefore / 2)
	c2 := ensure(t2)
	cas := parseCerts(c2.CACert)
	if len(cas) != 2 || !cas[1].Equal(ca0) || cas[0].Equal(ca0) {
		t.Fatalf("bundle after rotation: %d CAs, want the new then the old", len(cas))
	}
	if !bytes.Equal(c2.Cert, c1.Cert) {
		t.Error("the serving certificate changed with the CA (before the bundle could propagate)")
	}
	if !verifiesAgainst(leaf1, c2.CACert, names, t2) {
		t.Error("the old serving certificate does not verify against the bundle")
	}
	if block, _ := pem.Decode(c2.CAKey); block == nil {
		t.Error("no CA key stored")
	} else if k, err := x509.ParseECPrivateKey(block.Bytes); err != nil || !k.PublicKey.Equal(cas[0].PublicKey) {
		t.Errorf("ca.key is not the new CA's key (%v)", err)
	}
	if c := ensure(t2.Add(time.Hour)); !c.equal(c2) {
		t.Error("a fresh state changed on re-check")
	}

	// The serving certificate nears its end: signed by the new CA; both
	// serving certificates verify against the bundle.
	t3 := leaf1.NotAfter.Add(-renewBefore / 2)
	c3 := ensure(t3)
	leaf3 := leafOf(t, c3.Cert)
	if !bytes.Equal(c3.CACert, c2.CACert) || leaf3.CheckSignatureFrom(cas[0]) != nil {
		t.Fatal("the new serving certificate is not signed by the new CA")
	}
	if !verifiesAgainst(leaf1, c3.CACert, names, t3) || !verifiesAgainst(leaf3, c3.CACert, names, t3) {
		t.Error("old and new serving certificates do not both verify against the bundle")
	}

	// The old CA expired: it leaves the bundle.
	t4 := ca0.NotAfter.Add(time.Hour)
	c4 := ensure(t4)
	if cas := parseCerts(c4.CACert); len(cas) != 1 || !cas[0].Equal(parseCerts(c3.CACert)[0]) {
		t.Errorf("bundle after the old CA expired: %d CAs", len(cas))
	}

	// The next rotation again keeps two CAs.
	t5 := parseCerts(c4.CACert)[0].NotAfter.Add(-caRenewBefore / 2)
	if n := len(parseCerts(ensure(t5).CACert)); n != 2 {
		t.Errorf("bundle after the second rotation: %d CAs, want 2", n)
	}
}

// A Secret of an older version (no ca.key) is left alone while its
// certificate is fresh (a rolling upgrade changes nothing); when the
// certificate needs renewing, a new CA is staged first; when the certificate
// is unusable, new CA and certificate come at once, the old CA kept.
func TestSecretWithoutCAKey(t *testing.T) {
	ctx := context.Background()
	names := DNSNames("svc", "pav")
	t0 := time.Now()
	old, err := Generate(names, t0)
	if err != nil {
		t.Fatal(err)
	}
	secret := func() *corev1.Secret {
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "cert", Namespace: "pav"},
			Type:       corev1.SecretTypeTLS,
			Data:       map[string][]byte{KeyCACert: old.CACert, KeyCert: old.Cert, KeyKey: old.Key},
		}
	}
	kube := fake.NewSimpleClientset(secret())
	c, err := EnsureSecretAt(ctx, kube, "pav", "cert", names, t0)
	if err != nil || c.CAKey != nil || !bytes.Equal(c.Cert, old.Cert) {
		t.Fatalf("fresh Secret without ca.key changed (%v)", err)
	}

	near := leafOf(t, old.Cert).NotAfter.Add(-renewBefore / 2)
	c, err = EnsureSecretAt(ctx, kube, "pav", "cert", names, near)
	if err != nil {
		t.Fatal(err)
	}
	if cas := parseCerts(c.CACert); len(cas) != 2 || !bytes.Equal(c.Cert, old.Cert) || c.CAKey == nil {
		t.Fatalf("near expiry without ca.key: %d CAs, certificate changed %v; want a staged new CA", len(cas), !bytes.Equal(c.Cert, old.Cert))
	}
	later := near.Add(caSettle + time.Minute)
	c2, err := EnsureSecretAt(ctx, kube, "pav", "cert", names, later)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(c2.Cert, old.Cert) || leafOf(t, c2.Cert).CheckSignatureFrom(parseCerts(c.CACert)[0]) != nil {
		t.Error("once settled, the certificate is not renewed with the new CA")
	}

	// Unusable (other names) and no ca.key: new CA and certificate at once.
	kube = fake.NewSimpleClientset(secret())
	other := DNSNames("renamed", "pav")
	c, err = EnsureSecretAt(ctx, kube, "pav", "cert", other, t0)
	if err != nil {
		t.Fatal(err)
	}
	cas := parseCerts(c.CACert)
	if len(cas) != 2 || !cas[1].Equal(parseCerts(old.CACert)[0]) {
		t.Fatalf("bundle: %d CAs, want the new then the old", len(cas))
	}
	if !verifiesAgainst(leafOf(t, c.Cert), c.CACert, other, t0) || !verifiesAgainst(leafOf(t, old.Cert), c.CACert, names, t0) {
		t.Error("new and old certificates do not both verify against the bundle")
	}
}

// Replicas configured with different names settle on one certificate valid
// for all of them instead of replacing each other's.
func TestDifferentNamesConverge(t *testing.T) {
	kube := fake.NewSimpleClientset()
	ctx := context.Background()
	now := time.Now()
	a, b := DNSNames("svc", "pav"), append(DNSNames("svc", "pav"), "127.0.0.1")
	var last, bundle []byte
	for i := 0; i < 4; i++ {
		names := a
		if i%2 == 1 {
			names = b
		}
		c, err := EnsureSecretAt(ctx, kube, "pav", "cert", names, now)
		if err != nil {
			t.Fatal(err)
		}
		if i >= 2 && !bytes.Equal(c.Cert, last) {
			t.Fatalf("round %d replaced the certificate again", i)
		}
		last, bundle = c.Cert, c.CACert
	}
	if !verifiesAgainst(leafOf(t, last), bundle, a, now) || !verifiesAgainst(leafOf(t, last), bundle, b, now) {
		t.Error("settled certificate not valid for all names")
	}
}

// A replica is not ready while the webhook configuration lacks its CA: the
// API server would refuse its certificate. Ready follows the first patch.
func TestNotReadyUntilCABundlePatched(t *testing.T) {
	kube := newKube() // no webhook configuration yet
	s := testServer(kube, &fakeClock{t: time.Now()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	testwait.Until(t, "the server to listen", s.ready.Load)
	if s.Ready() {
		t.Fatal("ready without a webhook configuration to carry its CA")
	}
	if _, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, webhookConfig(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "the server to be ready", s.Ready)
	cfg, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, testConfig, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range cfg.Webhooks {
		if len(w.ClientConfig.CABundle) == 0 {
			t.Errorf("ready, but webhook %s has no CA bundle", w.Name)
		}
	}
}
