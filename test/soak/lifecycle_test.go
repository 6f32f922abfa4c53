//go:build soak

package soak

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/client-go/util/retry"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapshottyped "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned/typed/volumesnapshot/v1"

	pavtyped "github.com/albertofaria/pav/crds/generated/clientset/versioned/typed/crds/v1alpha1"
	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/kubeclient"
	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/test/e2e/framework"
)

// soakRoot is where, on the host node, the soak's provisioners keep their
// volumes (store/) and ledger (ledger/): the StorageClasses' `root`.
const soakRoot = "/var/lib/pav-soak"

// failAnnotation asks a soak provisioner to make one of the claim's pods fail
// once (testdata/provisioners.yaml): "creation" or "staging".
const failAnnotation = "soak.pav/fail"

// shape is what the soak knows of one of its provisioners.
type shape struct {
	Name          string
	Block         bool // Block volume mode (else Filesystem)
	CreationPod   bool // has creation and deletion pods (and so a ledger)
	LongRunning   bool // its staging pod keeps running (/pav/ready)
	Snapshots     bool // takes snapshots and restores them (and has a VolumeSnapshotClass)
	ClaimCapacity string
}

var shapes = []shape{
	{Name: "soak-nopods", ClaimCapacity: "1Mi"},
	{Name: "soak-rtc", CreationPod: true, Snapshots: true, ClaimCapacity: "1Mi"},
	{Name: "soak-fuse", CreationPod: true, LongRunning: true, Snapshots: true, ClaimCapacity: "1Mi"},
	{Name: "soak-block", Block: true, CreationPod: true, Snapshots: true, ClaimCapacity: "1Mi"},
}

// Faults that belong to one lifecycle, chosen for it by the seed.
const (
	faultFailCreation             = "a creation pod fails once"
	faultFailStaging              = "a staging pod fails once"
	faultDeleteClaimInCreation    = "claim deleted while its creation pod runs"
	faultDeleteClientInStaging    = "client pod deleted while its volume is staged"
	faultKillStagingDaemon        = "staging daemon killed while its client writes"
	faultDeleteSnapshotInCreation = "snapshot deleted while its creation pod runs"
)

// Steps of a lifecycle, in order; the report gives p50/p90 of each.
// "snapshot" and "restore" are only in snapshot lifecycles.
var steps = []string{"bind", "write", "release", "snapshot", "restore", "read", "delete"}

type outcome string

const (
	completed             outcome = "completed"
	deletedDuringCreation outcome = "deleted during creation"
	dataLost              outcome = "data lost"
	snapshotNeverReady    outcome = "snapshot never ready"
	stuck                 outcome = "stuck"
	ioErrorAfterRecovery  outcome = "client I/O error after recovery"
	failed                outcome = "failed"
)

// cycle is one lifecycle's record.
type cycle struct {
	ID    int
	Shape shape
	Fault string // one of the lifecycle faults, or ""
	// Snapshot: after the write, the lifecycle takes a snapshot of its claim
	// and restores it into a second claim (Restored), which must read the token.
	Snapshot   bool
	Restored   string
	RestoredPV string
	Token      string
	Claim      string
	PV         string
	Steps      map[string]time.Duration
	Retries    int // client pods run again after a fault made one fail
	// Recovered: the writer under a killed daemon saw its volume fail and
	// work again, in the same container (its pods are never restarted).
	Recovered bool
	// RecoveredEvent: and it got PaV's VolumeRecovered Event (best effort,
	// as Events are: one recorded while kube-apiserver restarts, or by a
	// node plugin restarted after its client went, may be missing).
	RecoveredEvent bool
	Outcome        outcome
	Detail         string
}

type soak struct {
	t    *testing.T
	f    *framework.Framework
	cfg  settings
	pav  pavtyped.PavProvisionerInterface
	snap snapshottyped.SnapshotV1Interface
	node string // the host node: clients and the provisioners' pods run there

	mu          sync.Mutex
	faults      map[string]int // injected, by kind
	faultErrors []string
	pvs         map[string]bool // every PV a lifecycle had
	baseline    map[string]bool // /pav directories before the run
}

