//go:build e2e

// Package webhookload tests PaV's admission webhook against an ordinary pod
// that floods it with hostile AdmissionReviews (loadgen, in the test image):
// the controller replicas survive within their memory limit and keep
// admitting PavProvisioners; and with client authentication on (as `make
// deploy-only` installs PaV on the local cluster), the pod does not get past
// the TLS handshake while the API server's reviews still do.
//
// TestHostileReviews turns client authentication off for its load, and on
// again, waiting for each rollout, so the next test finds PaV as it was.
package webhookload

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	pavtyped "github.com/albertofaria/pav/crds/generated/clientset/versioned/typed/crds/v1alpha1"
	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/test/e2e/framework"
)

const (
	pavNamespace = "pav"
	deployment   = "controller-agent"
	service      = "pav-webhook"
	// The bound: a PavProvisioner is admitted within 2 s while the
	// webhook is under load (the API server's answer time).
	admissionBound = 2 * time.Second
	timeout        = 3 * time.Minute
	// The client CA the local cluster's API server presents a certificate
	// from (hack/cluster/up.sh webhook_client_auth).
	clusterClientCA = "/var/lib/pav-cluster/pki/webhook-client-ca.crt"
)

// replica is a controller pod as it was when the load began.
type replica struct {
	name, containerID string
	uid               types.UID
	restarts          int32
	limit             int64 // bytes
	pids              []int
}

// replicas lists the controller pods, with their processes if withProcesses.
func replicas(t *testing.T, f *framework.Framework, withProcesses bool) []replica {
	t.Helper()
	pods, err := f.Client.CoreV1().Pods(pavNamespace).List(f.Ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=" + deployment})
	if err != nil {
		t.Fatal(err)
	}
	var out []replica
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		if len(p.Status.ContainerStatuses) != 1 {
			t.Fatalf("controller pod %s: %d container statuses", p.Name, len(p.Status.ContainerStatuses))
		}
		cs := p.Status.ContainerStatuses[0]
		r := replica{name: p.Name, uid: p.UID, containerID: cs.ContainerID, restarts: cs.RestartCount,
			limit: p.Spec.Containers[0].Resources.Limits.Memory().Value()}
		if withProcesses {
			if r.pids, err = framework.PodProcesses(p.UID); err != nil || len(r.pids) == 0 {
				t.Fatalf("processes of controller pod %s: %v (%d found)", p.Name, err, len(r.pids))
			}
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		t.Fatal("no controller pods")
	}
	return out
}

// resetPeakRSS makes the kernel's record of a process's peak RSS (VmHWM)
// start again from its current RSS.
func resetPeakRSS(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// peakRSS is a process's peak RSS since resetPeakRSS, in bytes.
func peakRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}

// webhookURL is the webhook Service's address as any pod reaches it.
func webhookURL(t *testing.T, f *framework.Framework) string {
	t.Helper()
	svc, err := f.Client.CoreV1().Services(pavNamespace).Get(f.Ctx, service, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return "https://" + svc.Spec.ClusterIP + "/validate-pavprovisioner"
}

// startLoad runs loadgen in an ordinary pod of the test namespace.
func startLoad(t *testing.T, f *framework.Framework, name string, args ...string) {
	t.Helper()
	f.CreatePod(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{
				Name: "load", Image: framework.TestImage, ImagePullPolicy: corev1.PullIfNotPresent,
				Command: append([]string{"/bin/pav-webhook-load", "-url", webhookURL(t, f)}, args...),
			}},
		},
	})
}

// loadSummary waits for the load pod to finish and returns its summary:
// per kind of payload, how many requests ended how.
func loadSummary(t *testing.T, f *framework.Framework, name string) map[string]map[string]int {
	t.Helper()
	f.WaitForPod(name, timeout, framework.PodSucceeded)
	logs := f.PodLogs(name, "")
	_, after, ok := strings.Cut(logs, "load: summary ")
	if !ok {
		t.Fatalf("no summary in the load pod's logs:\n%s", logs)
	}
	var out map[string]map[string]int
	if err := json.Unmarshal([]byte(strings.TrimSpace(after)), &out); err != nil {
		t.Fatalf("the load pod's summary: %v", err)
	}
	return out
}

