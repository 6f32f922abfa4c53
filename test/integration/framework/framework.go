// Package framework runs a real etcd and kube-apiserver on loopback for
// integration tests (build tag integration): no kubelet, scheduler or
// controller-manager, so nothing reconciles pods, namespaces or volumes except
// the code under test.
//
//	func TestMain(m *testing.M) { os.Exit(framework.RunMain(m)) } // optional: one server per package
//
//	func TestX(t *testing.T) {
//		env := framework.Shared(t)               // or framework.New(t): a server of its own
//		env.InstallCRDs(t, crds.CustomResourceDefinition)
//		client := kubernetes.NewForConfigOrDie(env.Config)
//	}
//
// Binaries: etcd from Debian's etcd-server (/usr/bin/etcd) and kube-apiserver
// from the cluster's cached multi-call binary ($PAV_CACHE/kube-<version>/, built by
// hack/cluster/ensure-kube.sh, which `make test-integration` runs). If one is
// missing the tests are skipped, or fail when PAV_REQUIRE_INTEGRATION is set.
//
// Differences from a full cluster: the ServiceAccount admission plugin is off
// (no controller creates "default" ServiceAccounts, so pods are accepted without
// one) and deleted namespaces stay Terminating (no namespace controller).
package framework

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/mod/semver"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Env is a running etcd + kube-apiserver pair.
type Env struct {
	// Config is an admin (system:masters) client configuration.
	Config *rest.Config
	// Dir holds certificates, etcd's data and the logs (etcd.log, kube-apiserver.log).
	Dir string

	etcd, apiserver *exec.Cmd
}

// Options are what New and Start can change in the API server.
type Options struct {
	// Audit writes an audit log (Metadata level: who, verb, resource) of
	// every request but the API server's own, to AuditLog; benchmarks read
	// it to count a client's requests by its user agent.
	Audit bool
}

// auditPolicy logs each request once (no RequestReceived stage), without
// bodies; system:apiserver is the API server's own loopback client.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: None
  users: ["system:apiserver"]