func newSoak(t *testing.T, f *framework.Framework, cfg settings) *soak {
	pav, err := framework.PavProvisioners(f.Config)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubeclient.NewForConfig(f.Config)
	if err != nil {
		t.Fatal(err)
	}
	return &soak{t: t, f: f, cfg: cfg, pav: pav, snap: cs.SnapshotV1(), node: f.HostNode(), faults: map[string]int{}, pvs: map[string]bool{}}
}

// install starts from a clean soak root and creates the provisioners and
// their StorageClasses; they are deleted by the audit.
func (s *soak) install() {
	t := s.t
	if err := os.RemoveAll(soakRoot); err != nil {
		t.Fatalf("cleaning %s: %v", soakRoot, err)
	}
	baseline, err := framework.PodDirs()
	if err != nil {
		t.Fatal(err)
	}
	s.baseline = baseline
	raw, err := os.ReadFile(filepath.Join("testdata", "provisioners.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(string(raw)), 4096)
	for _, sh := range shapes {
		var p v1alpha1.PavProvisioner
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("testdata/provisioners.yaml: %v", err)
		}
		if p.Name != sh.Name {
			t.Fatalf("testdata/provisioners.yaml has %s where the soak expects %s", p.Name, sh.Name)
		}
		if _, err := s.pav.Create(s.f.Ctx, &p, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating PavProvisioner %s (one left by an earlier soak? delete it and its volumes): %v", p.Name, err)
		}
		sc := &storagev1.StorageClass{
			ObjectMeta:  metav1.ObjectMeta{Name: sh.Name},
			Provisioner: sh.Name,
			Parameters:  map[string]string{"node": s.node, "root": soakRoot},
		}
		if _, err := s.f.Client.StorageV1().StorageClasses().Create(s.f.Ctx, sc, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating StorageClass %s: %v", sc.Name, err)
		}
		if sh.Snapshots {
			vsc := &snapshotv1.VolumeSnapshotClass{
				ObjectMeta:     metav1.ObjectMeta{Name: sh.Name},
				Driver:         sh.Name,
				DeletionPolicy: snapshotv1.VolumeSnapshotContentDelete,
				Parameters:     sc.Parameters,
			}
			if _, err := s.snap.VolumeSnapshotClasses().Create(s.f.Ctx, vsc, metav1.CreateOptions{}); err != nil {
				t.Fatalf("creating VolumeSnapshotClass %s: %v", vsc.Name, err)
			}
		}
	}
}

// lifecycleFault picks lifecycle i's fault: about a third of the lifecycles
// get one.
func lifecycleFault(seed uint64, i int, sh shape) string {
	r := rngFor(seed, i+1).Float64()
	switch {
	case r < 0.08 && sh.CreationPod:
		return faultFailCreation
	case r < 0.16:
		return faultFailStaging
	case r < 0.24 && sh.CreationPod:
		return faultDeleteClaimInCreation
	case r < 0.32:
		return faultDeleteClientInStaging
	case r < 0.48 && sh.LongRunning:
		return faultKillStagingDaemon
	}
	return ""
}

// lifecycle runs lifecycle i to its end, whatever happens; it never fails the
// test itself: the audit judges.
func (s *soak) lifecycle(ctx context.Context, i int) *cycle {
	sh := shapes[i%len(shapes)]
	c := &cycle{ID: i, Shape: sh, Steps: map[string]time.Duration{}, Claim: fmt.Sprintf("c%04d", i),
		Token: fmt.Sprintf("token-%d-%d-%016x", s.cfg.Seed, i, rngFor(s.cfg.Seed, i+1).Uint64())}
	c.Fault = lifecycleFault(s.cfg.Seed, i, sh)
	c.Snapshot = takesSnapshot(s.cfg.Seed, i, sh)
	if c.Snapshot && c.Fault == "" && snapshotFault(s.cfg.Seed, i) {
		c.Fault = faultDeleteSnapshotInCreation
	}
	if c.Fault != "" {
		s.count(c.Fault)
	}
	err := s.run(ctx, c)
	switch {
	case c.Outcome != "":
	case err == nil:
		c.Outcome = completed
	case errors.Is(err, errStuck):
		c.Outcome, c.Detail = stuck, err.Error()
	default:
		c.Outcome, c.Detail = failed, err.Error()
	}
	if c.Outcome != completed && c.Outcome != deletedDuringCreation {
		s.t.Logf("lifecycle %d (%s, fault %q): %s: %s", i, sh.Name, c.Fault, c.Outcome, c.Detail)
	}
	// Whatever happened, leave nothing of the lifecycle's own: the audit is
	// about what PaV leaves.
	s.cleanup(c)
	return c
}

var errStuck = errors.New("stuck")

func (s *soak) run(ctx context.Context, c *cycle) error {
	ns := s.f.Namespace
	t0 := time.Now()
	claim, err := s.createClaim(ctx, c)
	if err != nil {
		return err
	}
	c.PV = "pvc-" + string(claim.UID) // the PV PaV provisions for it

	if c.Fault == faultDeleteClaimInCreation {
		sel := labels.Set{protocol.LabelClaimUID: string(claim.UID), protocol.LabelPhase: string(protocol.PhaseCreation)}
		if err := s.waitForPod(ctx, sel.AsSelector().String()); err != nil {
			return err
		}
		if err := s.deleteClaim(ctx, c.Claim, c.PV); err != nil {
			return err
		}
		c.Outcome = deletedDuringCreation
		return nil
	}

	if _, err := framework.WaitFor(ctx, s.f.Client.CoreV1().PersistentVolumeClaims(ns), c.Claim, stepBound,
		func(pvc *corev1.PersistentVolumeClaim) (bool, error) {
			return pvc.Status.Phase == corev1.ClaimBound, nil
		}); err != nil {
		return fmt.Errorf("%w: claim never bound: %v", errStuck, err)
	}
	c.Steps["bind"] = time.Since(t0)
	s.mu.Lock()
	s.pvs[c.PV] = true
	s.mu.Unlock()

	if stop, err := s.writeClients(ctx, c); stop || err != nil {
		return err
	}
	if !c.Snapshot {
		return s.readAndDelete(ctx, c)
	}
	if stop, err := s.takeSnapshot(ctx, c); stop || err != nil {
		return err
	}
	// The snapshot is taken: its restore goes on beside the rest of the
	// lifecycle, which no longer needs it.
	return alongside(c, func(c *cycle) error { return s.readAndDelete(ctx, c) },
		func(c *cycle) error { return s.restoreAndDelete(ctx, c) })
}

// readAndDelete reads the token back from the lifecycle's claim, then deletes
// it.
func (s *soak) readAndDelete(ctx context.Context, c *cycle) error {
	if stop, err := s.readClients(ctx, c, c.Claim, "read"); stop || err != nil {
		return err
	}
	t0 := time.Now()
	if err := s.deleteClaim(ctx, c.Claim, c.PV); err != nil {
		return err
	}
	c.Steps["delete"] = time.Since(t0)
	return nil
}

// createClaim creates the lifecycle's claim, of its shape and with the
// fault it asks of the provisioner, and returns it as the API server has it.
func (s *soak) createClaim(ctx context.Context, c *cycle) (*corev1.PersistentVolumeClaim, error) {
	fail := "none"
	switch c.Fault {
	case faultFailCreation:
		fail = "creation"
	case faultFailStaging:
		fail = "staging"
	}
	return s.createClaimFrom(ctx, c, c.Claim, fail, nil)
}

// createClaimFrom creates a claim of the lifecycle's shape: name, the fault
// it asks of the provisioner, the data source it is created from (or nil).
func (s *soak) createClaimFrom(ctx context.Context, c *cycle, name, fail string, source *corev1.TypedLocalObjectReference) (*corev1.PersistentVolumeClaim, error) {
	ns := s.f.Namespace
	mode := corev1.PersistentVolumeFilesystem
	if c.Shape.Block {
		mode = corev1.PersistentVolumeBlock
	}
	class := c.Shape.Name
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{failAnnotation: fail}},
		Spec: corev1.PersistentVolumeClaimSpec{
			DataSource:       source,
			StorageClassName: &class,
			VolumeMode:       &mode,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: resource.MustParse(c.Shape.ClaimCapacity)}},
		},
	}
	if err := retryAPI(ctx, func() error {
		created, err := s.f.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim, metav1.CreateOptions{})
		if err == nil {
			claim = created
		}
		return ignoreAlreadyExists(err)
	}); err != nil {
		return nil, fmt.Errorf("creating claim %s: %w", name, err)
	}
	if claim.UID == "" { // created by an attempt whose answer was lost
		got, err := s.f.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("reading claim %s: %w", name, err)
		}
		claim = got
	}
	return claim, nil
}

