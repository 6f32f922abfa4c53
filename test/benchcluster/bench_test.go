//go:build benchcluster

package benchcluster

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	pavtyped "github.com/albertofaria/pav/crds/generated/clientset/versioned/typed/crds/v1alpha1"
	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/test/e2e/framework"
)

// The provisioners of testdata/provisioners.yaml.
const (
	noPods     = "bench-nopods"
	withPod    = "bench-create"
	longStag   = "bench-long"
	fuse       = "bench-fuse"
	fuseShared = "bench-fuse-shared"       // bench-fuse with shared staging, made by install
	fuseStore  = "/var/lib/pav-bench-fuse" // bench-fuse's hostPath
)

// stepTimeout bounds one step of one sample (a claim binding, a pod
// becoming ready): far above what they take, below "stuck".
const stepTimeout = 2 * time.Minute

// settings of one run (environment: BENCH_SAMPLES, BENCH_BURST,
// BENCH_PROVISIONERS, BENCH_ANCHOR=0 to leave the CSI anchor out).
type settings struct {
	Samples      int  `json:"samples"`
	Burst        int  `json:"burst"`
	Provisioners int  `json:"extra_provisioners"`
	Anchor       bool `json:"anchor"`
}

func loadSettings(t *testing.T) settings {
	s := settings{Samples: 30, Burst: 100, Provisioners: 20, Anchor: os.Getenv("BENCH_ANCHOR") != "0"}
	for name, dst := range map[string]*int{"BENCH_SAMPLES": &s.Samples, "BENCH_BURST": &s.Burst, "BENCH_PROVISIONERS": &s.Provisioners} {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				t.Fatalf("%s=%q: want a positive number", name, v)
			}
			*dst = n
		}
	}
	return s
}

type bench struct {
	t    *testing.T
	f    *framework.Framework
	cfg  settings
	pav  pavtyped.PavProvisionerInterface
	node string // clients run here: its processes and files are this machine's
	rec  *recorder
	// fast creates and deletes the burst's claims: the framework's client
	// is rate-limited to 50 requests/s.
	fast kubernetes.Interface

	// cluster-scoped objects to delete at the end
	mu           sync.Mutex
	provisioners []string
	classes      []string
	anchor       *anchor
}

