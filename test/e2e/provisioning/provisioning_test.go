//go:build e2e

// Package provisioning tests dynamic provisioning and deletion end to end on
// the local cluster, with PaV installed from deployment.yaml and real pods.
//
// Run with: make e2e (or, with PaV installed by `make deploy`:
// flock /tmp/pav-e2e.lock hack/cluster/netns-exec go test -tags e2e ./test/e2e/provisioning/).
package provisioning

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pavtyped "github.com/albertofaria/pav/crds/generated/clientset/versioned/typed/crds/v1alpha1"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/yaml"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/describe"
	"github.com/albertofaria/pav/kubeclient"
	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/test/e2e/framework"
)

const timeout = 2 * time.Minute

// markerRoot is a host directory the tests' deletion pods leave markers in
// (the test binary runs on the host, in the cluster's network namespace only).
const markerRoot = "/var/tmp/pav-e2e-markers"

func TestMain(m *testing.M) {
	if err := install(); err != nil {
		fmt.Fprintln(os.Stderr, "installing PaV:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// install applies deployment.yaml as a user would (image pav:latest, loaded by
// `make images cluster-load`) and waits for PaV; PAV_E2E_SKIP_INSTALL skips it
// (e.g. right after `make deploy`).
func install() error {
	if os.Getenv("PAV_E2E_SKIP_INSTALL") != "" {
		return nil
	}
	root, err := framework.RepoRoot()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	steps := [][]string{
		{"apply", "-f", filepath.Join(root, "deployment.yaml")},
		{"-n", "pav", "rollout", "status", "deployment/controller-agent", "--timeout=180s"},
		{"-n", "pav", "rollout", "status", "daemonset/node-agent", "--timeout=180s"},
	}
	for _, args := range steps {
		if out, err := framework.Kubectl(ctx, args...); err != nil {
			return fmt.Errorf("%v\n%s", err, out)
		}
	}
	// The webhook accepts requests once the CA bundle is in place.
	cfg, err := framework.LoadConfig()
	if err != nil {
		return err
	}
	pav, err := framework.PavProvisioners(cfg)
	if err != nil {
		return err
	}
	probe := &v1alpha1.PavProvisioner{ObjectMeta: metav1.ObjectMeta{Name: "e2e-install-probe"}, Spec: v1alpha1.PavProvisionerSpec{
		ProvisioningModes: []v1alpha1.ProvisioningMode{v1alpha1.Static},
		VolumeStaging:     &v1alpha1.VolumeStaging{PodTemplate: v1alpha1.NewValue(map[string]interface{}{"spec": map[string]interface{}{"containers": []interface{}{map[string]interface{}{"name": "c", "image": "busybox"}}}})},
	}}
	var last error
	for ctx.Err() == nil {
		_, last = pav.Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if last == nil {
			return nil
		}
		time.Sleep(time.Second)
	}
	return fmt.Errorf("PavProvisioners cannot be created: %v", last)
}

type env struct {
	*framework.Framework
	t   *testing.T
	pav pavtyped.PavProvisionerInterface
}

func newEnv(t *testing.T) *env {
	f := framework.New(t)
	pav, err := framework.PavProvisioners(f.Config)
	if err != nil {
		t.Fatal(err)
	}
	return &env{Framework: f, t: t, pav: pav}
}

// provisioner creates a PavProvisioner from YAML (the spec part); NS is
// replaced with the test namespace, so PaV's pods land there.
func (e *env) provisioner(name, specYAML string) *v1alpha1.PavProvisioner {
	e.t.Helper()
	name = name + "-" + e.Namespace[len(e.Namespace)-5:]
	var p v1alpha1.PavProvisioner
	doc := "metadata:\n  name: " + name + "\nspec:\n" + indent(strings.ReplaceAll(specYAML, "NS", e.Namespace), "  ")
	if err := yaml.Unmarshal([]byte(doc), &p); err != nil {
		e.t.Fatalf("provisioner YAML: %v\n%s", err, doc)
	}
	out, err := e.pav.Create(e.Ctx, &p, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("creating PavProvisioner: %v", err)
	}
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = e.pav.Delete(ctx, name, metav1.DeleteOptions{})
		for ctx.Err() == nil {
			if _, err := e.pav.Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
				return
			}
			time.Sleep(500 * time.Millisecond)
		}
		e.t.Errorf("PavProvisioner %s still exists a minute after deletion", name)
	})
	return out
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n") + "\n"
}

func (e *env) class(p *v1alpha1.PavProvisioner, mutate func(*storagev1.StorageClass)) string {
	e.t.Helper()
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: p.Name}, Provisioner: p.Name, Parameters: map[string]string{"prefix": "vol"}}
	if mutate != nil {
		mutate(sc)
	}
	if _, err := e.Client.StorageV1().StorageClasses().Create(e.Ctx, sc, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		_ = e.Client.StorageV1().StorageClasses().Delete(context.Background(), sc.Name, metav1.DeleteOptions{})
	})
	return sc.Name
}