// writeClients runs the writer until one wrote the token; stop says the
// lifecycle ended with an outcome instead.
func (s *soak) writeClients(ctx context.Context, c *cycle) (stop bool, err error) {
	ns := s.f.Namespace
	// The writer, then the reader. A client deleted while its volume is
	// staged, or one that failed because a fault took its volume away, is
	// replaced; the steps count from the first client to the last one's end.
	// "release" is the last writer's deletion: kubelet unpublishing and
	// unstaging the volume, which the reader waits for.
	t0 := time.Now()
	killPending := c.Fault == faultKillStagingDaemon
	for attempt := 1; ; attempt++ {
		name := fmt.Sprintf("%s-w%d", c.Claim, attempt)
		script := writeScript(c.Shape)
		killing := killPending
		if killing {
			script = writeThroughRecoveryScript
		}
		if err := s.createClient(ctx, c, c.Claim, name, script); err != nil {
			return false, err
		}
		if killing {
			err := s.killStagingDaemon(ctx, c, name)
			if errors.Is(err, errEndedBeforeRunning) {
				// Another fault killed the daemon as the writer started:
				// its container could not start on the dead mount, and
				// the pod failed for good. It runs again, and its
				// daemon is killed then.
				if err := s.deletePod(ctx, name); err != nil {
					return false, err
				}
				if attempt == maxClientAttempts {
					return false, fmt.Errorf("the writer failed to start %d times", attempt)
				}
				c.Retries++
				continue
			}
			if err != nil {
				return false, err
			}
			killPending = false
		}
		if c.Fault == faultDeleteClientInStaging && attempt == 1 {
			sel := labels.Set{protocol.LabelVolume: c.PV, protocol.LabelPhase: string(protocol.PhaseStaging)}
			if err := s.waitForPod(ctx, sel.AsSelector().String()); err != nil {
				return false, err
			}
			if err := s.deletePod(ctx, name); err != nil {
				return false, err
			}
			continue
		}
		code, err := s.waitClientDone(ctx, name)
		if err != nil {
			return false, err
		}
		if killing {
			logs, _ := framework.PodLogs(ctx, s.f.Client, ns, name, "")
			c.Recovered = strings.Contains(logs, volumeWorksAgain)
			c.RecoveredEvent = s.recovered(ctx, name)
			if code != 0 {
				c.Outcome, c.Detail = ioErrorAfterRecovery, fmt.Sprintf("writer %s (exit %d): %s", name, code, strings.TrimSpace(logs))
				_ = s.deletePod(ctx, name)
				return true, nil
			}
		}
		if code == 0 {
			c.Steps["write"] = time.Since(t0)
		}
		tDelete := time.Now()
		if err := s.deletePod(ctx, name); err != nil {
			return false, err
		}
		if code == 0 {
			c.Steps["release"] = time.Since(tDelete)
			break
		}
		if attempt == maxClientAttempts {
			return false, fmt.Errorf("the writer failed %d times (last exit code %d)", attempt, code)
		}
		c.Retries++
	}
	return false, nil
}

