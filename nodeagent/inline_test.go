package nodeagent

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/albertofaria/pav/crds/v1alpha1"
	pavcsi "github.com/albertofaria/pav/csi"
	"github.com/albertofaria/pav/protocol"
)

const (
	inlineVolumeID  = "csi-0123456789abcdef"
	inlineClientUID = "6b0d1c2e-3f4a-4b5c-8d6e-7f8091a2b3c4"
)

// inlineFixture is a stager fixture whose provisioner serves inline volumes,
// with creation and deletion pods, and a request for a pod's inline volume.
func inlineFixture(t *testing.T) (*stagerFixture, *pavcsi.PublishRequest) {
	f := newStagerFixture(t, nil)
	_ = f.provs.Update(&v1alpha1.PavProvisioner{ObjectMeta: metav1.ObjectMeta{Name: testDriver},
		Spec: v1alpha1.PavProvisionerSpec{ProvisioningModes: []v1alpha1.ProvisioningMode{v1alpha1.Dynamic}, InlineVolumes: true}})
	f.engine.creation, f.engine.deletion = podTemplate("create"), podTemplate("delete")
	f.target = filepath.Join(t.TempDir(), "pods", inlineClientUID, "volumes", "kubernetes.io~csi", "scratch", "mount")
	return f, &pavcsi.PublishRequest{VolumeID: inlineVolumeID, TargetPath: f.target, VolumeContext: map[string]string{
		pavcsi.ContextEphemeral: "true", pavcsi.ContextPodName: "client", pavcsi.ContextPodNamespace: "ns",
		pavcsi.ContextPodUID: inlineClientUID, pavcsi.ContextServiceAccount: "default", "size": "5",
	}}
}

// finish plays kubelet and the collector for a run-to-completion pod: it
// ended with exitCode and its /pav results are on it.
func (f *stagerFixture) finish(pod *corev1.Pod, exitCode int32, results map[string]string) {
	f.t.Helper()
	pod, err := f.kube.CoreV1().Pods(pod.Namespace).Get(context.Background(), pod.Name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodSucceeded
	if exitCode != 0 {
		pod.Status.Phase = corev1.PodFailed
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: pod.Spec.Containers[0].Name,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exitCode}}}}
	pod.Annotations[protocol.AnnotationResultsCollected] = "true"
	for k, v := range results {
		pod.Annotations[k] = v
	}
	if _, err := f.kube.CoreV1().Pods(pod.Namespace).Update(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

// An inline volume: the creation pod runs on the node before the staging
// pod, whose context has the pod's attributes and the creation's, the
// reported capacity and no claim; unpublishing unstages, then runs the
// deletion pod, and leaves no pod behind.
func TestInlineVolumeLifecycle(t *testing.T) {
	f, req := inlineFixture(t)
	ctx := context.Background()
	done := async(func() error { return f.stager.Publish(ctx, testDriver, req) })
	created := f.waitForPod(protocol.PhaseInlineCreation)
	if v, ok := protocol.InlineOf(created); !ok || created.Spec.NodeName != "node1" || v.PodUID != inlineClientUID || v.Attributes["size"] != "5" ||
		!protocol.HasFinalizer(created, protocol.FinalizerResult) {
		t.Errorf("creation pod: node %s, inline record %+v, finalizers %v", created.Spec.NodeName, v, created.Finalizers)
	}
	if n := len(f.pods()); n != 1 {
		t.Fatalf("%d pods before the creation pod finished, want only it", n)
	}
	f.finish(created, 0, map[string]string{protocol.AnnotationResultCapacity: "2Mi", protocol.AnnotationResultVolumeAttributes: `{"endpoint": "e", "size": "6"}`})
	staging := f.waitForPod(protocol.PhaseStaging)
	mkdir(t, hostDir(t, staging, f.root), "volume")
	f.setPhase(staging, corev1.PodSucceeded, 0)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(f.mounter.MountPoints) != 1 {
		t.Fatalf("mounts = %+v", f.mounter.MountPoints)
	}
	sr := f.engine.stagingReqs[0]
	if _, ok := protocol.InlineOf(sr.PV); !ok || sr.PV.Spec.CSI.VolumeHandle != inlineVolumeID ||
		sr.PV.Spec.CSI.VolumeAttributes["size"] != "5" || sr.PV.Spec.CSI.VolumeAttributes["endpoint"] != "e" ||
		sr.PV.Spec.Capacity.Storage().Cmp(resource.MustParse("2Mi")) != 0 {
		t.Errorf("staging saw PV %+v", sr.PV)
	}
	if cr := f.engine.inlineReqs[0]; cr.Inline == nil || cr.SelectedNodeName != "node1" || cr.PVC != nil {
		t.Errorf("creation request %+v", cr)
	}

	done = async(func() error { return f.stager.Unpublish(ctx, testDriver, inlineVolumeID, f.target) })
	f.setPhase(f.waitForPod(protocol.PhaseUnstaging), corev1.PodSucceeded, 0)
	deletion := f.waitForPod(protocol.PhaseInlineDeletion)
	if dr := f.engine.inlineReqs[len(f.engine.inlineReqs)-1]; dr.Handle != inlineVolumeID || dr.PV == nil || dr.PV.Spec.CSI.VolumeAttributes["endpoint"] != "e" {
		t.Errorf("deletion request %+v", dr)
	}
	f.finish(deletion, 0, nil)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if pods := f.pods(); len(pods) != 0 {
		t.Errorf("%d pods left, the first %s", len(pods), pods[0].Name)
	}
	if len(f.mounter.MountPoints) != 0 {
		t.Errorf("mounts left: %+v", f.mounter.MountPoints)
	}
}

// A failed creation is reverted by the deletion pod, and kubelet gets the
// creation pod's own message; the next publish starts afresh.
func TestInlineCreationFailureIsReverted(t *testing.T) {
	f, req := inlineFixture(t)
	ctx := context.Background()
	done := async(func() error { return f.stager.Publish(ctx, testDriver, req) })
	f.finish(f.waitForPod(protocol.PhaseInlineCreation), 1, map[string]string{protocol.AnnotationResultError: "attribute size must be at least 10"})
	f.finish(f.waitForPod(protocol.PhaseInlineDeletion), 0, nil)
	err := <-done
	if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "attribute size must be at least 10") {
		t.Fatalf("publish: %v, want the creation pod's message", err)
	}
	if pods := f.pods(); len(pods) != 0 {
		t.Errorf("%d pods left, the first %s", len(pods), pods[0].Name)
	}
}