func (e *env) claim(name, class, size string) *corev1.PersistentVolumeClaim {
	e.t.Helper()
	return e.claimWith(name, class, size, nil)
}

// claimWith is claim with mutate (if not nil) applied before it is created.
func (e *env) claimWith(name, class, size string, mutate func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	e.t.Helper()
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &class,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		},
	}
	if mutate != nil {
		mutate(pvc)
	}
	pvc, err := e.Client.CoreV1().PersistentVolumeClaims(e.Namespace).Create(e.Ctx, pvc, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	// Deleting the namespace deletes the claim; make sure its volume goes too.
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_ = e.Client.CoreV1().PersistentVolumeClaims(e.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
		pv := "pvc-" + string(pvc.UID)
		if cur, err := e.Client.CoreV1().PersistentVolumes().Get(ctx, pv, metav1.GetOptions{}); err == nil &&
			cur.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimRetain {
			_ = e.Client.CoreV1().PersistentVolumes().Delete(ctx, pv, metav1.DeleteOptions{})
		}
		_ = framework.WaitForDeletion(ctx, e.Client.CoreV1().PersistentVolumes(), pv)
	})
	return pvc
}

func (e *env) waitBound(name string) (*corev1.PersistentVolumeClaim, *corev1.PersistentVolume) {
	e.t.Helper()
	pvc, err := framework.WaitFor(e.Ctx, e.Client.CoreV1().PersistentVolumeClaims(e.Namespace), name, timeout,
		func(c *corev1.PersistentVolumeClaim) (bool, error) { return c.Status.Phase == corev1.ClaimBound, nil })
	if err != nil {
		e.t.Fatal(err)
	}
	pv, err := e.Client.CoreV1().PersistentVolumes().Get(e.Ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return pvc, pv
}

func (e *env) waitEvent(objName, reason, substring string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.Ctx, timeout)
	defer cancel()
	for {
		list, err := e.Client.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + objName})
		if err == nil {
			for _, ev := range list.Items {
				if ev.Reason == reason && strings.Contains(ev.Message, substring) {
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			out, _ := e.Kubectl("get", "events", "-A", "--field-selector", "involvedObject.name="+objName)
			e.t.Fatalf("no %s event on %s containing %q; events:\n%s", reason, objName, substring, out)
		case <-time.After(300 * time.Millisecond):
		}
	}
}

func (e *env) markerDir() string {
	dir := filepath.Join(markerRoot, e.Namespace)
	e.t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func (e *env) waitMarker(path string) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	e.t.Fatalf("marker %s never appeared", path)
}

// A pod template: run script in the test image; markers (a host dir) at /markers.
func pod(script string) string {
	return fmt.Sprintf(`podTemplate:
  metadata:
    namespace: NS
  spec:
    containers:
      - name: main
        image: %s
        imagePullPolicy: Never
        command: [bash, -c, %q]
        env:
          - name: CLAIM_UID
            valueFrom:
              fieldRef:
                fieldPath: "metadata.labels['%s']"
        volumeMounts:
          - name: markers
            mountPath: /markers
    volumes:
      - name: markers
        hostPath:
          path: %s/NS
          type: DirectoryOrCreate
`, framework.TestImage, script, protocol.LabelClaimUID, markerRoot)
}

const staging = `volumeStaging:
  podTemplate:
    metadata:
      namespace: NS
    spec:
      containers:
        - name: main
          image: ` + framework.TestImage + `
          imagePullPolicy: Never
          command: [bash, -c, 'mkdir -p /pav/volume && echo hello > /pav/volume/greeting']
`

func section(name, body string) string { return name + ":\n" + indent(body, "  ") }

func TestBoundWithoutPods(t *testing.T) {
	e := newEnv(t)
	p := e.provisioner("nopods", "provisioningModes: [Dynamic]\n"+
		section("volumeCreation", "handle: \"{{ params.prefix }}-{{ pvc.metadata.name }}\"\ncapacity: 1Gi\n")+staging)
	class := e.class(p, nil)
	e.claim("data", class, "100Mi")
	_, pv := e.waitBound("data")
	if pv.Spec.CSI.Driver != p.Name || pv.Spec.CSI.VolumeHandle != "vol-data" || pv.Spec.CSI.VolumeAttributes["prefix"] != "vol" {
		t.Errorf("PV csi: %+v", pv.Spec.CSI)
	}
	if q := pv.Spec.Capacity[corev1.ResourceStorage]; q.Cmp(resource.MustParse("1Gi")) != 0 {
		t.Errorf("capacity %s", q.String())
	}
	if _, err := e.Client.StorageV1().CSIDrivers().Get(e.Ctx, p.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("CSIDriver: %v", err)
	}
}

