//go:build e2e

// Package lifecycle tests PaV's own lifecycle on the local cluster: rolling
// restarts of the controller and the node plugin fail no admission request
// and disturb no volume in use, and many PavProvisioners created or deleted
// at once are all registered with, and deregistered from, kubelet (CSINode).
//
// These tests restart PaV's own workloads: they wait for each rollout to
// complete, so the next test finds PaV as it was.
package lifecycle

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/yaml"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/test/e2e/framework"
)

const timeout = 3 * time.Minute

// provisioner is a PavProvisioner whose volumes are directories a
// long-running staging pod fills and then keeps (/pav/ready).
func provisioner(name string) *v1alpha1.PavProvisioner {
	var p v1alpha1.PavProvisioner
	doc := `
metadata:
  name: ` + name + `
spec:
  provisioningModes: [Dynamic]
  volumeCreation:
    capacity: "{{ requestedMinCapacity }}"
  volumeStaging:
    podTemplate:
      spec:
        containers:
          - name: stage
            image: ` + framework.TestImage + `
            imagePullPolicy: IfNotPresent
            command: [/bin/sh, -c, 'mkdir -p /pav/volume && echo token > /pav/volume/data && touch /pav/ready && exec sleep infinity']
`
	if err := yaml.Unmarshal([]byte(doc), &p); err != nil {
		panic(err)
	}
	return &p
}

// Rolling restarts of the controller (the admission webhook) and then of the
// node plugin fail no admission request, disturb no volume in use, and cause
// no warning Event.
func TestRollingRestartsFailNothing(t *testing.T) {
	f := framework.New(t)
	pav, err := framework.PavProvisioners(f.Config)
	if err != nil {
		t.Fatal(err)
	}
	name := "e2e-life-" + f.Namespace[len(f.Namespace)-5:]
	if _, err := pav.Create(f.Ctx, provisioner(name), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pav.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: name}
	if _, err := f.Client.StorageV1().StorageClasses().Create(f.Ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = f.Client.StorageV1().StorageClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &name,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}},
		},
	}
	if _, err := f.Client.CoreV1().PersistentVolumeClaims(f.Namespace).Create(f.Ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The client reads its volume five times a second and stops at the first failure.
	f.CreatePod(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "reader"},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{
				Name: "reader", Image: framework.TestImage, ImagePullPolicy: corev1.PullIfNotPresent,
				Command:      []string{"/bin/sh", "-c", `while grep -qx token /data/data; do sleep 0.2; done; echo "read failed"; exit 1`},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}},
		},
	})
	f.WaitForPod("reader", timeout, framework.PodRunningReady)
	since := time.Now()

	// Admission requests all along: server-side dry-run creates go through
	// the webhook like real ones, and leave nothing behind.
	var (
		mu       sync.Mutex
		attempts int
		failures []string
	)
	stop := make(chan struct{})
	var loops sync.WaitGroup
	for range 4 { // four clients, each every 200 ms
		loops.Add(1)
		go func() {
			defer loops.Done()
			tick := time.NewTicker(200 * time.Millisecond)
			defer tick.Stop()
			for {
				p := provisioner("e2e-life-dry-run")
				_, err := pav.Create(f.Ctx, p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
				mu.Lock()
				attempts++
				if err != nil {
					failures = append(failures, fmt.Sprintf("%s: %v", time.Now().Format(time.StampMilli), err))
				}
				mu.Unlock()
				select {
				case <-stop:
					return
				case <-tick.C:
				}
			}
		}()
	}

	for _, workload := range []string{"deployment/controller-agent", "daemonset/node-agent"} {
		if out, err := f.Kubectl("-n", "pav", "rollout", "restart", workload); err != nil {
			t.Fatalf("rollout restart %s: %v\n%s", workload, err, out)
		}
		if out, err := f.Kubectl("-n", "pav", "rollout", "status", workload, "--timeout=3m"); err != nil {
			t.Fatalf("rollout status %s: %v\n%s", workload, err, out)
		}
	}
	close(stop)
	loops.Wait()

	mu.Lock()
	t.Logf("%d admission requests during the restarts", attempts)
	if len(failures) > 0 {
		t.Errorf("%d of %d admission requests failed during rolling restarts:\n%s", len(failures), attempts, strings.Join(failures, "\n"))
	}
	mu.Unlock()
	pod, err := f.Client.CoreV1().Pods(f.Namespace).Get(f.Ctx, "reader", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Status.Phase != corev1.PodRunning {
		t.Errorf("the client pod is %s after the restarts: %s", pod.Status.Phase, f.PodLogs("reader", ""))
	}
	events, err := f.Client.CoreV1().Events(f.Namespace).List(f.Ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("type", corev1.EventTypeWarning).String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.LastTimestamp.Time.After(since) || e.EventTime.Time.After(since) {
			t.Errorf("warning Event during the restarts: %s %s: %s", e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
}

// Twenty PavProvisioners created at once all appear in the node's CSINode,
// and deleted at once, all disappear from it (kubelet deregisters drivers
// concurrently and gives up on conflicts; PaV paces and repairs).
func TestManyProvisionersRegisterAndDeregister(t *testing.T) {
	f := framework.New(t)
	pav, err := framework.PavProvisioners(f.Config)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := f.Client.CoreV1().Nodes().List(f.Ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) == 0 {
		t.Fatalf("listing nodes: %v", err)
	}
	var names []string
	for i := range 20 {
		names = append(names, fmt.Sprintf("e2e-many-%s-%02d", f.Namespace[len(f.Namespace)-5:], i))
	}
	t.Cleanup(func() {
		for _, n := range names {
			_ = pav.Delete(context.Background(), n, metav1.DeleteOptions{})
		}
	})
	var wg sync.WaitGroup
	errs := make(chan error, len(names))
	for _, n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := pav.Create(f.Ctx, provisioner(n), metav1.CreateOptions{}); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("creating PavProvisioners: %v", err)
	}

	listed := func(c *storagev1.CSINode) int {
		n := 0
		for _, d := range c.Spec.Drivers {
			for _, want := range names {
				if d.Name == want {
					n++
				}
			}
		}
		return n
	}
	for _, node := range nodes.Items {
		_, err := framework.WaitFor(f.Ctx, f.Client.StorageV1().CSINodes(), node.Name, timeout,
			func(c *storagev1.CSINode) (bool, error) { return listed(c) == len(names), nil })
		if err != nil {
			t.Fatalf("CSINode %s does not list all %d drivers: %v", node.Name, len(names), err)
		}
	}

	for _, n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = pav.Delete(f.Ctx, n, metav1.DeleteOptions{})
		}()
	}
	wg.Wait()
	for _, node := range nodes.Items {
		_, err := framework.WaitFor(f.Ctx, f.Client.StorageV1().CSINodes(), node.Name, timeout,
			func(c *storagev1.CSINode) (bool, error) { return listed(c) == 0, nil })
		if err != nil {
			t.Fatalf("CSINode %s still lists deleted drivers: %v", node.Name, err)
		}
	}
}
