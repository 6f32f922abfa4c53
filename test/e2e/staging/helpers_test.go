//go:build e2e || e2e_slow

// Package staging tests volume staging and unstaging by PaV's node plugin end
// to end on the local cluster: real kubelet, real staging pods, real mounts.
// The test binary runs on the node itself (in the cluster's network
// namespace only), so it can look at the node's mounts and /pav directories.
//
// Run with PaV installed (make deploy):
// flock /tmp/pav-e2e.lock hack/cluster/netns-exec go test -tags e2e ./test/e2e/staging/
package staging

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	pavtyped "github.com/albertofaria/pav/crds/generated/clientset/versioned/typed/crds/v1alpha1"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/test/e2e/framework"
)

const timeout = 2 * time.Minute

// hostRoot is a host directory the tests' pods leave markers and backing files in.
const hostRoot = "/var/tmp/pav-e2e-staging"

type env struct {
	*framework.Framework
	t      *testing.T
	pav    pavtyped.PavProvisionerInterface
	prov   string // the test's PavProvisioner
	dirs   map[string]bool
	marker string // host directory for this test, mounted at /marker in PaV pods
}

// newEnv creates the test namespace and a PavProvisioner from specYAML
// (NS is replaced with the namespace, PROV with the provisioner's name,
// MARKER with the test's host directory). At the end it deletes everything
// and checks that nothing PaV made is left behind.
func newEnv(t *testing.T, specYAML string) *env {
	f := framework.New(t)
	pav, err := framework.PavProvisioners(f.Config)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{Framework: f, t: t, pav: pav, dirs: podDirs(t)}
	e.prov = "e2e-stg-" + e.Namespace[len(e.Namespace)-5:]
	e.marker = filepath.Join(hostRoot, e.Namespace)
	if err := os.MkdirAll(e.marker, 0o755); err != nil {
		t.Fatal(err)
	}
	r := strings.NewReplacer("NS", e.Namespace, "PROV", e.prov, "MARKER", e.marker)
	doc := "metadata:\n  name: " + e.prov + "\nspec:\n" + indent(r.Replace(specYAML), "  ")
	var p v1alpha1.PavProvisioner
	if err := yaml.Unmarshal([]byte(doc), &p); err != nil {
		t.Fatalf("provisioner YAML: %v\n%s", err, doc)
	}
	if _, err := pav.Create(f.Ctx, &p, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating PavProvisioner: %v\n%s", err, doc)
	}
	// Cleanups run last-registered first: this one before the namespace is deleted.
	t.Cleanup(e.cleanup)
	// The CSIDriver (controller) and kubelet registration (node plugin) come asynchronously.
	if _, err := framework.WaitFor(f.Ctx, f.Client.StorageV1().CSIDrivers(), e.prov, time.Minute, func(*storagev1.CSIDriver) (bool, error) { return true, nil }); err != nil {
		t.Fatalf("no CSIDriver for the provisioner: %v", err)
	}
	node := e.nodeName()
	if _, err := framework.WaitFor(f.Ctx, f.Client.StorageV1().CSINodes(), node, time.Minute, func(n *storagev1.CSINode) (bool, error) {
		for _, d := range n.Spec.Drivers {
			if d.Name == e.prov {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("kubelet never registered driver %s: %v", e.prov, err)
	}
	return e
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n") + "\n"
}

// nodeName is the node every client pod runs on: the one whose kubelet
// directory, /pav directories and mounts this machine sees.
func (e *env) nodeName() string {
	e.t.Helper()
	return e.HostNode()
}

// cleanup deletes the test's pods, claims, volumes and provisioner, then
// checks that no PaV pod, mount or /pav directory of the test remains.
func (e *env) cleanup() {
	t := e.t
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := e.Client
	pods, _ := c.CoreV1().Pods(e.Namespace).List(ctx, metav1.ListOptions{})
	for _, p := range pods.Items {
		if p.Labels[protocol.LabelPhase] == "" {
			_ = c.CoreV1().Pods(e.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})
		}
	}
	for _, p := range pods.Items {
		if p.Labels[protocol.LabelPhase] == "" {
			if err := framework.WaitForDeletion(ctx, c.CoreV1().Pods(e.Namespace), p.Name); err != nil {
				t.Errorf("cleanup: client pod %s: %v", p.Name, err)
			}
		}
	}
	pvcs, _ := c.CoreV1().PersistentVolumeClaims(e.Namespace).List(ctx, metav1.ListOptions{})
	for _, pvc := range pvcs.Items {
		_ = c.CoreV1().PersistentVolumeClaims(e.Namespace).Delete(ctx, pvc.Name, metav1.DeleteOptions{})
	}
	pvs, _ := c.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	for _, pv := range pvs.Items {
		if pv.Spec.CSI != nil && pv.Spec.CSI.Driver == e.prov {
			_ = c.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{})
			if err := framework.WaitForDeletion(ctx, c.CoreV1().PersistentVolumes(), pv.Name); err != nil {
				t.Errorf("cleanup: PV %s: %v", pv.Name, err)
			}
		}
	}
	_ = c.StorageV1().StorageClasses().Delete(ctx, e.prov, metav1.DeleteOptions{})
	if err := e.pav.Delete(ctx, e.prov, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("cleanup: deleting PavProvisioner: %v", err)
	}
	if err := framework.WaitForDeletion(ctx, e.pav, e.prov); err != nil {
		t.Errorf("cleanup: PavProvisioner %s: %v", e.prov, err)
	}
	// Nothing of PaV's may remain: pods, /pav directories, mounts.
	left, err := c.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: protocol.LabelProvisioner + "=" + e.prov})
	if err == nil && len(left.Items) > 0 {
		var names []string
		for _, p := range left.Items {
			names = append(names, p.Namespace+"/"+p.Name)
		}
		t.Errorf("PaV pods left behind: %v", names)
	}
	// Result directories of creation pods are removed asynchronously (at most a few seconds).
	deadline := time.Now().Add(30 * time.Second)
	var extra []string
	for {
		extra = nil
		for d := range podDirs(t) {
			if !e.dirs[d] {
				extra = append(extra, d)
			}
		}
		if len(extra) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if len(extra) > 0 {
		t.Errorf("/pav directories left behind: %v", extra)
	}
	if m := mountsUnder(t, protocol.PodDirRoot(protocol.DefaultKubeletDir)); len(m) > 0 {
		t.Errorf("mounts left under %s: %v", protocol.PodDirRoot(protocol.DefaultKubeletDir), m)
	}
	_ = os.RemoveAll(e.marker)
}