func TestBoundWithPodsHandleAndCapacityFromFiles(t *testing.T) {
	e := newEnv(t)
	p := e.provisioner("files", "provisioningModes: [Dynamic]\n"+
		section("volumeValidation", pod(`test "$CLAIM_UID" != ""`))+
		section("volumeCreation", pod(`echo "handle-$CLAIM_UID" > /pav/handle && echo 2Gi > /pav/capacity`))+
		section("volumeDeletion", pod(`touch /markers/deleted-$CLAIM_UID`))+staging)
	class := e.class(p, nil)
	pvc := e.claim("data", class, "1Gi")
	_, pv := e.waitBound("data")
	if pv.Spec.CSI.VolumeHandle != "handle-"+string(pvc.UID) {
		t.Errorf("handle %q", pv.Spec.CSI.VolumeHandle)
	}
	if q := pv.Spec.Capacity[corev1.ResourceStorage]; q.Cmp(resource.MustParse("2Gi")) != 0 {
		t.Errorf("capacity %s", q.String())
	}
	e.waitNoPavPods(pvc.UID)
}

func (e *env) pavPods(claimUID types.UID) []corev1.Pod {
	list, err := e.Client.CoreV1().Pods("").List(e.Ctx, metav1.ListOptions{LabelSelector: protocol.LabelClaimUID + "=" + string(claimUID)})
	if err != nil {
		e.t.Fatal(err)
	}
	return list.Items
}

func (e *env) waitNoPavPods(claimUID types.UID) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if len(e.pavPods(claimUID)) == 0 {
			return
		}
		time.Sleep(300 * time.Millisecond)
	}
	e.t.Fatalf("PaV pods of claim %s remain", claimUID)
}

func TestValidationFailureKeepsClaimPending(t *testing.T) {
	e := newEnv(t)
	p := e.provisioner("valfail", "provisioningModes: [Dynamic]\n"+
		section("volumeValidation", pod(`echo "color must be red or green" > /pav/error; exit 1`))+
		section("volumeCreation", "capacity: 1Gi\n")+staging)
	class := e.class(p, nil)
	e.claim("data", class, "1Gi")
	e.waitEvent("data", "ValidationFailed", "color must be red or green")
	pvc, err := e.Client.CoreV1().PersistentVolumeClaims(e.Namespace).Get(e.Ctx, "data", metav1.GetOptions{})
	if err != nil || pvc.Status.Phase != corev1.ClaimPending {
		t.Fatalf("claim: %v, %v", pvc.Status.Phase, err)
	}
	out, _ := e.Kubectl("describe", "pvc", "data")
	if !strings.Contains(out, "color must be red or green") {
		t.Errorf("kubectl describe does not show the message:\n%s", out)
	}
}

// pav describe pvc says why a claim is Pending: its failed creation pod
// and the /pav/error it wrote, and which provisioner it waits for.
func TestDescribeClaimShowsFailedCreationPod(t *testing.T) {
	e := newEnv(t)
	p := e.provisioner("descfail", "provisioningModes: [Dynamic]\n"+
		section("volumeCreation", pod(`echo "quota exceeded for tenant blue" > /pav/error; exit 1`))+staging)
	class := e.class(p, nil)
	pvc := e.claim("data", class, "1Gi")
	e.waitEvent("data", "ProvisioningFailed", "quota exceeded for tenant blue")
	client, err := kubeclient.NewForConfig(e.Config)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := describe.Claim(e.Ctx, client, e.Namespace, "data", &out); err != nil {
		t.Fatal(err)
	}
	t.Logf("pav describe pvc data:\n%s", out.String())
	for _, want := range []string{
		"Status:       Pending",
		"Provisioner:\n  " + p.Name,
		protocol.PodName(protocol.PhaseCreation, string(pvc.UID)),
		"quota exceeded for tenant blue",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("pav describe pvc lacks %q:\n%s", want, out.String())
		}
	}
}

