// Package webhook serves PaV's validating admission webhook for
// PavProvisioners and manages its serving certificate: a self-signed CA and
// a serving certificate kept in a Secret (shared by all controller replicas)
// and the CA bundle patched into the ValidatingWebhookConfiguration.
package webhook

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// Keys of the certificate Secret.
const (
	KeyCACert = "ca.crt"
	KeyCert   = corev1.TLSCertKey
	KeyKey    = corev1.TLSPrivateKeyKey
)

// renewBefore: a certificate closer than this to expiry is replaced.
const renewBefore = 30 * 24 * time.Hour

// Certs is the webhook's serving material.
type Certs struct {
	CACert []byte // PEM
	Cert   []byte // PEM
	Key    []byte // PEM
}

// DNSNames are the names under which the API server reaches service in
// namespace. (Generate also accepts IP addresses among the names.)
func DNSNames(service, namespace string) []string {
	return []string{
		service,
		service + "." + namespace,
		service + "." + namespace + ".svc",
		service + "." + namespace + ".svc.cluster.local",
	}
}

// Generate makes a new CA and a serving certificate for dnsNames.
func Generate(dnsNames []string, now time.Time) (*Certs, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "pav-webhook-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("creating CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	var dns []string
	var ips []net.IP
	for _, n := range dnsNames {
		if ip := net.ParseIP(n); ip != nil {
			ips = append(ips, ip)
		} else {
			dns = append(dns, n)
		}
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: dnsNames[0]},
		DNSNames:     dns,
		IPAddresses:  ips,
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(5 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("creating serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &Certs{
		CACert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		Cert:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key:    pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}

// usable reports whether certs are a valid chain for dnsNames for a while yet.
func (c *Certs) usable(dnsNames []string, now time.Time) bool {
	if _, err := tls.X509KeyPair(c.Cert, c.Key); err != nil {
		return false
	}
	block, _ := pem.Decode(c.Cert)
	if block == nil {
		return false
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil || now.Add(renewBefore).After(cert.NotAfter) {
		return false
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(c.CACert) {
		return false
	}
	for _, n := range dnsNames {
		if _, err := cert.Verify(x509.VerifyOptions{DNSName: n, Roots: pool, CurrentTime: now}); err != nil {
			return false
		}
	}
	return true
}

// EnsureSecret returns the certificates in Secret namespace/name, creating or
// renewing them when missing, unusable or close to expiry. Replicas race
// safely: the API server accepts only one create or update, the losers re-read.
func EnsureSecret(ctx context.Context, kube kubernetes.Interface, namespace, name string, dnsNames []string) (*Certs, error) {
	secrets := kube.CoreV1().Secrets(namespace)
	for attempt := 0; attempt < 5; attempt++ {
		s, err := secrets.Get(ctx, name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("reading Secret %s/%s: %w", namespace, name, err)
		}
		if err == nil {
			have := &Certs{CACert: s.Data[KeyCACert], Cert: s.Data[KeyCert], Key: s.Data[KeyKey]}
			if have.usable(dnsNames, time.Now()) {
				return have, nil
			}
		}
		certs, gerr := Generate(dnsNames, time.Now())
		if gerr != nil {
			return nil, gerr
		}
		data := map[string][]byte{KeyCACert: certs.CACert, KeyCert: certs.Cert, KeyKey: certs.Key}
		if apierrors.IsNotFound(err) {
			_, err = secrets.Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
				Type:       corev1.SecretTypeTLS,
				Data:       data,
			}, metav1.CreateOptions{})
		} else {
			s.Data = data
			_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
		}
		if err == nil {
			klog.InfoS("Generated webhook serving certificate", "secret", klog.KRef(namespace, name))
			return certs, nil
		}
		if !apierrors.IsAlreadyExists(err) && !apierrors.IsConflict(err) {
			return nil, fmt.Errorf("storing Secret %s/%s: %w", namespace, name, err)
		}
		// Another replica stored its certificate first: use that one.
	}
	return nil, fmt.Errorf("could not settle the certificate Secret %s/%s", namespace, name)
}

// PatchCABundle sets caBundle on every webhook of the named configuration.
func PatchCABundle(ctx context.Context, kube kubernetes.Interface, configName string, ca []byte) error {
	for attempt := 0; attempt < 5; attempt++ {
		cfg, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, configName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("reading ValidatingWebhookConfiguration %s: %w", configName, err)
		}
		changed := false
		for i := range cfg.Webhooks {
			if !bytes.Equal(cfg.Webhooks[i].ClientConfig.CABundle, ca) {
				cfg.Webhooks[i].ClientConfig.CABundle = ca
				changed = true
			}
		}
		if !changed {
			return nil
		}
		_, err = kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(ctx, cfg, metav1.UpdateOptions{})
		if err == nil {
			klog.InfoS("Patched CA bundle", "validatingWebhookConfiguration", configName)
			return nil
		}
		if !apierrors.IsConflict(err) {
			return fmt.Errorf("updating ValidatingWebhookConfiguration %s: %w", configName, err)
		}
	}
	return fmt.Errorf("updating ValidatingWebhookConfiguration %s: too many conflicts", configName)
}