// podDirs lists the node's PaV pod directories.
func podDirs(t *testing.T) map[string]bool {
	dirs, err := framework.PodDirs()
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

// mountsUnder lists the host's mount points at or under path.
func mountsUnder(t *testing.T, path string) []string {
	mps, err := framework.MountsUnder(path)
	if err != nil {
		t.Fatal(err)
	}
	return mps
}

// storageClass creates the StorageClass named after the provisioner.
func (e *env) storageClass(params map[string]string) {
	e.t.Helper()
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: e.prov}, Provisioner: e.prov, Parameters: params}
	if _, err := e.Client.StorageV1().StorageClasses().Create(e.Ctx, sc, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// claim creates a PVC of the provisioner's class.
func (e *env) claim(name string, mode corev1.PersistentVolumeMode, access corev1.PersistentVolumeAccessMode) {
	e.t.Helper()
	class := e.prov
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &class,
			VolumeMode:       &mode,
			AccessModes:      []corev1.PersistentVolumeAccessMode{access},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}},
		},
	}
	if _, err := e.Client.CoreV1().PersistentVolumeClaims(e.Namespace).Create(e.Ctx, pvc, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// staticVolume creates a PV for the provisioner, pre-bound to a new claim.
func (e *env) staticVolume(claim, handle, capacity string, attrs map[string]string) string {
	e.t.Helper()
	pvName := e.Namespace + "-" + claim
	empty := ""
	fs := corev1.PersistentVolumeFilesystem
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(capacity)},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			VolumeMode:                    &fs,
			ClaimRef:                      &corev1.ObjectReference{Namespace: e.Namespace, Name: claim},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: e.prov, VolumeHandle: handle, VolumeAttributes: attrs,
			}},
		},
	}
	if _, err := e.Client.CoreV1().PersistentVolumes().Create(e.Ctx, pv, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: claim},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &empty,
			VolumeName:       pvName,
			VolumeMode:       &fs,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(capacity)}},
		},
	}
	if _, err := e.Client.CoreV1().PersistentVolumeClaims(e.Namespace).Create(e.Ctx, pvc, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	return pvName
}

// clientPod creates a run-to-completion pod running script with the given
// claims mounted at /data/<claim> (or, for block claims, as /dev/<claim>).
func (e *env) clientPod(name, script string, claims []string, readOnly bool, block bool) *corev1.Pod {
	e.t.Helper()
	return e.CreatePod(framework.PinToNode(clientPodObject(name, script, claims, readOnly, block), e.nodeName()))
}