func TestCreationFailureRunsDeletionPod(t *testing.T) {
	e := newEnv(t)
	dir := e.markerDir()
	// The message is on stderr: it reaches the Event only with
	// podLogsInEvents, and where PaV may read logs: in a namespace allowed by
	// label, once ClusterRole pav-pod-logs is bound there (as the README says).
	if _, err := e.Client.RbacV1().RoleBindings(e.Namespace).Create(e.Ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "pav-pod-logs"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "pav-pod-logs"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "controller", Namespace: "pav"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := e.provisioner("crefail", "provisioningModes: [Dynamic]\npodLogsInEvents: true\n"+
		section("volumeCreation", pod(`echo "backend said no" >&2; exit 3`))+
		section("volumeDeletion", pod(`touch /markers/deleted-$CLAIM_UID`))+staging)
	class := e.class(p, nil)
	pvc := e.claim("data", class, "1Gi")
	e.waitEvent("data", "ProvisioningFailed", "backend said no")
	e.waitMarker(filepath.Join(dir, "deleted-"+string(pvc.UID)))
}

func TestClaimDeletionRunsDeletionPodAndRemovesPV(t *testing.T) {
	e := newEnv(t)
	dir := e.markerDir()
	p := e.provisioner("claimdel", "provisioningModes: [Dynamic]\n"+
		section("volumeCreation", pod(`echo 1Gi > /pav/capacity`))+
		section("volumeDeletion", pod(`touch /markers/deleted-$CLAIM_UID`))+staging)
	class := e.class(p, nil)
	pvc := e.claim("data", class, "1Gi")
	_, pv := e.waitBound("data")
	if err := e.Client.CoreV1().PersistentVolumeClaims(e.Namespace).Delete(e.Ctx, "data", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitMarker(filepath.Join(dir, "deleted-"+string(pvc.UID)))
	ctx, cancel := context.WithTimeout(e.Ctx, timeout)
	defer cancel()
	if err := framework.WaitForDeletion(ctx, e.Client.CoreV1().PersistentVolumes(), pv.Name); err != nil {
		t.Fatal(err)
	}
}

func TestRetain(t *testing.T) {
	e := newEnv(t)
	dir := e.markerDir()
	p := e.provisioner("retain", "provisioningModes: [Dynamic]\n"+
		section("volumeCreation", "capacity: 1Gi\n")+
		section("volumeDeletion", pod(`touch /markers/deleted-$CLAIM_UID`))+staging)
	retain := corev1.PersistentVolumeReclaimRetain
	class := e.class(p, func(sc *storagev1.StorageClass) { sc.ReclaimPolicy = &retain })
	pvc := e.claim("data", class, "1Gi")
	_, pv := e.waitBound("data")
	if err := e.Client.CoreV1().PersistentVolumeClaims(e.Namespace).Delete(e.Ctx, "data", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := framework.WaitFor(e.Ctx, e.Client.CoreV1().PersistentVolumes(), pv.Name, timeout,
		func(v *corev1.PersistentVolume) (bool, error) { return v.Status.Phase == corev1.VolumeReleased, nil }); err != nil {
		t.Fatal(err)
	}
	// The controller's decision to keep the volume, announced on the PV.
	e.waitEvent(pv.Name, "VolumeRetained", "reclaim policy is Retain")
	if _, err := os.Stat(filepath.Join(dir, "deleted-"+string(pvc.UID))); err == nil {
		t.Fatal("the deletion pod ran for a retained volume")
	}
	if _, err := e.Client.CoreV1().PersistentVolumes().Get(e.Ctx, pv.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("retained PV: %v", err)
	}
}

func TestWaitForFirstConsumer(t *testing.T) {
	e := newEnv(t)
	p := e.provisioner("wffc", "provisioningModes: [Dynamic]\n"+
		section("volumeCreation", "handle: \"on-{{ selectedNodeName }}\"\ncapacity: 1Gi\n")+staging)
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	class := e.class(p, func(sc *storagev1.StorageClass) { sc.VolumeBindingMode = &wffc })
	e.claim("data", class, "1Gi")
	// That PaV provisions nothing before a node is selected is checked by the
	// integration test of the same name, which can wait for the controller's
	// sync of the claim (Config.Settled); here, the whole flow.
	client := e.CreatePod(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "client"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "c", Image: framework.TestImage, ImagePullPolicy: corev1.PullNever,
				Command: []string{"cat", "/data/greeting"}, VolumeMounts: []corev1.VolumeMount{{Name: "d", MountPath: "/data"}}}},
			Volumes: []corev1.Volume{{Name: "d", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}},
		},
	})
	_, pv := e.waitBound("data")
	node := pv.Annotations[protocol.AnnotationSelectedNode]
	if node == "" || pv.Spec.CSI.VolumeHandle != "on-"+node {
		t.Errorf("selected node %q, handle %q", node, pv.Spec.CSI.VolumeHandle)
	}
	e.WaitForPod(client.Name, timeout, framework.PodSucceeded)
	if logs := e.PodLogs(client.Name, ""); strings.TrimSpace(logs) != "hello" {
		t.Errorf("client read %q", logs)
	}
	// A finished pod still holds its claim (PVC protection): delete it so
	// the claim and the volume can go.
	e.DeletePod(client.Name, timeout)
}