// provisioner is an ordinary PavProvisioner.
func provisioner(name string) *v1alpha1.PavProvisioner {
	return &v1alpha1.PavProvisioner{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.PavProvisionerSpec{
			ProvisioningModes: []v1alpha1.ProvisioningMode{v1alpha1.Dynamic},
			VolumeCreation:    &v1alpha1.VolumeCreation{Capacity: v1alpha1.NewValue("{{ requestedMinCapacity }}")},
			VolumeStaging: &v1alpha1.VolumeStaging{PodTemplate: v1alpha1.NewValue(map[string]any{"spec": map[string]any{"containers": []any{
				map[string]any{"name": "stage", "image": framework.TestImage, "command": []any{"sh", "-c", "mkdir /pav/volume"}},
			}}})},
		},
	}
}

// create creates an ordinary PavProvisioner, deletes it again, and returns
// how long the API server took to admit it.
func create(t *testing.T, f *framework.Framework, pavs pavtyped.PavProvisionerInterface, name string) (time.Duration, error) {
	t.Helper()
	start := time.Now()
	_, err := pavs.Create(f.Ctx, provisioner(name), metav1.CreateOptions{})
	took := time.Since(start)
	if err == nil {
		if err := pavs.Delete(f.Ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting PavProvisioner %s: %v", name, err)
		}
	}
	return took, err
}

// 50 concurrent hostile reviews from an ordinary pod for 20 s, with client
// authentication off (so that they reach the handler): template bombs and
// literal specs of up to the body limit and past it, and 10 of the 50
// dribbling their bodies. The controller replicas never restart, their RSS
// stays under their memory limit with a margin, and ordinary
// PavProvisioners created meanwhile are each admitted within 2 s.
func TestHostileReviews(t *testing.T) {
	f := framework.New(t)
	pavs, err := framework.PavProvisioners(f.Config)
	if err != nil {
		t.Fatal(err)
	}
	original := setTemplate(t, f, func(spec *corev1.PodSpec) {
		c := &spec.Containers[0]
		c.Args = slices.DeleteFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--webhook-client-") })
	})
	t.Cleanup(func() {
		setTemplate(t, f, func(spec *corev1.PodSpec) { *spec = original })
	})
	before := replicas(t, f, true)
	// A replica that fell over is restarted: the next test finds it ready.
	t.Cleanup(func() {
		for _, r := range replicas(t, f, false) {
			if _, err := framework.WaitForPod(context.Background(), f.Client, pavNamespace, r.name, timeout, framework.PodRunningReady); err != nil {
				t.Error(err)
			}
		}
	})
	for _, r := range before {
		for _, pid := range r.pids {
			if err := resetPeakRSS(pid); err != nil {
				t.Fatalf("controller pod %s: %v", r.name, err)
			}
		}
	}

	summary := admitUnderLoad(t, f, pavs, "20s", "-slow", "10")
	t.Logf("load pod's requests, by payload and outcome: %v", summary)
	for kind, outcomes := range summary {
		for outcome, n := range outcomes {
			if outcome == "200 allowed" {
				t.Errorf("%d %s reviews allowed", n, kind)
			}
		}
	}

	after := map[types.UID]replica{}
	for _, r := range replicas(t, f, false) {
		after[r.uid] = r
	}
	for _, r := range before {
		a, ok := after[r.uid]
		switch {
		case !ok:
			t.Errorf("controller pod %s is gone", r.name)
			continue
		case a.restarts != r.restarts || a.containerID != r.containerID:
			t.Errorf("controller pod %s restarted: restarts %d -> %d, container %s -> %s%s", r.name, r.restarts, a.restarts, r.containerID, a.containerID, lastTermination(t, f, r.name))
			continue
		}
		for _, pid := range r.pids {
			peak, err := peakRSS(pid)
			if err != nil {
				t.Errorf("controller pod %s: %v", r.name, err)
				continue
			}
			t.Logf("controller pod %s: peak RSS %.1f MiB (limit %d MiB)", r.name, float64(peak)/(1<<20), r.limit>>20)
			// The margin: GOMEMLIMIT, 80% of the limit (cmd/pav/gc.go).
			if peak >= r.limit/10*8 {
				t.Errorf("controller pod %s: peak RSS %d bytes, not under 80%% of its memory limit %d", r.name, peak, r.limit)
			}
		}
	}
}