func TestClusterBenchmark(t *testing.T) {
	cfg := loadSettings(t)
	f := framework.New(t)
	b := &bench{t: t, f: f, cfg: cfg, node: f.HostNode()}
	t.Cleanup(b.cleanup) // runs before the framework deletes the namespace
	var err error
	if b.pav, err = framework.PavProvisioners(f.Config); err != nil {
		t.Fatal(err)
	}
	fastCfg := *f.Config
	fastCfg.QPS, fastCfg.Burst = 1000, 1000
	if b.fast, err = kubernetes.NewForConfig(&fastCfg); err != nil {
		t.Fatal(err)
	}
	if b.rec, err = startRecorder(f.Ctx, f.Client, f.Namespace); err != nil {
		t.Fatal(err)
	}
	r := b.newReport()
	b.install()
	if cfg.Anchor {
		b.anchor = b.deployAnchor()
	}
	fmt.Printf("cluster benchmark: %d samples each, clients on %s, burst of %d claims, %d more provisioners, CSI anchor %v\n",
		cfg.Samples, b.node, cfg.Burst, cfg.Provisioners, cfg.Anchor)

	r.Memory = append(r.Memory, b.memory("idle")...)

	// the floor: a plain pod on the clients' node
	ready := b.series("plain pod: created → Ready", func(i int) float64 { return b.plainPod(i, false).total })
	var exitLag []float64
	run := b.series("plain pod: created → Succeeded", func(i int) float64 {
		s := b.plainPod(i, true)
		exitLag = append(exitLag, s.exitToSeen)
		return s.total
	})
	r.row("plain pod, created → Ready", floor, ready)
	r.row("plain pod, run to completion (created → `Succeeded` seen)", floor, run)
	r.row("pod's container exited → `Succeeded` seen (kubelet PLEG)", floor, exitLag)

	// claim → Bound
	r.row("claim → Bound, no creation pod", pav, b.series("PaV claim → Bound", func(i int) float64 { return b.bind(noPods, i).bound }))
	if b.anchor != nil {
		r.row("claim → Bound, no creation pod", csiAnchor, b.series("CSI claim → Bound", func(i int) float64 { return b.bind(anchorClass, i).bound }))
	}
	var toExit, exitToBound, podRun, overhead []float64
	r.row("claim → Bound, run-to-completion creation pod", pav, b.series("PaV claim → Bound, creation pod", func(i int) float64 {
		s := b.bind(withPod, i)
		toExit, exitToBound = append(toExit, s.podToExit), append(exitToBound, s.exitToBound)
		if !math.IsNaN(s.podRun) {
			podRun, overhead = append(podRun, s.podRun), append(overhead, s.bound-s.podRun)
		}
		return s.bound
	}))
	r.row("creation pod created (seen) → its container exited (own clock)", pav, toExit)
	r.row("creation pod's container exited → claim Bound seen", pav, exitToBound)
	r.row("creation pod's own run (created → `Succeeded` seen)", pav, podRun)
	r.row("claim → Bound minus the creation pod's own run", pav, overhead)

	// client Ready
	r.row("client pod Ready, run-to-completion staging pod", floor, ready)
	r.row("client pod Ready, run-to-completion staging pod", pav, b.clientSeries(noPods, "run-to-completion", r))
	r.row("client pod Ready, long-running staging pod (`/pav/ready`)", pav, b.clientSeries(longStag, "long-running", r))
	var csiReady []float64
	if b.anchor != nil {
		csiReady = b.clientSeries(anchorClass, "", r)
		r.row("client pod Ready, run-to-completion staging pod", csiAnchor, csiReady)
		r.row("client pod Ready, long-running staging pod (`/pav/ready`)", csiAnchor, csiReady)
	}

	// staging that heals and is shared (bench-fuse: a gocryptfs daemon per staging pod)
	total, ownStart, added := b.recovery()
	r.row("recovery: FUSE daemon killed → the same client's writes work again", pav, total)
	r.row("recovery: the new staging pod's own start (created seen → `/pav/ready`)", pav, ownStart)
	r.row("recovery minus the new staging pod's own start", pav, added)
	r.row("client pod Ready, shared staging pod already running", pav, b.sharedClientSeries())
	if b.anchor != nil {
		r.row("client pod Ready, shared staging pod already running", csiAnchor, csiReady)
	}
	r.Staging = append(r.Staging, b.stagingFootprint(fuse), b.stagingFootprint(fuseShared))

	// the burst, and memory with its claims bound
	r.Burst = append(r.Burst, b.burst(noPods, pav, r))
	if b.anchor != nil {
		r.Burst = append(r.Burst, b.burst(anchorClass, csiAnchor, r))
	}
	b.moreProvisioners()
	r.Memory = append(r.Memory, b.memory(fmt.Sprintf("+%d provisioners", cfg.Provisioners))...)

	table := r.markdown()
	fmt.Print("\n" + table)
	if err := r.write(table); err != nil {
		t.Error(err)
	}
}

// series takes cfg.Samples samples, one after the other (ms).
func (b *bench) series(what string, sample func(i int) float64) []float64 {
	out := make([]float64, 0, b.cfg.Samples)
	start := time.Now()
	for i := range b.cfg.Samples {
		out = append(out, sample(i))
	}
	st := stats(out)
	fmt.Printf("%-50s p50 %s  p90 %s  (%d samples, %v)\n", what, ms(st.P50), ms(st.P90), st.N, time.Since(start).Round(time.Second))
	return out
}

func (b *bench) must(err error) {
	b.t.Helper()
	if err != nil {
		b.t.Fatal(err)
	}
}

func (b *bench) wait(key string) time.Time {
	b.t.Helper()
	at, err := b.rec.wait(b.f.Ctx, key, stepTimeout)
	b.must(err)
	return at
}

func since(from, to time.Time) float64 { return float64(to.Sub(from).Microseconds()) / 1000 }

// install creates the benchmark's provisioners and their StorageClasses.
func (b *bench) install() {
	raw, err := os.ReadFile(filepath.Join("testdata", "provisioners.yaml"))
	b.must(err)
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(string(raw)), 4096)
	for {
		var p v1alpha1.PavProvisioner
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else {
			b.must(err)
		}
		b.createProvisioner(&p)
		if p.Name == fuse {
			shared := &v1alpha1.PavProvisioner{ObjectMeta: metav1.ObjectMeta{Name: fuseShared}, Spec: *p.Spec.DeepCopy()}
			shared.Spec.VolumeStaging.Shared = true
			b.createProvisioner(shared)
		}
	}
	b.waitRegistered(noPods, withPod, longStag, fuse, fuseShared)
}