// The leader is killed (SIGKILL, no lease release) while a creation pod runs;
// the standby takes over and finishes with the same pod.
func TestControllerKilledDuringCreation(t *testing.T) {
	e := newEnv(t)
	p := e.provisioner("kill", "provisioningModes: [Dynamic]\n"+
		section("volumeCreation", pod(`sleep 8; echo 1Gi > /pav/capacity`))+staging)
	class := e.class(p, nil)

	// Record every creation pod ever created for the claim. A RetryWatcher,
	// because a plain watch can be closed by the API server mid-test and
	// would then silently miss pods.
	creationPods := metav1.ListOptions{LabelSelector: protocol.LabelPhase + "=" + string(protocol.PhaseCreation)}
	initial, err := e.Client.CoreV1().Pods(e.Namespace).List(e.Ctx, creationPods)
	if err != nil {
		t.Fatal(err)
	}
	w, err := watchtools.NewRetryWatcher(initial.ResourceVersion, &cache.ListWatch{
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = creationPods.LabelSelector
			return e.Client.CoreV1().Pods(e.Namespace).Watch(e.Ctx, o)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	uids := map[types.UID]bool{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if pod, ok := ev.Object.(*corev1.Pod); ok && ev.Type == watch.Added {
				uids[pod.UID] = true
			} else if ev.Type == watch.Error {
				t.Logf("watching creation pods: %v", ev.Object)
			}
		}
	}()

	e.claim("data", class, "1Gi")
	waitPods := func() {
		deadline := time.Now().Add(timeout)
		for time.Now().Before(deadline) {
			list, _ := e.Client.CoreV1().Pods(e.Namespace).List(e.Ctx, metav1.ListOptions{LabelSelector: protocol.LabelPhase + "=" + string(protocol.PhaseCreation)})
			if list != nil && len(list.Items) > 0 {
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Fatal("no creation pod")
	}
	waitPods()
	lease, err := e.Client.CoordinationV1().Leases("pav").Get(e.Ctx, "pav-controller", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	leader := leaderPod(lease)
	if _, err := framework.Kubectl(e.Ctx, "-n", "pav", "delete", "pod", leader, "--grace-period=0", "--force"); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed leader %s", leader)
	e.waitBound("data")
	w.Stop()
	<-done
	if len(uids) != 1 {
		t.Fatalf("%d creation pods were created, want 1", len(uids))
	}
	ctx, cancel := context.WithTimeout(e.Ctx, 3*time.Minute)
	defer cancel()
	if _, err := framework.Kubectl(ctx, "-n", "pav", "rollout", "status", "deployment/controller-agent", "--timeout=170s"); err != nil {
		t.Fatal(err)
	}
}

func leaderPod(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	id := *l.Spec.HolderIdentity
	if i := strings.LastIndex(id, "_"); i > 0 {
		return id[:i]
	}
	return id
}

func TestProvisionerWithVolumesCannotBeDeletedUntilTheyAreGone(t *testing.T) {
	e := newEnv(t)
	p := e.provisioner("held", "provisioningModes: [Dynamic]\n"+section("volumeCreation", "capacity: 1Gi\n")+staging)
	class := e.class(p, nil)
	e.claim("data", class, "1Gi")
	_, pv := e.waitBound("data")
	if err := e.pav.Delete(e.Ctx, p.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// PaV has seen the deletion and decided to wait for the volume: it says so
	// in the Ready condition. The PavProvisioner must still be there after it.
	if _, err := framework.WaitFor(e.Ctx, e.pav, p.Name, timeout, func(cur *v1alpha1.PavProvisioner) (bool, error) {
		c := meta.FindStatusCondition(cur.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Reason == "Terminating" && strings.Contains(c.Message, "1 PersistentVolume(s)"), nil
	}); err != nil {
		t.Fatalf("PavProvisioner with a volume: no Ready=False/Terminating condition waiting for it: %v", err)
	}
	cur, err := e.pav.Get(e.Ctx, p.Name, metav1.GetOptions{})
	if err != nil || cur.DeletionTimestamp == nil {
		t.Fatalf("PavProvisioner with a volume: %v (deleting: %v)", err, cur != nil && cur.DeletionTimestamp != nil)
	}
	if err := e.Client.CoreV1().PersistentVolumeClaims(e.Namespace).Delete(e.Ctx, "data", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(e.Ctx, timeout)
	defer cancel()
	if err := framework.WaitForDeletion(ctx, e.Client.CoreV1().PersistentVolumes(), pv.Name); err != nil {
		t.Fatal(err)
	}
	for ctx.Err() == nil {
		if _, err := e.pav.Get(ctx, p.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			if _, err := e.Client.StorageV1().CSIDrivers().Get(ctx, p.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("CSIDriver %s left behind (%v)", p.Name, err)
			}
			return
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Fatal("PavProvisioner not removed after its volume went")
}

func TestInvalidProvisionerRejected(t *testing.T) {
	e := newEnv(t)
	var p v1alpha1.PavProvisioner
	doc := "metadata:\n  name: invalid-" + e.Namespace[len(e.Namespace)-5:] + "\nspec:\n  provisioningModes: [Dynamic]\n" +
		indent(section("volumeCreation", "capacity: \"{{ 1 +\"\n")+staging, "  ")
	if err := yaml.Unmarshal([]byte(strings.ReplaceAll(doc, "NS", e.Namespace)), &p); err != nil {
		t.Fatal(err)
	}
	_, err := e.pav.Create(e.Ctx, &p, metav1.CreateOptions{})
	if err == nil {
		_ = e.pav.Delete(context.Background(), p.Name, metav1.DeleteOptions{})
		t.Fatal("an invalid PavProvisioner was accepted")
	}
	if !strings.Contains(err.Error(), "spec.volumeCreation.capacity") {
		t.Errorf("rejection does not name the field: %v", err)
	}
}

// Issue 9's forged-results attack: a tenant who may create pods where the
// provisioner's pods run cannot forge a PaV pod (the admission policy
// refuses PaV's labels and result annotations), and a pod that merely took
// the deterministic names of PaV's validation and creation pods is ignored:
// the claim is still provisioned, with the handle the real creation pod
// chose, and the claim's Events say what happened.
func TestForgedPodsIgnored(t *testing.T) {
	e := newEnv(t)
	p := e.provisioner("forged", "provisioningModes: [Dynamic]\n"+
		section("volumeValidation", pod(`true`))+
		section("volumeCreation", pod(`echo "real-$CLAIM_UID" > /pav/handle && echo 1Gi > /pav/capacity`))+staging)
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	class := e.class(p, func(sc *storagev1.StorageClass) { sc.VolumeBindingMode = &wffc })
	pvc := e.claim("data", class, "1Gi")

	// The tenant: may create and change pods in its namespace, nothing else.
	if _, err := e.Client.RbacV1().Roles(e.Namespace).Create(e.Ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "pods"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "create", "update", "patch"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.RbacV1().RoleBindings(e.Namespace).Create(e.Ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "pods"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "pods"},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: "mallory"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(e.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "mallory", Groups: []string{"system:authenticated"}}
	tenant := kubernetes.NewForConfigOrDie(cfg)
	// The API server's authorizer learns of the binding a moment later.
	for deadline := time.Now().Add(timeout); ; time.Sleep(200 * time.Millisecond) {
		review, err := tenant.AuthorizationV1().SelfSubjectAccessReviews().Create(e.Ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: "create", Resource: "pods", Namespace: e.Namespace}}}, metav1.CreateOptions{})
		if err == nil && review.Status.Allowed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tenant never got its role: %v", err)
		}
	}

	squat := func(phase protocol.Phase, labels, annotations map[string]string) error {
		_, err := tenant.CoreV1().Pods(e.Namespace).Create(e.Ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: protocol.PodName(phase, string(pvc.UID)), Labels: labels, Annotations: annotations},
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
				Name: "c", Image: framework.TestImage, ImagePullPolicy: corev1.PullNever, Command: []string{"sleep", "3600"}}}},
		}, metav1.CreateOptions{})
		return err
	}
	err := squat(protocol.PhaseCreation,
		map[string]string{protocol.LabelProvisioner: p.Name, protocol.LabelPhase: string(protocol.PhaseCreation), protocol.LabelClaimUID: string(pvc.UID)},
		map[string]string{protocol.AnnotationResultsCollected: "true", protocol.AnnotationSucceeded: "true", protocol.AnnotationResultHandle: ".", protocol.AnnotationResultCapacity: "1Gi"})
	if err == nil || !strings.Contains(err.Error(), "reserved to PaV") {
		t.Fatalf("a tenant's forged creation pod: %v, want refused by policy pav-reserved-pods", err)
	}
	for _, phase := range []protocol.Phase{protocol.PhaseValidation, protocol.PhaseCreation} {
		if err := squat(phase, nil, nil); err != nil {
			t.Fatalf("a tenant's ordinary pod under the %s pod's name: %v", phase, err)
		}
	}

	client := e.CreatePod(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "client"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "c", Image: framework.TestImage, ImagePullPolicy: corev1.PullNever,
				Command: []string{"cat", "/data/greeting"}, VolumeMounts: []corev1.VolumeMount{{Name: "d", MountPath: "/data"}}}},
			Volumes: []corev1.Volume{{Name: "d", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}},
		},
	})
	_, pv := e.waitBound("data")
	if want := "real-" + string(pvc.UID); pv.Spec.CSI.VolumeHandle != want {
		t.Errorf("handle %q, want %q from PaV's own creation pod", pv.Spec.CSI.VolumeHandle, want)
	}
	e.waitEvent("data", "PodNameTaken", "was not created by PaV")
	e.WaitForPod(client.Name, timeout, framework.PodSucceeded)
	e.DeletePod(client.Name, timeout)
}