// Inline volumes are opt-in: a provisioner without spec.inlineVolumes
// refuses them, with a message that says so, and runs no pod.
func TestInlineVolumeNeedsOptIn(t *testing.T) {
	f, req := inlineFixture(t)
	_ = f.provs.Update(&v1alpha1.PavProvisioner{ObjectMeta: metav1.ObjectMeta{Name: testDriver},
		Spec: v1alpha1.PavProvisionerSpec{ProvisioningModes: []v1alpha1.ProvisioningMode{v1alpha1.Dynamic}}})
	err := f.stager.Publish(context.Background(), testDriver, req)
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "spec.inlineVolumes") {
		t.Fatalf("publish: %v", err)
	}
	if n := len(f.pods()); n != 0 {
		t.Errorf("%d pods", n)
	}
}

// An inline volume whose publish never completed (kubelet gave up, or the
// node plugin restarted, and the pod went): kubelet will not unpublish it,
// so the sweep deletes it once its pod has been gone for two sweeps.
func TestSweepDeletesAbandonedInlineVolume(t *testing.T) {
	f, req := inlineFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	client := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "client", Namespace: "ns", UID: inlineClientUID}, Spec: corev1.PodSpec{NodeName: "node1"}}
	if _, err := f.kube.CoreV1().Pods("ns").Create(ctx, client, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	done := async(func() error { return f.stager.Publish(ctx, testDriver, req) })
	created := f.waitForPod(protocol.PhaseInlineCreation)
	cancel() // kubelet's call ends before the creation pod does
	if err := <-done; err == nil {
		t.Fatal("publish succeeded before the creation pod finished")
	}
	f.finish(created, 0, nil)

	ctx = context.Background()
	if gone := f.stager.sweepAbandoned(ctx, nil); len(gone) != 0 {
		t.Fatalf("sweep with the pod running: gone = %v", gone)
	}
	if err := f.kube.CoreV1().Pods("ns").Delete(ctx, client.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	gone := f.stager.sweepAbandoned(ctx, nil)
	if len(gone) != 1 || len(f.pods()) != 1 {
		t.Fatalf("first sweep after the pod went: gone %v, %d pods", gone, len(f.pods()))
	}
	f.stager.sweepAbandoned(ctx, gone)
	f.finish(f.waitForPod(protocol.PhaseInlineDeletion), 0, nil)
	f.stager.abandoned.wg.Wait()
	if pods := f.pods(); len(pods) != 0 {
		t.Errorf("%d pods left, the first %s", len(pods), pods[0].Name)
	}
}
