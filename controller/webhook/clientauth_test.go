package webhook

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// clientCert is a client certificate for cn signed by ca.
func clientCert(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, cn string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// writeCA replaces file with ca's PEM as kubelet updates a ConfigMap volume:
// a new file renamed over the old one.
func writeCA(t *testing.T, file string, ca *x509.Certificate) {
	t.Helper()
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, encodeCert(ca.Raw), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
}

// With a client CA, the webhook answers only callers whose certificate that
// CA signed (and, with names, that carry one of them); anyone else is
// refused at the handshake. A new CA in the file applies to the next
// connection, without a restart.
func TestClientCertificateRequired(t *testing.T) {
	now := time.Now()
	ca1, key1, err := newCA(now)
	if err != nil {
		t.Fatal(err)
	}
	ca2, key2, err := newCA(now)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "ca.crt")
	writeCA(t, file, ca1)

	s := testServer(newKube(webhookConfig()), &fakeClock{t: now})
	s.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "answered") })
	s.ClientCAFile, s.ClientNames = file, []string{"apiserver"}
	start(t, s)

	call := func(certs ...tls.Certificate) error {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, Certificates: certs}}}
		defer c.CloseIdleConnections()
		resp, err := c.Post("https://"+s.addr.String()+Path, "application/json", nil)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err == nil && string(body) != "answered" {
			t.Fatalf("answer %q", body)
		}
		return err
	}
	for _, c := range []struct {
		what   string
		certs  []tls.Certificate
		answer bool
	}{
		{"no client certificate", nil, false},
		{"the API server's certificate", []tls.Certificate{clientCert(t, ca1, key1, "apiserver")}, true},
		{"another name from the same CA", []tls.Certificate{clientCert(t, ca1, key1, "tenant")}, false},
		{"the API server's name from another CA", []tls.Certificate{clientCert(t, ca2, key2, "apiserver")}, false},
	} {
		if err := call(c.certs...); (err == nil) != c.answer {
			t.Errorf("%s: error %v, want answered %v", c.what, err, c.answer)
		}
	}

	writeCA(t, file, ca2)
	if err := call(clientCert(t, ca2, key2, "apiserver")); err != nil {
		t.Errorf("the new CA's client after the file changed: %v", err)
	}
	if err := call(clientCert(t, ca1, key1, "apiserver")); err == nil {
		t.Error("the old CA's client after the file changed: answered")
	}

	// A file that became unreadable keeps the CA last read.
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if err := call(); err == nil {
		t.Error("no client certificate once the file is gone: answered")
	}
	if err := call(clientCert(t, ca2, key2, "apiserver")); err != nil {
		t.Errorf("the last CA's client once the file is gone: %v", err)
	}
}

// An optional client CA file lets any caller in while it does not exist,
// and requires a certificate from its CA once it appears.
func TestOptionalClientCA(t *testing.T) {
	now := time.Now()
	ca, key, err := newCA(now)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "ca.crt")
	s := testServer(newKube(webhookConfig()), &fakeClock{t: now})
	s.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "answered") })
	s.ClientCAFile, s.ClientCAOptional = file, true
	start(t, s)
	call := func(certs ...tls.Certificate) error {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, Certificates: certs}}}
		defer c.CloseIdleConnections()
		resp, err := c.Post("https://"+s.addr.String()+Path, "application/json", nil)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := call(); err != nil {
		t.Errorf("no client certificate, no CA file: %v", err)
	}
	writeCA(t, file, ca)
	if err := call(); err == nil {
		t.Error("no client certificate once the CA file exists: answered")
	}
	if err := call(clientCert(t, ca, key, "apiserver")); err != nil {
		t.Errorf("the CA's client once the file exists: %v", err)
	}
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if err := call(); err == nil {
		t.Error("no client certificate once the file read is gone: answered")
	}
}

// A client CA file without a certificate stops the server before it serves.
func TestClientCAFileInvalid(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(file, []byte("not PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := testServer(newKube(webhookConfig()), &fakeClock{t: time.Now()})
	s.ClientCAFile = file
	if err := s.Run(t.Context()); err == nil {
		t.Fatal("Run with an invalid client CA: no error")
	}
}