// Issue 9's race: a staging pod keeps swapping /pav/volume between a link to
// its own directory and a link to a host directory (the kubelet root, which
// the node plugin sees) while PaV checks and mounts it. Each staging either
// mounts the pod's directory or is refused and retried by kubelet; no client
// may ever see the host directory. (The unit test TestOpenInPavRace runs the
// same attack 50,000 times against the resolver itself.)
func TestStagingPodSwappingVolumeGetsNothingOutside(t *testing.T) {
	e := newEnv(t)
	swapper := `volumeStaging:
  podTemplate:
    metadata:
      namespace: NS
    spec:
      terminationGracePeriodSeconds: 1
      containers:
        - name: main
          image: ` + framework.TestImage + `
          imagePullPolicy: Never
          command:
            - bash
            - -c
            - |
              mkdir -p /pav/real && touch /pav/real/inside-marker
              ln -s real /pav/volume && touch /pav/ready
              while true; do
                ln -sfn /var/lib/kubelet /pav/tmp && mv -fT /pav/tmp /pav/volume
                ln -sfn real /pav/tmp && mv -fT /pav/tmp /pav/volume
              done
`
	p := e.provisioner("swap", "provisioningModes: [Dynamic]\n"+section("volumeCreation", "capacity: 1Gi\n")+swapper)
	class := e.class(p, nil)
	const clients = 6
	for i := 0; i < clients; i++ {
		claim := fmt.Sprintf("data-%d", i)
		e.claim(claim, class, "1Gi")
		e.CreatePod(&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("client-%d", i)},
			Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "c", Image: framework.TestImage, ImagePullPolicy: corev1.PullNever,
					Command:      []string{"sh", "-c", "ls -a /data; test -e /data/inside-marker && ! test -e /data/pods && ! test -e /data/plugins"},
					VolumeMounts: []corev1.VolumeMount{{Name: "d", MountPath: "/data"}}}},
				Volumes: []corev1.Volume{{Name: "d", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}},
			},
		})
	}
	for i := 0; i < clients; i++ {
		name := fmt.Sprintf("client-%d", i)
		// A failed client saw something other than the staging pod's directory.
		e.WaitForPod(name, 3*timeout, framework.PodSucceeded)
		e.DeletePod(name, timeout)
	}
}

