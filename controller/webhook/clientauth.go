package webhook

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sync"

	"k8s.io/klog/v2"
)

// clientAuth requires every caller to present a client certificate from the
// CAs in a PEM file (the API server's, configured in its
// AdmissionConfiguration), optionally with one of a list of names, so that
// nobody else gets past the TLS handshake. The file is re-read when it
// changes (a mounted ConfigMap is updated in place): a new CA applies to the
// next handshake without a restart. An optional file that does not exist
// yet (an optional ConfigMap not created) lets any caller in until it does.
type clientAuth struct {
	file     string
	names    []string // CN or DNS SAN, one of which the certificate must carry; empty: any
	optional bool
	open     *tls.Config // the server's config without client certificates

	mu      sync.Mutex
	read    os.FileInfo // of the file last read
	config  *tls.Config // the server's config with the CAs last read
	lastErr string      // of the last reload, logged once
}

// newClientAuth reads file, which must hold at least one certificate (unless
// optional and absent), and returns the config source for base (its
// ClientAuth, ClientCAs and VerifyConnection are set here).
func newClientAuth(file string, names []string, optional bool, base *tls.Config) (*clientAuth, error) {
	c := &clientAuth{file: file, names: names, optional: optional, open: base.Clone()}
	base = base.Clone()
	base.ClientAuth = tls.RequireAndVerifyClientCert
	if len(names) > 0 {
		base.VerifyConnection = c.verifyName
	}
	c.config = base
	if err := c.reload(); err != nil {
		if c.absent(err) {
			klog.InfoS("Webhook client CA not there (yet): any caller gets past the TLS handshake until it is", "file", file)
			return c, nil
		}
		return nil, err
	}
	return c, nil
}

// absent reports whether err is an optional file that was never read and
// does not exist.
func (c *clientAuth) absent(err error) bool {
	return c.optional && c.read == nil && errors.Is(err, fs.ErrNotExist)
}

// configForClient is tls.Config.GetConfigForClient: the config with the
// file's current CAs. A file that became unreadable or empty keeps the CAs
// last read (logged once per new error, not per handshake): callers are
// never let in without a check.
func (c *clientAuth) configForClient(*tls.ClientHelloInfo) (*tls.Config, error) {
	err := c.reload()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil && c.absent(err) {
		return c.open, nil
	}
	if err != nil && err.Error() != c.lastErr {
		klog.ErrorS(err, "Webhook client CA: keeping the CAs last read")
	}
	c.lastErr = ""
	if err != nil {
		c.lastErr = err.Error()
	}
	return c.config, nil
}

// reload re-reads the file if it is another file (a ConfigMap volume's
// update replaces it) or was modified.
func (c *clientAuth) reload() error {
	fi, err := os.Stat(c.file)
	if err != nil {
		return fmt.Errorf("webhook client CA: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.read != nil && os.SameFile(c.read, fi) && fi.ModTime().Equal(c.read.ModTime()) && fi.Size() == c.read.Size() {
		return nil
	}
	pem, err := os.ReadFile(c.file)
	if err != nil {
		return fmt.Errorf("webhook client CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return fmt.Errorf("webhook client CA %s: no PEM certificate", c.file)
	}
	cfg := c.config.Clone()
	cfg.ClientCAs = pool
	c.config, c.read = cfg, fi
	klog.InfoS("Loaded webhook client CA", "file", c.file)
	return nil
}

// verifyName is tls.Config.VerifyConnection: the verified client
// certificate carries one of the allowed names.
func (c *clientAuth) verifyName(cs tls.ConnectionState) error {
	if len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return errors.New("no verified client certificate")
	}
	leaf := cs.VerifiedChains[0][0]
	if slices.Contains(c.names, leaf.Subject.CommonName) || slices.ContainsFunc(leaf.DNSNames, func(n string) bool { return slices.Contains(c.names, n) }) {
		return nil
	}
	return fmt.Errorf("client certificate %q is not one of the allowed webhook clients %v", leaf.Subject.CommonName, c.names)
}