// readClients runs readers of claim until one read the token back, and
// records the time since t0 as step; stop says the lifecycle ended with an
// outcome instead.
func (s *soak) readClients(ctx context.Context, c *cycle, claim, step string) (stop bool, err error) {
	return s.readClientsSince(ctx, c, claim, step, time.Now())
}

func (s *soak) readClientsSince(ctx context.Context, c *cycle, claim, step string, t0 time.Time) (stop bool, err error) {
	ns := s.f.Namespace
	for attempt := 1; ; attempt++ {
		name := fmt.Sprintf("%s-r%d", claim, attempt)
		if err := s.createClient(ctx, c, claim, name, readScript(c.Shape)); err != nil {
			return false, err
		}
		code, err := s.waitClientDone(ctx, name)
		if err != nil {
			return false, err
		}
		if code == 0 {
			c.Steps[step] = time.Since(t0)
		}
		logs, _ := framework.PodLogs(ctx, s.f.Client, ns, name, "")
		if err := s.deletePod(ctx, name); err != nil {
			return false, err
		}
		if code == 0 {
			break
		}
		if code == exitLost {
			c.Outcome, c.Detail = dataLost, fmt.Sprintf("reader %s: %s", name, strings.TrimSpace(logs))
			return true, nil
		}
		if attempt == maxClientAttempts {
			return false, fmt.Errorf("the reader failed %d times (last exit code %d: %s)", attempt, code, strings.TrimSpace(logs))
		}
		c.Retries++
	}
	return false, nil
}