// admitUnderLoad runs the load pod (50 concurrent hostile reviews for
// duration) and, while it runs, creates an ordinary PavProvisioner a second,
// each of which must be admitted within admissionBound. It returns the load
// pod's summary.
func admitUnderLoad(t *testing.T, f *framework.Framework, pavs pavtyped.PavProvisionerInterface, duration string, args ...string) map[string]map[string]int {
	t.Helper()
	startLoad(t, f, "load", append([]string{"-concurrency", "50", "-duration", duration}, args...)...)
	waitForLog(t, f, "load", "load: in flight")
	var took []time.Duration
	var failures []string
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for i := 0; ; i++ {
		pod, err := f.Client.CoreV1().Pods(f.Namespace).Get(f.Ctx, "load", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if pod.Status.Phase != corev1.PodRunning {
			break
		}
		name := fmt.Sprintf("%s-%d", f.Namespace, i)
		d, err := create(t, f, pavs, name)
		took = append(took, d)
		if err != nil {
			failures = append(failures, fmt.Sprintf("%s after %v: %v", name, d.Round(time.Millisecond), err))
		} else if d > admissionBound {
			failures = append(failures, fmt.Sprintf("%s admitted after %v", name, d.Round(time.Millisecond)))
		}
		<-tick.C
	}
	summary := loadSummary(t, f, "load")
	if len(took) == 0 {
		t.Fatal("no PavProvisioner was created while the load ran")
	}
	slices.Sort(took)
	t.Logf("admission of %d ordinary PavProvisioners under load: median %v, max %v",
		len(took), framework.NearestRank(took, 0.5).Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond))
	if len(failures) > 0 {
		t.Errorf("%d of %d PavProvisioners not admitted within %v, e.g.:\n%s", len(failures), len(took), admissionBound, strings.Join(failures[:min(5, len(failures))], "\n"))
	}
	return summary
}

// lastTermination says why a controller pod's container last ended.
func lastTermination(t *testing.T, f *framework.Framework, name string) string {
	p, err := f.Client.CoreV1().Pods(pavNamespace).Get(f.Ctx, name, metav1.GetOptions{})
	if err != nil || len(p.Status.ContainerStatuses) == 0 {
		return ""
	}
	if term := p.Status.ContainerStatuses[0].LastTerminationState.Terminated; term != nil {
		return fmt.Sprintf(" (last exit: %s, code %d)", term.Reason, term.ExitCode)
	}
	return ""
}