- level: Metadata
`

// AuditLog is the path of the audit log of an Env started with Options.Audit.
func (e *Env) AuditLog() string { return filepath.Join(e.Dir, "audit.log") }

// ErrBinariesMissing is returned by Start when etcd or kube-apiserver is absent.
var ErrBinariesMissing = errors.New("integration test binaries missing")

// Binaries returns the paths of etcd and kube-apiserver, or ErrBinariesMissing
// with what to do.
func Binaries() (etcd, apiserver string, err error) {
	etcd = os.Getenv("PAV_ETCD")
	if etcd == "" {
		etcd = "/usr/bin/etcd"
	}
	apiserver = os.Getenv("PAV_KUBE_APISERVER")
	if apiserver == "" {
		version, verr := kubeVersion()
		if verr != nil {
			return "", "", fmt.Errorf("%w: %v", ErrBinariesMissing, verr)
		}
		cache := os.Getenv("PAV_CACHE")
		if cache == "" {
			cache = "/var/cache/pav"
		}
		apiserver = filepath.Join(cache, "kube-"+version, "kube-apiserver")
	}
	var missing []string
	for _, p := range []string{etcd, apiserver} {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return etcd, apiserver, fmt.Errorf("%w: %s (apt-get install etcd-server; hack/cluster/ensure-kube.sh)", ErrBinariesMissing, strings.Join(missing, ", "))
	}
	return etcd, apiserver, nil
}

// kubeVersion is the Kubernetes release the cluster scripts build by
// default: $KUBE_VERSION, else the newest of hack/cluster/kbuild/versions
// (see hack/cluster/lib.sh).
func kubeVersion() (string, error) {
	if v := os.Getenv("KUBE_VERSION"); v != "" {
		return v, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		mods, _ := filepath.Glob(filepath.Join(dir, "hack/cluster/kbuild/versions/v*.mod"))
		if len(mods) > 0 {
			versions := make([]string, 0, len(mods))
			for _, m := range mods {
				versions = append(versions, strings.TrimSuffix(filepath.Base(m), ".mod"))
			}
			slices.SortFunc(versions, func(a, b string) int { return semver.Compare(a, b) })
			return versions[len(versions)-1], nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("hack/cluster/kbuild/versions not found above the working directory")
		}
		dir = parent
	}
}

// skipOrFail skips t for missing binaries unless PAV_REQUIRE_INTEGRATION is set.
func skipOrFail(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, ErrBinariesMissing) && os.Getenv("PAV_REQUIRE_INTEGRATION") == "" {
		t.Skipf("skipping integration test: %v (set PAV_REQUIRE_INTEGRATION=1 to fail instead)", err)
	}
	t.Fatal(err)
}

// New starts an Env for one test and stops it when the test ends.
func New(t testing.TB) *Env {
	t.Helper()
	return NewWith(t, Options{})
}

// NewWith is New with Options.
func NewWith(t testing.TB, o Options) *Env {
	t.Helper()
	env, err := StartWith(o)
	if err != nil {
		skipOrFail(t, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kube-apiserver log tail:\n%s", env.LogTail("kube-apiserver.log", 30))
		}
		env.Stop()
	})
	return env
}

var (
	shared    *Env
	sharedErr error
	sharedMu  sync.Mutex
)

// Shared returns an Env shared by the package's tests, started on first use and
// stopped by RunMain. Tests sharing it must not depend on a clean API server:
// use their own namespaces and object names.
func Shared(t testing.TB) *Env {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil && sharedErr == nil {
		shared, sharedErr = Start()
	}
	if sharedErr != nil {
		skipOrFail(t, sharedErr)
	}
	return shared
}

// RunMain runs the tests and then stops the shared Env, if any:
// func TestMain(m *testing.M) { os.Exit(framework.RunMain(m)) }.
func RunMain(m *testing.M) int {
	code := m.Run()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared != nil {
		shared.Stop()
		shared = nil
	}
	return code
}

// Start starts etcd and kube-apiserver on free loopback ports and waits until
// the API server is ready. Call Stop when done.
func Start() (*Env, error) { return StartWith(Options{}) }

// StartWith is Start with Options.
func StartWith(o Options) (*Env, error) {
	etcdBin, apiserverBin, err := Binaries()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pav-integration-")
	if err != nil {
		return nil, err
	}
	env := &Env{Dir: dir}
	ok := false
	defer func() {
		if !ok {
			env.Stop()
		}
	}()
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	env.etcd, err = startProcess(dir, "etcd.log", etcdBin,
		"--name=default", "--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=default="+peerURL)
	if err != nil {
		return nil, err
	}

	caPEM, token, err := writeCredentials(dir)
	if err != nil {
		return nil, err
	}
	port := strconv.Itoa(ports[2])
	var auditArgs []string
	if o.Audit {
		policy := filepath.Join(dir, "audit-policy.yaml")
		if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
			return nil, err
		}
		auditArgs = []string{"--audit-policy-file=" + policy, "--audit-log-path=" + env.AuditLog(), "--audit-log-format=json"}
	}
	env.apiserver, err = startProcess(dir, "kube-apiserver.log", apiserverBin, append(auditArgs,
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port="+port,
		// since 1.37 a loopback advertise address is refused by the endpoint reconciler, which these tests do not need
		"--endpoint-reconciler-type=none",
		"--cert-dir="+dir,
		"--tls-cert-file="+filepath.Join(dir, "apiserver.crt"), "--tls-private-key-file="+filepath.Join(dir, "apiserver.key"),
		"--client-ca-file="+filepath.Join(dir, "ca.crt"),
		"--token-auth-file="+filepath.Join(dir, "tokens.csv"),
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+filepath.Join(dir, "sa.key"),
		"--service-account-signing-key-file="+filepath.Join(dir, "sa.key"),
		"--service-cluster-ip-range=10.0.0.0/24",
		"--authorization-mode=RBAC",
		"--disable-admission-plugins=ServiceAccount",
		"--allow-privileged=true", "--profiling=false", "--v=1")...)
	if err != nil {
		return nil, err
	}
	env.Config = &rest.Config{
		Host:            "https://127.0.0.1:" + port,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: caPEM},
		QPS:             100,
		Burst:           200,
	}
	if err := env.waitReady(90 * time.Second); err != nil {
		return nil, err
	}
	ok = true
	return env, nil
}

// waitReady polls /readyz (there is nothing to watch before the server is up).
func (e *Env) waitReady(timeout time.Duration) error {
	client, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var lastErr error
	for {
		for _, c := range []*exec.Cmd{e.etcd, e.apiserver} {
			select {
			case <-waitChan(c):
				return fmt.Errorf("%s exited (%v); log tail:\n%s", filepath.Base(c.Path), c.ProcessState, e.LogTail(logName(c), 20))
			default:
			}
		}
		_, lastErr = client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if lastErr == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kube-apiserver not ready after %v: %v; log tail:\n%s", timeout, lastErr, e.LogTail("kube-apiserver.log", 20))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Stop stops kube-apiserver and etcd and removes Dir.
func (e *Env) Stop() {
	for _, c := range []*exec.Cmd{e.apiserver, e.etcd} {
		if c == nil || c.Process == nil {
			continue
		}
		_ = c.Process.Signal(syscall.SIGTERM)
		select {
		case <-waitChan(c):
		case <-time.After(15 * time.Second):
			_ = c.Process.Kill()
			<-waitChan(c)
		}
	}
	if e.Dir != "" && os.Getenv("PAV_INTEGRATION_KEEP") == "" {
		_ = os.RemoveAll(e.Dir)
	}
}

// LogTail returns the last n lines of a log file in Dir.
func (e *Env) LogTail(name string, n int) string {
	b, err := os.ReadFile(filepath.Join(e.Dir, name))
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

var (
	waiters   = map[*exec.Cmd]chan struct{}{}
	waitersMu sync.Mutex
)

// waitChan reaps c once, in the background, and returns a channel closed when it exited.
func waitChan(c *exec.Cmd) chan struct{} {
	waitersMu.Lock()
	defer waitersMu.Unlock()
	ch, ok := waiters[c]
	if !ok {
		ch = make(chan struct{})
		waiters[c] = ch
		go func() { _ = c.Wait(); close(ch) }()
	}
	return ch
}

func logName(c *exec.Cmd) string { return filepath.Base(c.Path) + ".log" }

func startProcess(dir, logFile, bin string, args ...string) (*exec.Cmd, error) {
	f, err := os.Create(filepath.Join(dir, logFile))
	if err != nil {
		return nil, err
	}
	c := exec.Command(bin, args...)
	c.Stdout, c.Stderr, c.Dir = f, f, dir
	// the servers die with the test binary, even if it is killed
	c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := c.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	f.Close()
	waitChan(c) // reap it in the background from now on
	return c, nil
}

// freePorts returns n distinct TCP ports free on 127.0.0.1 right now.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// writeCredentials writes a CA, the API server's serving certificate, a service
// account key and a static admin token to dir; it returns the CA (PEM) and the token.
func writeCredentials(dir string) ([]byte, string, error) {
	caKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, "", err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "pav-integration-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, "", err
	}
	caCert, _ := x509.ParseCertificate(caDER)
	srvKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, "", err
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		return nil, "", err
	}
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, "", err
	}
	tok := make([]byte, 16)
	if _, err := rand.Read(tok); err != nil {
		return nil, "", err
	}
	token := hex.EncodeToString(tok)
	caPEM := pemBytes("CERTIFICATE", caDER)
	files := map[string][]byte{
		"ca.crt":        caPEM,
		"apiserver.crt": pemBytes("CERTIFICATE", srvDER),
		"apiserver.key": pemBytes("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(srvKey)),
		"sa.key":        pemBytes("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(saKey)),
		// token,user,uid,"groups"
		"tokens.csv": []byte(token + ",pav-integration-admin,pav-integration-admin,\"system:masters\"\n"),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return nil, "", err
		}
	}
	return caPEM, token, nil
}

func pemBytes(typ string, der []byte) []byte {
	var buf bytes.Buffer
	_ = pem.Encode(&buf, &pem.Block{Type: typ, Bytes: der})
	return buf.Bytes()
}