// clientPodObject is the pod clientPod creates, for tests that change it first.
func clientPodObject(name, script string, claims []string, readOnly bool, block bool) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{
				Name: "client", Image: framework.TestImage, ImagePullPolicy: corev1.PullIfNotPresent,
				Command: []string{"/bin/sh", "-c", script},
			}},
		},
	}
	for _, c := range claims {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: c, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c, ReadOnly: readOnly}}})
		if block {
			pod.Spec.Containers[0].VolumeDevices = append(pod.Spec.Containers[0].VolumeDevices, corev1.VolumeDevice{Name: c, DevicePath: "/dev/" + c})
		} else {
			pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: c, MountPath: "/data/" + c})
		}
	}
	return pod
}

// succeeded waits until the pod succeeded and returns its log.
func (e *env) succeeded(name string) string {
	e.t.Helper()
	e.WaitForPod(name, timeout, framework.PodSucceeded)
	return e.PodLogs(name, "")
}

// waitForEvent waits until an event on the object matches re.
func (e *env) waitForEvent(object string, re *regexp.Regexp, within time.Duration) string {
	e.t.Helper()
	deadline := time.Now().Add(within)
	var seen []string
	for time.Now().Before(deadline) {
		evs, err := e.Client.CoreV1().Events(e.Namespace).List(e.Ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + object})
		if err != nil {
			e.t.Fatal(err)
		}
		seen = seen[:0]
		for _, ev := range evs.Items {
			if re.MatchString(ev.Message) {
				return ev.Message
			}
			seen = append(seen, ev.Reason+": "+ev.Message)
		}
		time.Sleep(500 * time.Millisecond)
	}
	e.t.Fatalf("no event on %s matching %q within %v; events: %s", object, re, within, strings.Join(seen, "\n"))
	return ""
}

// marked reports whether a PaV pod left the marker file name in MARKER.
// marked tells whether a PaV pod created the marker file name, waiting for it
// a while: kubelet removes a deleted client pod's object before its
// NodeUnpublishVolume (which runs the unstaging pod) has returned.
func (e *env) marked(name string) bool {
	for deadline := time.Now().Add(timeout); ; time.Sleep(100 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(e.marker, name)); err == nil {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// podTemplate is the YAML of a PaV pod template (in the test namespace, with
// the test's marker directory at /marker).
func podTemplate(name, script string, privileged bool) string {
	return "podTemplate:\n" + indent(`metadata: {namespace: NS}
spec:
  terminationGracePeriodSeconds: 5
  volumes: [{name: marker, hostPath: {path: MARKER, type: Directory}}]
  containers:
`+indent(container(name, script, privileged), "  "), "  ")
}

// container is the YAML of a PaV pod's container running script in the test image.
func container(name, script string, privileged bool) string {
	var b strings.Builder
	b.WriteString("- name: " + name + "\n")
	b.WriteString("  image: " + framework.TestImage + "\n")
	b.WriteString("  imagePullPolicy: IfNotPresent\n")
	if privileged {
		b.WriteString("  securityContext: {privileged: true}\n")
	}
	b.WriteString("  volumeMounts: [{name: marker, mountPath: /marker}]\n")
	b.WriteString("  command:\n    - /bin/sh\n    - -c\n    - |\n")
	for _, l := range strings.Split(strings.TrimSpace(script), "\n") {
		b.WriteString("      " + l + "\n")
	}
	return b.String()
}

func section(name string, podTemplateYAML string) string {
	return name + ":\n" + indent(podTemplateYAML, "  ")
}

// WaitForPVCBound waits until a claim of the test namespace is bound.
func (e *env) WaitForPVCBound(name string) {
	e.t.Helper()
	if _, err := framework.WaitFor(e.Ctx, e.Client.CoreV1().PersistentVolumeClaims(e.Namespace), name, timeout,
		func(pvc *corev1.PersistentVolumeClaim) (bool, error) {
			return pvc.Status.Phase == corev1.ClaimBound, nil
		}); err != nil {
		e.t.Fatal(err)
	}
}

// exec runs a command in a pod and returns its output.
func (e *env) exec(pod string, command ...string) string {
	e.t.Helper()
	out, err := framework.Kubectl(e.Ctx, append([]string{"-n", e.Namespace, "exec", pod, "--"}, command...)...)
	if err != nil {
		e.t.Fatalf("exec in %s: %v: %s", pod, err, out)
	}
	return out
}

// markerLines counts the lines of a marker file PaV's pods appended to.
func (e *env) markerLines(name string) int {
	b, err := os.ReadFile(filepath.Join(e.marker, name))
	if err != nil {
		return 0
	}
	return strings.Count(string(b), "\n")
}