const (
	maxClientAttempts = 5
	// exitLost is the clients' exit code for a token that is not what was written.
	exitLost = 3
)

func writeScript(sh shape) string {
	if sh.Block {
		return `printf '%s\n' "$TOKEN" | dd of=/dev/soak bs=4096 conv=sync,fsync 2>&1`
	}
	return `printf '%s\n' "$TOKEN" | dd of=/data/token conv=fsync 2>&1`
}

// writeThroughRecoveryScript writes the token every 0.2 s, whatever fails
// meanwhile (its staging daemon is killed), until a write works again after
// one failed (or for at most 2 min: a recovery slowed by the cluster's
// faults is no loss), then once more: that last write must work, on the
// recovered volume, in the same container.
const writeThroughRecoveryScript = `failed=0; end=$(( $(date +%s) + 120 ))
while [ "$(date +%s)" -lt "$end" ]; do
  if printf '%s\n' "$TOKEN" | dd of=/data/token conv=fsync 2>/dev/null; then
    [ "$failed" = 1 ] && { echo "` + volumeWorksAgain + `"; break; }
  else
    [ "$failed" = 1 ] || echo "volume failed"
    failed=1
  fi
  sleep 0.2
done
printf '%s\n' "$TOKEN" | dd of=/data/token conv=fsync 2>&1`

// volumeWorksAgain is what the writer under a killed daemon prints when
// its volume, having failed, works again in its container.
const volumeWorksAgain = "volume works again"

// errEndedBeforeRunning: the writer's pod ended before it ran.
var errEndedBeforeRunning = errors.New("the writer ended before it ran")

// killStagingDaemon waits until the writer runs, then kills the FUSE daemon
// of its volume's staging pod.
func (s *soak) killStagingDaemon(ctx context.Context, c *cycle, writer string) error {
	ns := s.f.Namespace
	pod, err := framework.WaitFor(ctx, s.f.Client.CoreV1().Pods(ns), writer, stepBound, func(p *corev1.Pod) (bool, error) {
		return p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded, nil
	})
	if err != nil {
		return fmt.Errorf("%w: writer %s never ran: %v", errStuck, writer, err)
	}
	if pod.Status.Phase != corev1.PodRunning {
		return fmt.Errorf("%w: %s is %s", errEndedBeforeRunning, writer, pod.Status.Phase)
	}
	sel := labels.Set{protocol.LabelVolume: c.PV, protocol.LabelPhase: string(protocol.PhaseStaging)}.AsSelector().String()
	// Retried, like every API call of the soak: a cluster fault may cut the
	// exec's stream (then the daemon may be killed already, and the retry
	// kills its successor: one more recovery for the writer to see through).
	return retryAPI(ctx, func() error {
		pods, err := s.f.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return err
		}
		if len(pods.Items) != 1 {
			return fmt.Errorf("%w: finding the staging pod of %s: %d found", errStuck, c.PV, len(pods.Items))
		}
		out, err := framework.Kubectl(ctx, "-n", ns, "exec", pods.Items[0].Name, "--", "bash", "-c",
			`for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = gocryptfs ] && kill -9 "${p#/proc/}"; done; true`)
		if err != nil {
			return fmt.Errorf("killing the staging daemon of %s: %v: %s", c.PV, err, out)
		}
		return nil
	})
}

