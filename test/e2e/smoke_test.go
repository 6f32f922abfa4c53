//go:build e2e

package e2e

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/albertofaria/pav/test/e2e/framework"
)

// The smoke tests prove what PaV relies on from the local cluster (issue 2):
// run-to-completion pods, logs, Bidirectional mount propagation to the host under
// the kubelet's root dir, FUSE and loop devices in privileged pods, and ClusterIP
// Services (kube-proxy), which admission webhooks need.

const podTimeout = 2 * time.Minute

func testPod(name, script string, privileged bool) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr(int64(10)),
			Containers: []corev1.Container{{
				Name:            "c",
				Image:           framework.TestImage,
				ImagePullPolicy: corev1.PullNever,
				Command:         []string{"bash", "-c", script},
				SecurityContext: &corev1.SecurityContext{Privileged: ptr(privileged)},
			}},
		},
	}
}

func ptr[T any](v T) *T { return &v }

// runToSuccess runs a pod to completion and returns its logs.
func runToSuccess(f *framework.Framework, pod *corev1.Pod) string {
	f.T.Helper()
	f.CreatePod(pod)
	f.WaitForPod(pod.Name, podTimeout, framework.PodSucceeded)
	return f.PodLogs(pod.Name, "")
}

func TestSmokeRunToCompletionAndLogs(t *testing.T) {
	f := framework.New(t)
	logs := runToSuccess(f, testPod("once", `echo "hello from $(hostname)"; echo "bash $BASH_VERSION"`, false))
	if !strings.Contains(logs, "hello from once") || !strings.Contains(logs, "bash 5") {
		t.Fatalf("unexpected logs: %q", logs)
	}
	// kubectl reaches the kubelet too (logs go API server -> kubelet)
	out, err := f.Kubectl("logs", "once")
	if err != nil || !strings.Contains(out, "hello from once") {
		t.Fatalf("kubectl logs: %q, %v", out, err)
	}
}

// mountInfo returns the host's mount points (this process runs in the host's mount
// namespace) with their optional fields (e.g. "shared:12").
func mountInfo(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mounts := map[string]string{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		// id parent major:minor root mountpoint options [optional...] - fstype source superopts
		sep := 6
		for sep < len(fields) && fields[sep] != "-" {
			sep++
		}
		mounts[fields[4]] = strings.Join(fields[6:sep], " ") + " " + strings.Join(fields[sep+1:min(sep+2, len(fields))], "")
	}
	return mounts
}

func TestSmokeBidirectionalPropagation(t *testing.T) {
	f := framework.New(t)
	if opt, ok := mountInfo(t)["/var/lib/kubelet"]; !ok || !strings.Contains(opt, "shared:") {
		t.Fatalf("/var/lib/kubelet is not a shared mount point on the host (mountinfo: %q); the kubelet should make it rshared", opt)
	}
	hostDir := filepath.Join("/var/lib/kubelet/plugins/pav.albertofaria.github.io", f.Namespace)
	hostMount := filepath.Join(hostDir, "m")
	t.Cleanup(func() {
		// a mount left behind by a failed run would outlive the pod: remove it
		if _, ok := mountInfo(t)[hostMount]; ok {
			t.Errorf("%s still mounted at cleanup; unmounting", hostMount)
			_ = syscall.Unmount(hostMount, syscall.MNT_DETACH)
		}
		_ = os.RemoveAll(hostDir)
	})

	pod := testPod("prop", `
set -e
mkdir -p /host/m
mount -t tmpfs -o size=1m pav-smoke /host/m
echo from-pod > /host/m/file
touch /tmp/ready
trap 'umount /host/m && echo unmounted; exit 0' TERM
echo mounted
sleep 3600 & wait $!`, true)
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{
		Name: "h", MountPath: "/host", MountPropagation: ptr(corev1.MountPropagationBidirectional),
	}}
	pod.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"test", "-f", "/tmp/ready"}}},
		PeriodSeconds: 1,
	}
	pod.Spec.Volumes = []corev1.Volume{{Name: "h", VolumeSource: corev1.VolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: hostDir, Type: ptr(corev1.HostPathDirectoryOrCreate)},
	}}}
	// On the node whose mounts this machine sees.
	f.CreatePod(framework.PinToNode(pod, f.HostNode()))
	f.WaitForPod("prop", podTimeout, framework.PodRunningReady)

	info, ok := mountInfo(t)[hostMount]
	if !ok || !strings.Contains(info, "tmpfs") {
		t.Fatalf("the pod's tmpfs at %s is not visible on the host (mountinfo: %q)", hostMount, info)
	}
	b, err := os.ReadFile(filepath.Join(hostMount, "file"))
	if err != nil || string(b) != "from-pod\n" {
		t.Fatalf("reading the pod's file through the host: %q, %v", b, err)
	}

	// The pod unmounts on SIGTERM; the unmount must propagate back to the host.
	f.DeletePod("prop", podTimeout)
	if _, ok := mountInfo(t)[hostMount]; ok {
		t.Fatalf("%s is still mounted on the host after the pod unmounted it and was deleted", hostMount)
	}
}

func TestSmokeFuse(t *testing.T) {
	f := framework.New(t)
	// Mount a FUSE file system on an open /dev/fuse and read the kernel's FUSE_INIT
	// request from it: proves the device works and FUSE mounts are allowed.
	logs := runToSuccess(f, testPod("fuse", `
set -e
test -c /dev/fuse
mkdir -p /mnt/f
exec 3<>/dev/fuse
mount -t fuse -o fd=3,rootmode=40000,user_id=0,group_id=0 pav-smoke /mnt/f
grep ' /mnt/f fuse' /proc/mounts
n=$(dd bs=135168 count=1 <&3 2>/dev/null | wc -c)
echo "fuse init request: $n bytes"
test "$n" -gt 0
umount -l /mnt/f
echo fuse-ok`, true))
	if !strings.Contains(logs, "fuse-ok") {
		t.Fatalf("unexpected logs: %q", logs)
	}
}

func TestSmokeLoopDevice(t *testing.T) {
	f := framework.New(t)
	logs := runToSuccess(f, testPod("loop", `
set -e
dd if=/dev/zero of=/tmp/disk bs=1M count=16 2>/dev/null
dev=$(losetup -f)
losetup "$dev" /tmp/disk
trap 'losetup -d "$dev"' EXIT
mke2fs -q "$dev"
mkdir -p /mnt/l
mount -t ext2 "$dev" /mnt/l
echo data > /mnt/l/f
umount /mnt/l
echo "loop-ok $dev"`, true))
	if !strings.Contains(logs, "loop-ok /dev/loop") {
		t.Fatalf("unexpected logs: %q", logs)
	}
}

func TestSmokeClusterIPService(t *testing.T) {
	f := framework.New(t)
	web := testPod("web", `mkdir -p /www && echo hello-from-web > /www/index.html && exec httpd -f -p 8080 -h /www`, false)
	web.Labels = map[string]string{"app": "web"}
	web.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}},
		PeriodSeconds: 1,
	}
	f.CreatePod(web)
	svc, err := f.Client.CoreV1().Services(f.Namespace).Create(f.Ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.WaitForPod("web", podTimeout, framework.PodRunningReady)
	// kube-proxy programs the rules shortly after the endpoints appear: retry inside the pod
	logs := runToSuccess(f, testPod("client", `for i in $(seq 20); do timeout 3 wget -qO- http://`+svc.Spec.ClusterIP+`/ && exit 0; sleep 0.5; done; exit 1`, false))
	if !strings.Contains(logs, "hello-from-web") {
		t.Fatalf("unexpected response through the service: %q", logs)
	}
}