// waitForLog waits until a pod of the test namespace logged line.
func waitForLog(t *testing.T, f *framework.Framework, pod, line string) {
	t.Helper()
	for deadline := time.Now().Add(timeout); ; time.Sleep(200 * time.Millisecond) {
		p, err := f.Client.CoreV1().Pods(f.Namespace).Get(f.Ctx, pod, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodSucceeded {
			if strings.Contains(f.PodLogs(pod, ""), line) {
				return
			}
		}
		if p.Status.Phase == corev1.PodFailed || time.Now().After(deadline) {
			t.Fatalf("pod %s never logged %q (phase %s); logs:\n%s", pod, line, p.Status.Phase, f.PodLogs(pod, ""))
		}
	}
}

// Client authentication is on as `make deploy-only` installs PaV on the
// local cluster (ConfigMap pav-webhook-client-ca, the CA of its API server's
// webhook client certificate, hack/cluster/up.sh): the load pod gets no
// answer at all, every connection refused at the TLS handshake, while the
// API server's reviews still pass: a valid PavProvisioner is admitted
// (within 2 s under that load) and an invalid one refused with the
// webhook's message.
func TestClientAuth(t *testing.T) {
	if _, err := os.Stat(clusterClientCA); err != nil {
		t.Skipf("the local cluster's API server presents no webhook client certificate (%v): restart it with hack/cluster/restart.sh kube-apiserver", err)
	}
	f := framework.New(t)
	pavs, err := framework.PavProvisioners(f.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Client.CoreV1().ConfigMaps(pavNamespace).Get(f.Ctx, "pav-webhook-client-ca", metav1.GetOptions{}); err != nil {
		t.Fatalf("make deploy-only made no ConfigMap with the API server's client CA: %v", err)
	}
	for _, r := range replicas(t, f, false) {
		p, err := f.Client.CoreV1().Pods(pavNamespace).Get(f.Ctx, r.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(p.Spec.Containers[0].Args, "--webhook-client-ca=/etc/pav/webhook-client-ca/ca.crt") {
			t.Fatalf("controller pod %s runs without --webhook-client-ca: %v", r.name, p.Spec.Containers[0].Args)
		}
	}

	if _, err := create(t, f, pavs, f.Namespace+"-valid"); err != nil {
		t.Errorf("a valid PavProvisioner with client authentication on: %v", err)
	}
	invalid := provisioner(f.Namespace + "-invalid")
	invalid.Spec.VolumeCreation.Capacity = v1alpha1.NewValue("{{ 1 +")
	if _, err := pavs.Create(f.Ctx, invalid, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err == nil || !strings.Contains(err.Error(), "spec.volumeCreation.capacity") {
		t.Errorf("an invalid PavProvisioner with client authentication on: %v, want the webhook's refusal naming spec.volumeCreation.capacity", err)
	}

	start := time.Now()
	summary := admitUnderLoad(t, f, pavs, "15s")
	t.Logf("load pod's requests, by payload and outcome: %v", summary)
	requests := 0
	for kind, outcomes := range summary {
		for outcome, n := range outcomes {
			requests += n
			if outcome[0] >= '0' && outcome[0] <= '9' {
				t.Errorf("%d %s requests of the load pod were answered (%s), want refused at the TLS handshake", n, kind, outcome)
			}
		}
	}
	// The server's side: each of those connections was refused for want of
	// a client certificate.
	refused := 0
	for _, r := range replicas(t, f, false) {
		logs, err := f.Client.CoreV1().Pods(pavNamespace).GetLogs(r.name, &corev1.PodLogOptions{SinceTime: &metav1.Time{Time: start.Add(-time.Second)}}).DoRaw(f.Ctx)
		if err != nil {
			t.Fatal(err)
		}
		refused += strings.Count(string(logs), "client didn't provide a certificate")
	}
	if refused < requests {
		t.Errorf("the controller logged %d handshakes refused for want of a client certificate, want %d (the load pod's requests)", refused, requests)
	}
}

// setTemplate changes the controller Deployment's pod spec, waits for the
// rollout, and returns the spec as it was.
func setTemplate(t *testing.T, f *framework.Framework, change func(*corev1.PodSpec)) corev1.PodSpec {
	t.Helper()
	ctx := context.Background() // also from Cleanup, after f.Ctx ends
	deployments := f.Client.AppsV1().Deployments(pavNamespace)
	var d *appsv1.Deployment
	var err error
	if d, err = deployments.Get(ctx, deployment, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	original := *d.Spec.Template.Spec.DeepCopy()
	change(&d.Spec.Template.Spec)
	if _, err := deployments.Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if out, err := framework.Kubectl(ctx, "-n", pavNamespace, "rollout", "status", "deployment/"+deployment, "--timeout="+timeout.String()); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	// The rollout is complete once the new replicas are available, while the
	// old ones may still be terminating, answering on the connections they
	// have: wait until only pods of the new template are left.
	want := d.Spec.Template.Spec.Containers[0].Args
	deadline := time.Now().Add(timeout)
	for {
		pods, err := f.Client.CoreV1().Pods(pavNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=" + deployment})
		if err != nil {
			t.Fatal(err)
		}
		old := 0
		for _, p := range pods.Items {
			if !slices.Equal(p.Spec.Containers[0].Args, want) {
				old++
			}
		}
		if old == 0 {
			return original
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d controller pods of the previous template still there %v after the rollout", old, timeout)
		}
		time.Sleep(time.Second)
	}
}
