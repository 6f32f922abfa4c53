//go:build e2e

package staging

import (
	"context"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/test/e2e/framework"
)

// dynamicWith is a dynamic provisioner of 1 MiB volumes with the given staging/unstaging scripts.
func dynamicWith(staging, unstaging string, privileged bool, extra string) string {
	s := "provisioningModes: [Dynamic]\nvolumeCreation:\n  capacity: 1Mi\n" + extra
	s += section("volumeStaging", podTemplate("stage", staging, privileged))
	if unstaging != "" {
		s += section("volumeUnstaging", podTemplate("unstage", unstaging, privileged))
	}
	return s
}

const writeHello = `mkdir /pav/volume
echo "hello from {{ handle }} on {{ node.metadata.name }}, capacity {{ capacity }}" > /pav/volume/hello`

func TestRunToCompletionStaging(t *testing.T) {
	e := newEnv(t, dynamicWith(writeHello, "touch /marker/unstaged", false, ""))
	e.storageClass(nil)
	e.claim("c1", corev1.PersistentVolumeFilesystem, corev1.ReadWriteOnce)
	e.WaitForPVCBound("c1")

	// Baseline: the same client pod without a volume.
	start := time.Now()
	e.clientPod("baseline", "true", nil, false, false)
	e.succeeded("baseline")
	baseline := time.Since(start)

	start = time.Now()
	e.clientPod("client", "cat /data/c1/hello", []string{"c1"}, false, false)
	out := e.succeeded("client")
	withPaV := time.Since(start)
	if !strings.Contains(out, "hello from pvc-") || !strings.Contains(out, "capacity 1048576") {
		t.Errorf("client read %q", out)
	}
	t.Logf("client pod create→Succeeded: %v without a volume, %v with a run-to-completion PaV volume (+%v)", baseline, withPaV, withPaV-baseline)
	e.logPublishDurations()

	e.DeletePod("client", timeout)
	if !e.marked("unstaged") {
		t.Error("the unstaging pod did not run before the client pod was gone")
	}
}

func TestLongRunningStagingWithTmpfs(t *testing.T) {
	e := newEnv(t, dynamicWith(`mkdir -p /pav/volume
mount -t tmpfs -o size=1m tmpfs /pav/volume
echo tmpfs-data > /pav/volume/f
trap 'umount /pav/volume; exit 0' TERM
touch /pav/ready
sleep 3600 & wait`, "", true, ""))
	e.storageClass(nil)
	e.claim("c1", corev1.PersistentVolumeFilesystem, corev1.ReadWriteOnce)
	e.clientPod("client", `cat /data/c1/f
grep -q " /data/c1 tmpfs " /proc/mounts && echo IS-TMPFS
echo written > /data/c1/g && cat /data/c1/g`, []string{"c1"}, false, false)
	out := e.succeeded("client")
	for _, want := range []string{"tmpfs-data", "IS-TMPFS", "written"} {
		if !strings.Contains(out, want) {
			t.Errorf("client output %q lacks %q", out, want)
		}
	}
	e.logPublishDurations()
}

func TestReadOnlyWithNestedMount(t *testing.T) {
	e := newEnv(t, dynamicWith(`mkdir -p /pav/volume/sub
echo top > /pav/volume/top
mount -t tmpfs -o size=1m tmpfs /pav/volume/sub
echo nested > /pav/volume/sub/f
trap 'umount /pav/volume/sub; exit 0' TERM
touch /pav/ready
sleep 3600 & wait`, "", true, "volumeValidation:\n  accessModes: [ReadOnlyMany, ReadWriteOnce]\n"))
	e.storageClass(nil)
	e.claim("c1", corev1.PersistentVolumeFilesystem, corev1.ReadWriteOnce)
	e.clientPod("client", `cat /data/c1/top /data/c1/sub/f
touch /data/c1/x 2>/dev/null && echo WROTE-TOP
touch /data/c1/sub/x 2>/dev/null && echo WROTE-SUB
echo end`, []string{"c1"}, true, false)
	out := e.succeeded("client")
	if !strings.Contains(out, "top") || !strings.Contains(out, "nested") || !strings.Contains(out, "end") {
		t.Errorf("client output %q: the volume or its nested mount is not visible", out)
	}
	if strings.Contains(out, "WROTE") {
		t.Errorf("client could write to a read-only volume: %q", out)
	}
}

