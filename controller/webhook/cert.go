// Package webhook serves PaV's validating admission webhook for
// PavProvisioners and manages its serving certificate: a self-signed CA and
// a serving certificate kept in a Secret (shared by all controller replicas)
// and the CA bundle patched into the ValidatingWebhookConfiguration.
//
// Rotation: the Secret's ca.crt is a bundle of at most two CAs, the signing
// CA (whose key is in ca.key) first. A CA is replaced a year before it
// expires, while the serving certificate it signed stays in use; the old CA
// stays in the bundle until it expires, so the API server trusts the
// certificates of both while the bundle propagates. The serving certificate
// is renewed with the current CA, once that CA has been in the bundle for a
// while (caSettle), unless it is unusable already.
package webhook

import (
	"bytes"
	"context"
	"crypto"
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
	"k8s.io/klog/v2"

	"github.com/albertofaria/pav/kubeclient"
)

// Keys of the certificate Secret.
const (
	KeyCACert = "ca.crt" // bundle: the signing CA, then possibly the previous one
	KeyCAKey  = "ca.key" // key of the signing CA
	KeyCert   = corev1.TLSCertKey
	KeyKey    = corev1.TLSPrivateKeyKey
)

const (
	// renewBefore: a serving certificate closer than this to expiry is replaced.
	renewBefore = 30 * 24 * time.Hour
	// caRenewBefore: a CA closer than this to expiry is replaced (and no
	// longer signs). Far more than renewBefore, so that a new CA is in the
	// bundle long before a serving certificate it signed is served.
	caRenewBefore = 365 * 24 * time.Hour
	// caSettle: how long a new CA is in the bundle before it signs a serving
	// certificate that replaces a still working one, so that every replica
	// has patched the bundle into the webhook configuration first.
	caSettle = 10 * time.Minute
	// maxCAs bounds the bundle: the signing CA and its predecessor.
	maxCAs = 2

	caValidity   = 10 * 365 * 24 * time.Hour
	certValidity = 5 * 365 * 24 * time.Hour
	// backdate tolerates clocks behind ours.
	backdate = time.Hour
)

// Certs is the webhook's serving material (all PEM).
type Certs struct {
	CACert []byte // bundle of at most maxCAs CAs, the signing one first
	CAKey  []byte // key of the signing CA; nil in Secrets of older PaV versions
	Cert   []byte
	Key    []byte
}

func (c *Certs) equal(o *Certs) bool {
	return bytes.Equal(c.CACert, o.CACert) && bytes.Equal(c.CAKey, o.CAKey) &&
		bytes.Equal(c.Cert, o.Cert) && bytes.Equal(c.Key, o.Key)
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
	ca, caKey, err := newCA(now)
	if err != nil {
		return nil, err
	}
	cert, key, err := issue(ca, caKey, dnsNames, now)
	if err != nil {
		return nil, err
	}
	keyPEM, err := encodeKey(caKey)
	if err != nil {
		return nil, err
	}
	return &Certs{CACert: encodeCert(ca.Raw), CAKey: keyPEM, Cert: cert, Key: key}, nil
}

func newCA(now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating CA key: %w", err)
	}
	// A subject of its own (serialNumber attribute), so that chain building
	// tells the old and the new CA in a bundle apart by name.
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "pav-webhook-ca", SerialNumber: serial().Text(16)},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("creating CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("parsing the new CA certificate: %w", err)
	}
	return ca, key, nil
}

// issue makes a serving certificate for dnsNames signed by ca; it does not
// outlive ca (it would not verify then).
func issue(ca *x509.Certificate, caKey crypto.Signer, dnsNames []string, now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating serving key: %w", err)
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
	notAfter := now.Add(certValidity)
	if ca.NotAfter.Before(notAfter) {
		notAfter = ca.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: dnsNames[0]},
		DNSNames:     dns,
		IPAddresses:  ips,
		NotBefore:    now.Add(-backdate),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("creating serving certificate: %w", err)
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return encodeCert(der), keyPEM, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}