// recovered says whether the writer got PaV's VolumeRecovered Event.
func (s *soak) recovered(ctx context.Context, writer string) bool {
	evs, err := s.f.Client.CoreV1().Events(s.f.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + writer})
	if err != nil {
		return false
	}
	for _, ev := range evs.Items {
		if ev.Reason == "VolumeRecovered" {
			return true
		}
	}
	return false
}

// readScript exits exitLost only when the volume answers with something other
// than the token; an unreadable volume (e.g. its FUSE daemon was killed) is
// another failure, and the reader runs again.
func readScript(sh shape) string {
	if sh.Block {
		return `[ -b /dev/soak ] || { echo "no device"; exit 4; }
got=$(dd if=/dev/soak bs=4096 count=1 2>/dev/null | tr -d '\000' | head -n 1) || { echo "device unreadable"; exit 4; }
[ "$got" = "$TOKEN" ] || { echo "LOST: read '$got'"; exit 3; }
echo "read back"`
	}
	return `ls /data >/dev/null || { echo "volume unreadable"; exit 4; }
[ -e /data/token ] || { echo "LOST: no token"; exit 3; }
got=$(cat /data/token) || { echo "token unreadable"; exit 4; }
[ "$got" = "$TOKEN" ] || { echo "LOST: read '$got'"; exit 3; }
echo "read back"`
}

// createClient creates a client pod of claim, labelled with its lifecycle.
func (s *soak) createClient(ctx context.Context, c *cycle, claim, name, script string) error {
	grace := int64(1)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"soak.pav/cycle": c.Claim}},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{
				Name: "client", Image: framework.TestImage, ImagePullPolicy: corev1.PullIfNotPresent,
				Command: []string{"/bin/sh", "-c", script},
				Env:     []corev1.EnvVar{{Name: "TOKEN", Value: c.Token}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}},
		},
	}
	if c.Shape.Block {
		pod.Spec.Containers[0].VolumeDevices = []corev1.VolumeDevice{{Name: "data", DevicePath: "/dev/soak"}}
	} else {
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	}
	framework.PinToNode(pod, s.node)
	err := retryAPI(ctx, func() error {
		_, err := s.f.Client.CoreV1().Pods(s.f.Namespace).Create(ctx, pod, metav1.CreateOptions{})
		return ignoreAlreadyExists(err)
	})
	if err != nil {
		return fmt.Errorf("creating client pod %s: %w", name, err)
	}
	return nil
}

// waitClientDone waits for a client pod to end and returns its exit code.
func (s *soak) waitClientDone(ctx context.Context, name string) (int32, error) {
	pod, err := framework.WaitForPod(ctx, s.f.Client, s.f.Namespace, name, stepBound, func(p *corev1.Pod) (bool, error) {
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed, nil
	})
	if err != nil {
		return 0, fmt.Errorf("%w: client pod %s never ended: %v", errStuck, name, err)
	}
	if pod.Status.Phase == corev1.PodSucceeded {
		return 0, nil
	}
	for _, st := range pod.Status.ContainerStatuses {
		if st.State.Terminated != nil && st.State.Terminated.ExitCode != 0 {
			return st.State.Terminated.ExitCode, nil
		}
	}
	return -1, nil // failed without running (e.g. evicted)
}

func (s *soak) deletePod(ctx context.Context, name string) error {
	pods := s.f.Client.CoreV1().Pods(s.f.Namespace)
	if err := retryAPI(ctx, func() error { return ignoreNotFound(pods.Delete(ctx, name, metav1.DeleteOptions{})) }); err != nil {
		return fmt.Errorf("deleting pod %s: %w", name, err)
	}
	wctx, cancel := context.WithTimeout(ctx, stepBound)
	defer cancel()
	if err := framework.WaitForDeletion(wctx, pods, name); err != nil {
		return fmt.Errorf("%w: pod %s: %v", errStuck, name, err)
	}
	return nil
}