func TestBlockVolumeOnLoopDevice(t *testing.T) {
	ensureNode := `ensure_node() {
  [ -b "$1" ] && return 0
  IFS=: read -r maj min < "/sys/block/${1#/dev/}/dev"
  mknod "$1" b "$maj" "$min"
}`
	e := newEnv(t, dynamicWith(`set -e
exec 2> /pav/error
`+ensureNode+`
file=/marker/{{ handle }}.img
[ -e "$file" ] || dd if=/dev/zero of="$file" bs=1024 count=1024 2>/dev/null
dev=$(losetup -a | grep "$file" | head -n 1 | cut -d: -f1)
if [ -z "$dev" ]; then dev=$(losetup -f); ensure_node "$dev"; losetup "$dev" "$file"; fi
IFS=: read -r maj min < "/sys/block/${dev#/dev/}/dev"
mknod /pav/volume b "$maj" "$min"`, `set -e
exec 2> /pav/error
`+ensureNode+`
file=/marker/{{ handle }}.img
for dev in $(losetup -a | grep "$file" | cut -d: -f1); do ensure_node "$dev"; losetup -d "$dev"; done
touch /marker/unstaged`, true, "volumeValidation:\n  volumeModes: [Block]\n"))
	e.storageClass(nil)
	e.claim("c1", corev1.PersistentVolumeBlock, corev1.ReadWriteOnce)
	e.clientPod("client", `blockdev --getsize64 /dev/c1
echo block-data | dd of=/dev/c1 bs=512 conv=sync 2>/dev/null
dd if=/dev/c1 bs=10 count=1 2>/dev/null; echo`, []string{"c1"}, false, true)
	out := e.succeeded("client")
	if !strings.Contains(out, "1048576") || !strings.Contains(out, "block-data") {
		t.Errorf("client output %q", out)
	}
	e.DeletePod("client", timeout)
	if !e.marked("unstaged") {
		t.Error("the unstaging pod (loop device detach) did not run")
	}
}

func TestThreeVolumesInOnePod(t *testing.T) {
	e := newEnv(t, dynamicWith(writeHello, "", false, ""))
	e.storageClass(nil)
	claims := []string{"c1", "c2", "c3"}
	for _, c := range claims {
		e.claim(c, corev1.PersistentVolumeFilesystem, corev1.ReadWriteOnce)
	}
	e.clientPod("client", "cat /data/c1/hello /data/c2/hello /data/c3/hello", claims, false, false)
	out := e.succeeded("client")
	handles := map[string]bool{}
	for _, m := range regexp.MustCompile(`hello from (pvc-[0-9a-f-]+)`).FindAllStringSubmatch(out, -1) {
		handles[m[1]] = true
	}
	if len(handles) != 3 {
		t.Errorf("client saw %d distinct volumes, want 3: %q", len(handles), out)
	}
	e.logPublishDurations()
}

func TestFailingStagingPod(t *testing.T) {
	e := newEnv(t, dynamicWith(`echo "the backend at 10.0.0.1 is unreachable" > /pav/error
exit 3`, "touch /marker/unstaged", false, ""))
	e.storageClass(nil)
	e.claim("c1", corev1.PersistentVolumeFilesystem, corev1.ReadWriteOnce)
	e.clientPod("client", "cat /data/c1/hello", []string{"c1"}, false, false)
	msg := e.waitForEvent("client", regexp.MustCompile(`the backend at 10\.0\.0\.1 is unreachable`), timeout)
	t.Logf("event on the client pod: %s", msg)
	pod, err := e.Client.CoreV1().Pods(e.Namespace).Get(e.Ctx, "client", metav1.GetOptions{})
	must(t, err)
	if pod.Status.Phase != corev1.PodPending {
		t.Errorf("client pod is %s, want Pending", pod.Status.Phase)
	}
	if !e.marked("unstaged") {
		t.Error("the unstaging pod did not run after the failed staging pod")
	}
}