func encodeCert(ders ...[]byte) []byte {
	var b []byte
	for _, der := range ders {
		b = append(b, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	return b
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

// parseCerts returns the certificates in a PEM bundle, skipping what does
// not parse.
func parseCerts(bundle []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, bundle = pem.Decode(bundle)
		if block == nil {
			return out
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		if c, err := x509.ParseCertificate(block.Bytes); err == nil {
			out = append(out, c)
		}
	}
}

// parseLeaf returns the serving certificate of c if it matches its key.
func (c *Certs) parseLeaf() *x509.Certificate {
	pair, err := tls.X509KeyPair(c.Cert, c.Key)
	if err != nil {
		return nil
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil
	}
	return leaf
}

// verifies reports whether leaf is valid for all dnsNames under one of cas.
func verifies(leaf *x509.Certificate, cas []*x509.Certificate, dnsNames []string, now time.Time) bool {
	pool := x509.NewCertPool()
	for _, ca := range cas {
		pool.AddCert(ca)
	}
	for _, n := range dnsNames {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: n, Roots: pool, CurrentTime: now}); err != nil {
			return false
		}
	}
	return len(dnsNames) > 0
}

// next returns what the Secret should hold instead of have at now, or nil
// when have is fine. It depends only on have, dnsNames and now, so replicas
// (with roughly the same clock) agree and do not undo each other's changes.
func next(have *Certs, dnsNames []string, now time.Time) (*Certs, error) {
	cas, signer, signerKey := have.signingCAs(now)
	leaf := have.parseLeaf()
	works := leaf != nil && verifies(leaf, cas, dnsNames, now)
	fresh := works && !now.Add(renewBefore).After(leaf.NotAfter)

	out := &Certs{CAKey: have.CAKey, Cert: have.Cert, Key: have.Key}
	var bundle []*x509.Certificate
	switch {
	// A new CA when the signing one nears expiry, or when the serving
	// certificate needs renewing and there is no CA key to sign it (Secrets
	// of older versions: their CA is kept while the serving certificate
	// works, so that a rolling upgrade changes nothing).
	case signer == nil || now.Add(caRenewBefore).After(signer.NotAfter) || (!fresh && signerKey == nil):
		ca, key, err := newCA(now)
		if err != nil {
			return nil, err
		}
		if out.CAKey, err = encodeKey(key); err != nil {
			return nil, err
		}
		bundle = []*x509.Certificate{ca}
		// Keep the CA that the serving certificate in use depends on.
		if old := servingCA(cas, signer, leaf, works); old != nil {
			bundle = append(bundle, old)
		}
		if !works {
			// Nothing to keep serving meanwhile: sign with the new CA now.
			if out.Cert, out.Key, err = issue(ca, key, issueNames(leaf, dnsNames, now), now); err != nil {
				return nil, err
			}
		}
	case !fresh && (!works || now.After(signer.NotBefore.Add(backdate+caSettle))):
		bundle = cas
		var err error
		if out.Cert, out.Key, err = issue(signer, signerKey, issueNames(leaf, dnsNames, now), now); err != nil {
			return nil, err
		}
	default:
		// Fine, or waiting for the new CA to settle (bundle pruned only).
		bundle = cas
	}
	raws := make([][]byte, len(bundle))
	for i, ca := range bundle {
		raws[i] = ca.Raw
	}
	out.CACert = encodeCert(raws...)
	if out.equal(have) {
		return nil, nil
	}
	return out, nil
}

// signingCAs are the CAs of have that still count at now, the signing one
// (signer, nil if none) first; signerKey is its key, if have holds it.
func (have *Certs) signingCAs(now time.Time) (cas []*x509.Certificate, signer *x509.Certificate, signerKey *ecdsa.PrivateKey) {
	for _, ca := range parseCerts(have.CACert) {
		if ca.IsCA && now.Before(ca.NotAfter) && len(cas) < maxCAs {
			cas = append(cas, ca)
		}
	}
	if len(cas) == 0 {
		return nil, nil, nil
	}
	signer = cas[0]
	if block, _ := pem.Decode(have.CAKey); block != nil {
		if k, err := x509.ParseECPrivateKey(block.Bytes); err == nil && k.PublicKey.Equal(signer.PublicKey) {
			signerKey = k
		}
	}
	return cas, signer, signerKey
}

// servingCA is the CA of cas that the serving certificate in use depends
// on: leaf's, while it works, else the signer; nil if none.
func servingCA(cas []*x509.Certificate, signer, leaf *x509.Certificate, works bool) *x509.Certificate {
	for _, old := range cas {
		if (works && leaf.CheckSignatureFrom(old) == nil) || (!works && old == signer) {
			return old
		}
	}
	return nil
}

// issueNames are the names for a serving certificate replacing leaf. When
// leaf is replaced before its time (it lacks some of dnsNames, or its CA is
// gone), its names are kept too: replicas configured with different names
// (say, during a rollout that changes them) then converge on a certificate
// valid for all of them instead of replacing each other's in turn.
func issueNames(leaf *x509.Certificate, dnsNames []string, now time.Time) []string {
	if leaf == nil || now.Add(renewBefore).After(leaf.NotAfter) {
		return dnsNames
	}
	names := append([]string(nil), dnsNames...)
	seen := map[string]bool{}
	for _, n := range dnsNames {
		seen[n] = true
	}
	for _, n := range leaf.DNSNames {
		if !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	for _, ip := range leaf.IPAddresses {
		if n := ip.String(); !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	return names
}

// EnsureSecretAt returns the certificates in Secret namespace/name, creating
// them when missing and renewing or rotating them as of now when needed.
// Replicas race safely: the API server accepts only one create or update (of
// a given resourceVersion), the losers re-read.
func EnsureSecretAt(ctx context.Context, kube kubeclient.Interface, namespace, name string, dnsNames []string, now time.Time) (*Certs, error) {
	secrets := kube.CoreV1().Secrets(namespace)
	for attempt := 0; attempt < 5; attempt++ {
		s, err := secrets.Get(ctx, name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("reading Secret %s/%s: %w", namespace, name, err)
		}
		var certs *Certs
		if err == nil {
			have := &Certs{CACert: s.Data[KeyCACert], CAKey: s.Data[KeyCAKey], Cert: s.Data[KeyCert], Key: s.Data[KeyKey]}
			certs, err = next(have, dnsNames, now)
			if err != nil {
				return nil, fmt.Errorf("renewing the certificates of Secret %s/%s: %w", namespace, name, err)
			}
			if certs == nil {
				return have, nil
			}
			if s.Data == nil {
				s.Data = map[string][]byte{}
			}
			s.Data[KeyCACert], s.Data[KeyCAKey], s.Data[KeyCert], s.Data[KeyKey] = certs.CACert, certs.CAKey, certs.Cert, certs.Key
			_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
		} else {
			if certs, err = Generate(dnsNames, now); err != nil {
				return nil, fmt.Errorf("generating the certificates of Secret %s/%s: %w", namespace, name, err)
			}
			_, err = secrets.Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
				Type:       corev1.SecretTypeTLS,
				Data:       map[string][]byte{KeyCACert: certs.CACert, KeyCAKey: certs.CAKey, KeyCert: certs.Cert, KeyKey: certs.Key},
			}, metav1.CreateOptions{})
		}
		if err == nil {
			klog.InfoS("Stored webhook certificates", "secret", klog.KRef(namespace, name), "cas", len(parseCerts(certs.CACert)))
			return certs, nil
		}
		if !apierrors.IsAlreadyExists(err) && !apierrors.IsConflict(err) {
			return nil, fmt.Errorf("storing Secret %s/%s: %w", namespace, name, err)
		}
		// Another replica stored its certificates first: use (or renew) those.
	}
	return nil, fmt.Errorf("could not settle the certificate Secret %s/%s", namespace, name)
}

// PatchCABundle sets caBundle on every webhook of the named configuration.
func PatchCABundle(ctx context.Context, kube kubeclient.Interface, configName string, ca []byte) error {
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