// An expansion beyond the provisioner's maxCapacity gets external-resizer's
// status for an infeasible resize and an Event, runs no expansion pod and
// leaves the capacity; lowering the request within bounds then expands.
func TestExpansionBeyondMaxCapacityIsInfeasible(t *testing.T) {
	e := newEnv(t)
	p := e.provisioner("capped", "provisioningModes: [Dynamic]\n"+
		section("volumeValidation", "maxCapacity: 10Gi\n")+
		section("volumeCreation", "capacity: 1Gi\n")+
		section("volumeExpansion", pod(`echo "growing to {{ requestedMinCapacity }} bytes"`))+staging)
	class := e.class(p, func(sc *storagev1.StorageClass) { yes := true; sc.AllowVolumeExpansion = &yes })
	pvc := e.claim("data", class, "1Gi")
	_, pv := e.waitBound("data")

	// Every PaV pod of the claim from now on, in the order the API server
	// created them (a RetryWatcher: a plain watch may be closed mid-test).
	claimPods := protocol.LabelClaimUID + "=" + string(pvc.UID)
	initial, err := e.Client.CoreV1().Pods(e.Namespace).List(e.Ctx, metav1.ListOptions{LabelSelector: claimPods})
	if err != nil {
		t.Fatal(err)
	}
	w, err := watchtools.NewRetryWatcher(initial.ResourceVersion, &cache.ListWatch{
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = claimPods
			return e.Client.CoreV1().Pods(e.Namespace).Watch(e.Ctx, o)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	request := func(size string) {
		t.Helper()
		patch := `{"spec":{"resources":{"requests":{"storage":"` + size + `"}}}}`
		if _, err := e.Client.CoreV1().PersistentVolumeClaims(e.Namespace).Patch(e.Ctx, "data", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	request("5Ti")
	cur, err := framework.WaitFor(e.Ctx, e.Client.CoreV1().PersistentVolumeClaims(e.Namespace), "data", timeout,
		func(c *corev1.PersistentVolumeClaim) (bool, error) {
			return c.Status.AllocatedResourceStatuses[corev1.ResourceStorage] == corev1.PersistentVolumeClaimControllerResizeInfeasible, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	st := cur.Status
	if c := claimCondition(cur, corev1.PersistentVolumeClaimControllerResizeError); st.AllocatedResources.Storage().Cmp(resource.MustParse("5Ti")) != 0 ||
		c == nil || !strings.Contains(c.Message, "above the maximum capacity 10Gi") || claimCondition(cur, corev1.PersistentVolumeClaimResizing) != nil {
		t.Errorf("claim status %+v, want allocatedResources 5Ti and a ControllerResizeError condition saying why", st)
	}
	e.waitEvent("data", "VolumeResizeFailed", "above the maximum capacity 10Gi")
	// The status is set before any expansion pod could be: none exists.
	if pods := e.pavPods(pvc.UID); len(pods) != 0 {
		t.Errorf("%d PaV pods of the claim after its expansion was found infeasible, e.g. %s", len(pods), pods[0].Name)
	}
	if c := st.Capacity.Storage(); c.Cmp(resource.MustParse("1Gi")) != 0 {
		t.Errorf("claim capacity %s, want 1Gi", c)
	}
	if got, err := e.Client.CoreV1().PersistentVolumes().Get(e.Ctx, pv.Name, metav1.GetOptions{}); err != nil || got.Spec.Capacity.Storage().Cmp(resource.MustParse("1Gi")) != 0 {
		t.Errorf("PV capacity %v (%v), want 1Gi", got.Spec.Capacity.Storage(), err)
	}

	// Kubernetes' recovery from a failed expansion: a lower request.
	request("2Gi")
	if _, err := framework.WaitFor(e.Ctx, e.Client.CoreV1().PersistentVolumeClaims(e.Namespace), "data", timeout,
		func(c *corev1.PersistentVolumeClaim) (bool, error) {
			return c.Status.Capacity.Storage().Cmp(resource.MustParse("2Gi")) == 0 && len(c.Status.AllocatedResourceStatuses) == 0 &&
				claimCondition(c, corev1.PersistentVolumeClaimControllerResizeError) == nil && claimCondition(c, corev1.PersistentVolumeClaimResizing) == nil, nil
		}); err != nil {
		t.Fatal(err)
	}
	if got, err := e.Client.CoreV1().PersistentVolumes().Get(e.Ctx, pv.Name, metav1.GetOptions{}); err != nil || got.Spec.Capacity.Storage().Cmp(resource.MustParse("2Gi")) != 0 {
		t.Errorf("PV capacity %v (%v), want 2Gi", got.Spec.Capacity.Storage(), err)
	}
	// The watch delivers pods in creation order: the first PaV pod of the
	// claim since it asked for 5Ti is the expansion pod for 2Gi, so none
	// ever ran for 5Ti.
	deadline := time.After(timeout)
	for {
		select {
		case ev := <-w.ResultChan():
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type != watch.Added {
				continue
			}
			if target := pod.Annotations[protocol.AnnotationExpansionTarget]; target != "2Gi" {
				t.Fatalf("PaV pod %s (phase %s, expansion target %q) before the expansion to 2Gi", pod.Name, pod.Labels[protocol.LabelPhase], target)
			}
			return
		case <-deadline:
			t.Fatal("the watch never showed the expansion pod for 2Gi")
		}
	}
}

func claimCondition(pvc *corev1.PersistentVolumeClaim, t corev1.PersistentVolumeClaimConditionType) *corev1.PersistentVolumeClaimCondition {
	for i := range pvc.Status.Conditions {
		if pvc.Status.Conditions[i].Type == t {
			return &pvc.Status.Conditions[i]
		}
	}
	return nil
}

// A tenant with the "edit" role in its namespace, where a staging pod (root,
// often privileged) serves its claim, cannot exec into that pod (policy
// pav-pod-exec), while a cluster admin can.
func TestTenantCannotExecIntoPavPods(t *testing.T) {
	e := newEnv(t)
	p := e.provisioner("noexec", "provisioningModes: [Dynamic]\n"+section("volumeCreation", "capacity: 1Gi\n")+`volumeStaging:
  podTemplate:
    metadata:
      namespace: NS
    spec:
      terminationGracePeriodSeconds: 1
      containers:
        - name: main
          image: `+framework.TestImage+`
          imagePullPolicy: Never
          command: [bash, -c, 'mkdir -p /pav/volume && touch /pav/ready && exec sleep 3600']
`)
	class := e.class(p, nil)
	e.claim("data", class, "1Gi")
	e.CreatePod(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "client"},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &[]int64{1}[0],
			Containers: []corev1.Container{{Name: "c", Image: framework.TestImage, ImagePullPolicy: corev1.PullNever,
				Command: []string{"sleep", "3600"}, VolumeMounts: []corev1.VolumeMount{{Name: "d", MountPath: "/data"}}}},
			Volumes: []corev1.Volume{{Name: "d", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}},
		},
	})
	e.WaitForPod("client", timeout, framework.PodRunningReady)
	pods, err := e.Client.CoreV1().Pods(e.Namespace).List(e.Ctx, metav1.ListOptions{
		LabelSelector: protocol.LabelPhase + "=" + string(protocol.PhaseStaging) + "," + protocol.LabelProvisioner + "=" + p.Name})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("the client's staging pod: %v, %d pods", err, len(pods.Items))
	}
	staging := pods.Items[0].Name

	// The tenant: ClusterRole edit (pods/exec among it) in its namespace.
	if _, err := e.Client.RbacV1().RoleBindings(e.Namespace).Create(e.Ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "mallory-edit"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: "mallory"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(e.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "mallory", Groups: []string{"system:authenticated"}}
	tenant := kubernetes.NewForConfigOrDie(cfg)
	for deadline := time.Now().Add(timeout); ; time.Sleep(200 * time.Millisecond) {
		review, err := tenant.AuthorizationV1().SelfSubjectAccessReviews().Create(e.Ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: "create", Resource: "pods", Subresource: "exec", Namespace: e.Namespace}}}, metav1.CreateOptions{})
		if err == nil && review.Status.Allowed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tenant never got pods/exec: %v", err)
		}
	}

	out, err := e.Kubectl("exec", "--as=mallory", "--as-group=system:authenticated", staging, "--", "id", "-u")
	if err == nil || !strings.Contains(err.Error(), "only cluster admins may exec into it") {
		t.Errorf("the tenant's exec into staging pod %s: %q, %v; want refused by policy pav-pod-exec", staging, out, err)
	}
	if out, err := e.Kubectl("exec", "--as=mallory", "--as-group=system:authenticated", "client", "--", "true"); err != nil {
		t.Errorf("the tenant's exec into its own pod: %q, %v", out, err)
	}
	if out, err := e.Kubectl("exec", staging, "--", "id", "-u"); err != nil || strings.TrimSpace(out) != "0" {
		t.Errorf("the admin's exec into staging pod %s: %q, %v; want it to run (uid 0)", staging, out, err)
	}
	e.DeletePod("client", timeout)
}