func TestStaticProvisioning(t *testing.T) {
	e := newEnv(t, `provisioningModes: [Static]
volumeValidation:
  maxCapacity: 10Mi
`+section("volumeStaging", podTemplate("stage", `mkdir /pav/volume
echo {{ params.greeting | tobash }} from {{ handle | tobash }} > /pav/volume/hello`, false)))
	e.staticVolume("good", "static-handle-1", "1Mi", map[string]string{"greeting": "hi"})
	e.clientPod("client", "cat /data/good/hello", []string{"good"}, false, false)
	if out := e.succeeded("client"); !strings.Contains(out, "hi from static-handle-1") {
		t.Errorf("client read %q", out)
	}

	e.staticVolume("toobig", "static-handle-2", "100Mi", map[string]string{"greeting": "hi"})
	e.clientPod("client2", "cat /data/toobig/hello", []string{"toobig"}, false, false)
	msg := e.waitForEvent("client2", regexp.MustCompile(`not valid for PavProvisioner`), timeout)
	t.Logf("event on the client pod: %s", msg)
	pods, err := e.Client.CoreV1().Pods("").List(e.Ctx, metav1.ListOptions{LabelSelector: protocol.LabelProvisioner + "=" + e.prov + "," + protocol.LabelPhase + "=staging"})
	must(t, err)
	for _, p := range pods.Items {
		if p.Labels[protocol.LabelVolume] == protocol.LabelValue(e.Namespace+"-toobig") {
			t.Errorf("a staging pod %s was created for a PV that failed static validation", p.Name)
		}
	}
}

// Issue 10 item 8: a provisioner for both modes whose dynamic validation pod
// uses pvc stages its static volumes: only the fields that apply to static
// volumes are evaluated there.
func TestStaticStagingWithDynamicValidationPod(t *testing.T) {
	e := newEnv(t, `provisioningModes: [Dynamic, Static]
volumeCreation:
  capacity: 1Mi
`+section("volumeValidation", podTemplate("validate", `test -n {{ pvc.metadata.name | tobash }}`, false))+
		section("volumeStaging", podTemplate("stage", `mkdir /pav/volume
echo "static {{ handle }}" > /pav/volume/hello`, false)))
	e.staticVolume("good", "static-handle-3", "1Mi", nil)
	e.clientPod("client", "cat /data/good/hello", []string{"good"}, false, false)
	if out := e.succeeded("client"); !strings.Contains(out, "static static-handle-3") {
		t.Errorf("client read %q", out)
	}
}