// deleteClaim deletes a claim and waits until it and its PV are gone.
func (s *soak) deleteClaim(ctx context.Context, claim, pv string) error {
	claims := s.f.Client.CoreV1().PersistentVolumeClaims(s.f.Namespace)
	if err := retryAPI(ctx, func() error { return ignoreNotFound(claims.Delete(ctx, claim, metav1.DeleteOptions{})) }); err != nil {
		return fmt.Errorf("deleting claim %s: %w", claim, err)
	}
	wctx, cancel := context.WithTimeout(ctx, stepBound)
	defer cancel()
	if err := framework.WaitForDeletion(wctx, claims, claim); err != nil {
		return fmt.Errorf("%w: claim %s: %v", errStuck, claim, err)
	}
	if err := framework.WaitForDeletion(wctx, s.f.Client.CoreV1().PersistentVolumes(), pv); err != nil {
		return fmt.Errorf("%w: PV %s: %v", errStuck, pv, err)
	}
	return nil
}

// waitForPod waits until a pod matching the label selector exists in the
// soak's namespace.
func (s *soak) waitForPod(ctx context.Context, selector string) error {
	pods := s.f.Client.CoreV1().Pods(s.f.Namespace)
	lw := &cache.ListWatch{
		ListFunc: func(o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = selector
			return pods.List(ctx, o)
		},
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return pods.Watch(ctx, o)
		},
	}
	wctx, cancel := context.WithTimeout(ctx, stepBound)
	defer cancel()
	_, err := watchtools.UntilWithSync(wctx, lw, &corev1.Pod{},
		func(store cache.Store) (bool, error) { return len(store.List()) > 0, nil },
		func(ev watch.Event) (bool, error) { return ev.Type == watch.Added || ev.Type == watch.Modified, nil })
	if err != nil {
		return fmt.Errorf("%w: no pod %s appeared: %v", errStuck, selector, err)
	}
	return nil
}

// cleanup removes what is left of a lifecycle that did not end cleanly: its
// client pods, its snapshot and its claims (PaV then deletes the volumes and
// the snapshot; the audit checks).
func (s *soak) cleanup(c *cycle) {
	if c.Outcome == completed || c.Outcome == deletedDuringCreation {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), stepBound)
	defer cancel()
	sel := labels.Set{"soak.pav/cycle": c.Claim}.AsSelector().String()
	_ = retryAPI(ctx, func() error {
		return s.f.Client.CoreV1().Pods(s.f.Namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: sel})
	})
	claims := []string{c.Claim}
	if c.Snapshot {
		claims = append(claims, c.Restored)
		_ = retryAPI(ctx, func() error {
			return ignoreNotFound(s.snap.VolumeSnapshots(s.f.Namespace).Delete(ctx, snapshotName(c), metav1.DeleteOptions{}))
		})
	}
	for _, claim := range claims {
		_ = retryAPI(ctx, func() error {
			return ignoreNotFound(s.f.Client.CoreV1().PersistentVolumeClaims(s.f.Namespace).Delete(ctx, claim, metav1.DeleteOptions{}))
		})
	}
}

func (s *soak) count(kind string) {
	s.mu.Lock()
	s.faults[kind]++
	s.mu.Unlock()
}

// retryAPI calls f until it succeeds, fails with an error that is not about
// the API server being unreachable or overloaded (faults restart it), or about
// a minute has passed.
func retryAPI(ctx context.Context, f func() error) error {
	return retry.OnError(wait.Backoff{Duration: 500 * time.Millisecond, Steps: 120}, func(err error) bool {
		return ctx.Err() == nil && transient(err)
	}, f)
}

func transient(err error) bool {
	if apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) {
		return true
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return false // the API server answered
	}
	return true // no answer: connection refused, reset, EOF, timeout
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func ignoreAlreadyExists(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// podUID is the UID of a pod, "" if it does not exist.
func (s *soak) podUID(ctx context.Context, ns, name string) (types.UID, error) {
	pod, err := s.f.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return pod.UID, nil
}