// createProvisioner creates a PavProvisioner and a StorageClass of its name
// (immediate binding).
func (b *bench) createProvisioner(p *v1alpha1.PavProvisioner) {
	b.t.Helper()
	if _, err := b.pav.Create(b.f.Ctx, p, metav1.CreateOptions{}); err != nil {
		b.t.Fatalf("creating PavProvisioner %s (left by an interrupted run? delete it): %v", p.Name, err)
	}
	b.mu.Lock()
	b.provisioners = append(b.provisioners, p.Name)
	b.mu.Unlock()
	b.createClass(p.Name, p.Name)
}

func (b *bench) createClass(name, provisioner string) {
	b.t.Helper()
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: provisioner}
	if _, err := b.f.Client.StorageV1().StorageClasses().Create(b.f.Ctx, sc, metav1.CreateOptions{}); err != nil {
		b.t.Fatalf("creating StorageClass %s: %v", name, err)
	}
	b.mu.Lock()
	b.classes = append(b.classes, name)
	b.mu.Unlock()
}

// waitRegistered waits until the clients' node lists CSI driver name (its
// node plugin serves it, kubelet registered it).
func (b *bench) waitRegistered(names ...string) {
	b.t.Helper()
	_, err := framework.WaitFor(b.f.Ctx, b.f.Client.StorageV1().CSINodes(), b.node, stepTimeout, func(n *storagev1.CSINode) (bool, error) {
		listed := map[string]bool{}
		for _, d := range n.Spec.Drivers {
			listed[d.Name] = true
		}
		for _, name := range names {
			if !listed[name] {
				return false, nil
			}
		}
		return true, nil
	})
	b.must(err)
}

// moreProvisioners adds cfg.Provisioners copies of bench-nopods and waits
// until the clients' node has registered them all.
func (b *bench) moreProvisioners() {
	base, err := b.pav.Get(b.f.Ctx, noPods, metav1.GetOptions{})
	b.must(err)
	var names []string
	for i := range b.cfg.Provisioners {
		p := &v1alpha1.PavProvisioner{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-extra-%02d", i)}, Spec: base.Spec}
		b.createProvisioner(p)
		names = append(names, p.Name)
	}
	start := time.Now()
	b.waitRegistered(names...)
	fmt.Printf("%d more provisioners registered on %s in %v\n", len(names), b.node, time.Since(start).Round(time.Millisecond))
}

// cleanup deletes the claims (waiting for their volumes to go), then the
// anchor, the StorageClasses and the provisioners.
func (b *bench) cleanup() {
	if b.t.Failed() {
		b.f.Dump() // before the namespace goes
	}
	if os.Getenv("PAV_E2E_KEEP_NAMESPACES") != "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := b.f.Client
	if err := framework.DeleteNamespace(ctx, c, b.f.Namespace, true); err != nil {
		b.t.Errorf("cleanup: %v", err)
	}
	if b.anchor != nil {
		b.anchor.remove(ctx, b.t)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, name := range b.classes {
		if err := c.StorageV1().StorageClasses().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			b.t.Errorf("cleanup: deleting StorageClass %s: %v", name, err)
		}
	}
	for _, name := range b.provisioners {
		if err := b.pav.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			b.t.Errorf("cleanup: deleting PavProvisioner %s: %v", name, err)
		}
	}
	// bench-fuse's backends, on the clients' node (this machine's files)
	if err := os.RemoveAll(fuseStore); err != nil {
		b.t.Errorf("cleanup: %v", err)
	}
}

// clientPod is a pod on the clients' node that runs command (if empty,
// waits until it is told to stop, and stops at once), mounting claim at /data
// if given.
func (b *bench) clientPod(name, claim string, command ...string) *corev1.Pod {
	if len(command) == 0 {
		command = []string{"/bin/bash", "-c", "trap 'exit 0' TERM; sleep infinity & wait"}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			// not 0: a pod deleted with no grace period is gone from the API
			// before kubelet has torn it down, which the next sample would pay
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name: "main", Image: framework.TestImage, ImagePullPolicy: corev1.PullIfNotPresent, Command: command,
			}},
		},
	}
	if claim != "" {
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
		pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}
	}
	return framework.PinToNode(pod, b.node)
}