func TestNodePluginRestartDuringStaging(t *testing.T) {
	e := newEnv(t, dynamicWith(`sleep 8
mkdir /pav/volume
echo survived > /pav/volume/f`, "touch /marker/unstaged", false, ""))
	e.storageClass(nil)
	e.claim("c1", corev1.PersistentVolumeFilesystem, corev1.ReadWriteOnce)
	e.clientPod("client", "cat /data/c1/f", []string{"c1"}, false, false)
	// Wait for the staging pod to run, then kill the node plugin.
	sel := protocol.LabelProvisioner + "=" + e.prov + "," + protocol.LabelPhase + "=staging"
	deadline := time.Now().Add(timeout)
	for {
		pods, err := e.Client.CoreV1().Pods(e.Namespace).List(e.Ctx, metav1.ListOptions{LabelSelector: sel})
		must(t, err)
		if len(pods.Items) == 1 && pods.Items[0].Status.Phase == corev1.PodRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the staging pod never ran")
		}
		time.Sleep(200 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(e.Ctx, time.Minute)
	defer cancel()
	if out, err := framework.Kubectl(ctx, "-n", "pav", "delete", "pod", "-l", "app.kubernetes.io/component=node-agent", "--wait=true"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if out, err := framework.Kubectl(ctx, "-n", "pav", "rollout", "status", "daemonset/node-agent", "--timeout=60s"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if out := e.succeeded("client"); !strings.Contains(out, "survived") {
		t.Errorf("client read %q", out)
	}
	pods, err := e.Client.CoreV1().Pods("").List(e.Ctx, metav1.ListOptions{LabelSelector: sel})
	must(t, err)
	if len(pods.Items) != 1 {
		t.Errorf("%d staging pods after the restart, want the same single one", len(pods.Items))
	}
	e.DeletePod("client", timeout)
	if !e.marked("unstaged") {
		t.Error("the unstaging pod did not run")
	}
}

// logPublishDurations logs how long the node plugin's NodePublishVolume
// calls for this test's volumes took, from its log.
func (e *env) logPublishDurations() {
	ctx, cancel := context.WithTimeout(e.Ctx, 30*time.Second)
	defer cancel()
	out, err := framework.Kubectl(ctx, "-n", "pav", "logs", "-l", "app.kubernetes.io/component=node-agent", "--tail=-1")
	if err != nil {
		e.t.Logf("node plugin logs: %v", err)
		return
	}
	re := regexp.MustCompile(`duration="?([0-9.]+[mµn]?s)`)
	var ds []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "Volume staged") && strings.Contains(l, `driver="`+e.prov+`"`) {
			if m := re.FindStringSubmatch(l); m != nil {
				ds = append(ds, m[1])
			}
		}
	}
	e.t.Logf("NodePublishVolume durations (node plugin log): %v", ds)
}

// kubelet reports a PaV volume's usage (NodeGetVolumeStats), and a volume
// whose long-running staging pod stopped gets a Warning Event on its client
// pod (VolumeAbnormal reasons of the node plugin).
// TestVolumeStatsAndAbnormalCondition: kubelet's volume metrics cover a PaV
// volume, and with recovery off (spec.volumeStaging.recovery: None) a
// staging pod that stops is reported on the client pod.
func TestVolumeStatsAndAbnormalCondition(t *testing.T) {
	staging := podTemplate("stage", `mkdir -p /pav/volume
mount -t tmpfs -o size=1m tmpfs /pav/volume
head -c 300000 /dev/zero > /pav/volume/f
trap 'exit 0' TERM
touch /pav/ready
sleep 3600 & echo $! > /pav/sleep.pid; wait`, true)
	e := newEnv(t, "provisioningModes: [Dynamic]\nvolumeCreation:\n  capacity: 1Mi\n"+
		"volumeStaging:\n  recovery: None\n"+indent(staging, "  "))
	e.storageClass(nil)
	e.claim("c1", corev1.PersistentVolumeFilesystem, corev1.ReadWriteOnce)
	client := e.clientPod("client", `while true; do sleep 1; done`, []string{"c1"}, false, false)
	e.WaitForPod(client.Name, timeout, framework.PodRunningReady)

	// kubelet's volume metrics, read through the API server's node proxy
	metric := regexp.MustCompile(`kubelet_volume_stats_used_bytes\{[^}]*namespace="` + e.Namespace + `"[^}]*persistentvolumeclaim="c1"[^}]*\} (\S+)`)
	var used string
	for deadline := time.Now().Add(3 * time.Minute); used == "" && time.Now().Before(deadline); time.Sleep(2 * time.Second) {
		raw, err := e.Client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", e.nodeName(), "proxy", "metrics").DoRaw(e.Ctx)
		if err != nil {
			t.Fatalf("kubelet metrics: %v", err)
		}
		if m := metric.FindSubmatch(raw); m != nil {
			used = string(m[1])
		}
	}
	if used == "" {
		t.Fatal("kubelet_volume_stats_used_bytes never appeared for the PaV volume")
	}
	if n, err := strconv.ParseFloat(used, 64); err != nil || n < 300000 {
		t.Errorf("kubelet_volume_stats_used_bytes = %s, want >= 300000 (the staging pod wrote 300000 bytes)", used)
	}

	// The staging pod's process dies: the volume is abnormal.
	pods, err := e.Client.CoreV1().Pods(e.Namespace).List(e.Ctx, metav1.ListOptions{LabelSelector: protocol.LabelPhase + "=staging"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("staging pods: %v (%d)", err, len(pods.Items))
	}
	// The container ends with its process, and may take this exec session
	// with it before it returns (exit code 137): that is the kill working.
	if out, err := e.Kubectl("exec", pods.Items[0].Name, "--", "sh", "-c", "kill -9 $(cat /pav/sleep.pid)"); err != nil && !strings.Contains(out+err.Error(), "exit code 137") {
		t.Fatalf("killing the staging pod's process: %v\n%s", err, out)
	}
	e.waitForEvent(client.Name, regexp.MustCompile(`staging pod .* which serves this volume, stopped`), 3*time.Minute)
}

// A staging pod puts a setuid-root shell into the volume. In a client
// running as an ordinary user the bit is there but does not take effect: the
// volume is published nosuid,nodev. A provisioner that sets
// volumeStaging.allowSetuidAndDevices gets neither flag, and the shell runs
// as root. (The shell's own $EUID: busybox applets such as id drop a setuid
// privilege themselves.)
func TestSetuidInVolumeDoesNotElevate(t *testing.T) {
	for _, allow := range []bool{false, true} {
		t.Run("allowSetuidAndDevices="+strconv.FormatBool(allow), func(t *testing.T) {
			spec := dynamicWith(`mkdir /pav/volume
cp "$(command -v bash)" /pav/volume/rootsh
chmod 4755 /pav/volume/rootsh`, "", false, "")
			if allow {
				spec = strings.Replace(spec, "volumeStaging:\n", "volumeStaging:\n  allowSetuidAndDevices: true\n", 1)
			}
			e := newEnv(t, spec)
			e.storageClass(nil)
			e.claim("c1", corev1.PersistentVolumeFilesystem, corev1.ReadWriteOnce)
			user := int64(1000)
			pod := clientPodObject("client", `echo "mode $(stat -c %A /data/c1/rootsh)"
echo "euid $(/data/c1/rootsh -p -c 'echo $EUID')"
echo "mount $(grep ' /data/c1 ' /proc/self/mountinfo)"`, []string{"c1"}, false, false)
			pod.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: &user, RunAsGroup: &user}
			e.CreatePod(framework.PinToNode(pod, e.nodeName()))
			out := e.succeeded("client")
			t.Logf("client:\n%s", out)
			lines := map[string]string{}
			for _, l := range strings.Split(out, "\n") {
				if k, v, ok := strings.Cut(l, " "); ok {
					lines[k] = v
				}
			}
			if lines["mode"] != "-rwsr-xr-x" {
				t.Fatalf("the shell in the volume has mode %q, want the setuid bit", lines["mode"])
			}
			// mountinfo: the 6th field is the mount's own options.
			f := strings.Fields(lines["mount"])
			if len(f) < 6 {
				t.Fatalf("no mount at /data/c1 in the client: %q", lines["mount"])
			}
			opts := strings.Split(f[5], ",")
			nosuid, nodev := slices.Contains(opts, "nosuid"), slices.Contains(opts, "nodev")
			wantEUID := "1000"
			if allow {
				wantEUID = "0"
			}
			if nosuid == allow || nodev == allow || lines["euid"] != wantEUID {
				t.Errorf("mount options %s (nosuid %v, nodev %v), the setuid shell runs with euid %q; want flags %v, euid %s",
					f[5], nosuid, nodev, lines["euid"], !allow, wantEUID)
			}
		})
	}
}