// deletePod deletes a pod and waits until it is gone: for a running pod,
// until kubelet has stopped it and unmounted its volumes.
func (b *bench) deletePod(name string) {
	b.t.Helper()
	err := b.f.Client.CoreV1().Pods(b.f.Namespace).Delete(b.f.Ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		b.t.Fatalf("deleting pod %s: %v", name, err)
	}
	b.wait(podDeleted(name))
}

type plainSample struct{ total, exitToSeen float64 }

// plainPod measures a plain pod: created → Ready (sleeping), or created →
// Succeeded seen for a run to completion, with its container's own exit
// time ($EPOCHREALTIME, its last output).
func (b *bench) plainPod(i int, toCompletion bool) plainSample {
	name := fmt.Sprintf("plain-ready-%d", i)
	var cmd []string
	if toCompletion {
		name = fmt.Sprintf("plain-run-%d", i)
		cmd = []string{"/bin/bash", "-c", "echo $EPOCHREALTIME"}
	}
	start := time.Now()
	b.f.CreatePod(b.clientPod(name, "", cmd...))
	var s plainSample
	if !toCompletion {
		s.total = since(start, b.wait(podReady(name)))
	} else {
		done := b.wait(podSucceeded(name))
		s.total = since(start, done)
		exited, err := b.lastEpoch(b.f.Namespace, name)
		b.must(err)
		s.exitToSeen = since(exited, done)
	}
	b.deletePod(name)
	return s
}

// lastEpoch reads a pod's last line of output, an $EPOCHREALTIME.
func (b *bench) lastEpoch(ns, pod string) (time.Time, error) {
	logs, err := framework.PodLogs(b.f.Ctx, b.f.Client, ns, pod, "")
	if err != nil {
		return time.Time{}, err
	}
	lines := strings.Fields(logs)
	if len(lines) == 0 {
		return time.Time{}, fmt.Errorf("pod %s/%s printed nothing", ns, pod)
	}
	at, ok := parseEpoch(lines[len(lines)-1])
	if !ok {
		return time.Time{}, fmt.Errorf("pod %s/%s: last output %q is no $EPOCHREALTIME", ns, pod, lines[len(lines)-1])
	}
	return at, nil
}

func claim(name, class string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &class,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}},
		},
	}
}

func (b *bench) createClaim(c kubernetes.Interface, name, class string) error {
	if _, err := c.CoreV1().PersistentVolumeClaims(b.f.Namespace).Create(b.f.Ctx, claim(name, class), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating claim %s: %w", name, err)
	}
	return nil
}

func (b *bench) deleteClaim(c kubernetes.Interface, name string) error {
	if err := c.CoreV1().PersistentVolumeClaims(b.f.Namespace).Delete(b.f.Ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting claim %s: %w", name, err)
	}
	return nil
}

// bindSample: claim created → Bound seen and, with a creation pod, that
// pod's run: created seen → its container exited (own clock), and →
// Succeeded seen (NaN if PaV deleted the pod before it was seen Succeeded).
type bindSample struct{ bound, podToExit, exitToBound, podRun float64 }

// bind measures a claim's binding, then deletes the claim and waits for its
// volume to go.
func (b *bench) bind(class string, i int) bindSample {
	name := fmt.Sprintf("%s-%d", class, i)
	start := time.Now()
	b.must(b.createClaim(b.f.Client, name, class))
	bound := b.wait(claimBound(name))
	s := bindSample{bound: since(start, bound), podRun: math.NaN()}
	if class == withPod {
		added := b.wait(phasePodAdded(protocol.PhaseCreation, name))
		exited := b.wait(creationExited(name))
		s.podToExit, s.exitToBound = since(added, exited), since(exited, bound)
	}
	b.must(b.deleteClaim(b.f.Client, name))
	b.wait(pvDeleted(name))
	if class == withPod {
		b.wait(podDeleted(b.rec.name(phasePodAdded(protocol.PhaseCreation, name))))
		if done, ok := b.rec.seenAt(phasePodSucceeded(protocol.PhaseCreation, name)); ok {
			s.podRun = since(b.wait(phasePodAdded(protocol.PhaseCreation, name)), done)
		}
	}
	return s
}
