package nodeagent

import (
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/albertofaria/pav/crds/v1alpha1"
	pavcsi "github.com/albertofaria/pav/csi"
	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/templating"
)

const (
	inlineVolumeID  = "csi-0123456789abcdef"
	inlineClientUID = "6b0d1c2e-3f4a-4b5c-8d6e-7f8091a2b3c4"
)

// inlineFixture is a stager fixture whose provisioner serves inline volumes,
// with creation and deletion pods, and a request for a pod's inline volume.
func inlineFixture(t *testing.T) (*stagerFixture, *pavcsi.PublishRequest) {
	f := newStagerFixture(t, nil)
	f.inlinePolicy(sizePolicy())
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
// pod, whose context has the pod's attributes and the creation's (which
// win), the
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
		sr.PV.Spec.CSI.VolumeAttributes["size"] != "6" || sr.PV.Spec.CSI.VolumeAttributes["mode"] != "safe" || sr.PV.Spec.CSI.VolumeAttributes["endpoint"] != "e" ||
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
	f.cachedByName(created) // the sweep looks at the node plugin's pod cache

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

// inlinePolicy is a provisioner that serves inline volumes with policy.
func (f *stagerFixture) inlinePolicy(policy *v1alpha1.InlineVolumePolicy) {
	_ = f.provs.Update(&v1alpha1.PavProvisioner{ObjectMeta: metav1.ObjectMeta{Name: testDriver},
		Spec: v1alpha1.PavProvisionerSpec{ProvisioningModes: []v1alpha1.ProvisioningMode{v1alpha1.Dynamic}, InlineVolumes: true, InlineVolumePolicy: policy}})
}

func sizePolicy() *v1alpha1.InlineVolumePolicy {
	maxLen := int32(3)
	return &v1alpha1.InlineVolumePolicy{Attributes: []v1alpha1.InlineVolumeAttribute{
		{Name: "size", Pattern: "[0-9]+", MaxLength: &maxLen},
		{Name: "mode", Enum: []string{"fast", "safe"}, Default: ptr.To("safe")},
	}}
}

// A pod's attributes are a tenant's: an attribute the provisioner does not
// declare, or a value outside its declaration, fails the mount with a
// message that names it, before any template is evaluated or pod created.
func TestInlineAttributesRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy *v1alpha1.InlineVolumePolicy
		attrs  map[string]string
		want   string
	}{
		{"no policy: no attribute", nil, map[string]string{"size": "5"}, `attribute "size" is not one the provisioner accepts (it declares none`},
		{"undeclared", sizePolicy(), map[string]string{"size": "5", "namespace": "kube-system"}, `attribute "namespace" is not one the provisioner accepts (declared: "size", "mode")`},
		{"pattern", sizePolicy(), map[string]string{"size": "x$(id)"}, `attribute "size": it is 6 bytes long; at most 3`},
		{"pattern, short", sizePolicy(), map[string]string{"size": "1;2"}, `attribute "size": it must match the pattern "[0-9]+"`},
		{"enum", sizePolicy(), map[string]string{"mode": "wild"}, `attribute "mode": it must be one of "fast", "safe"`},
		{"required", &v1alpha1.InlineVolumePolicy{Attributes: []v1alpha1.InlineVolumeAttribute{{Name: "size", Required: true}}}, map[string]string{}, `attribute "size" is required`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, req := inlineFixture(t)
			f.inlinePolicy(tc.policy)
			delete(req.VolumeContext, "size")
			for k, v := range tc.attrs {
				req.VolumeContext[k] = v
			}
			err := f.stager.Publish(context.Background(), testDriver, req)
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("publish: %v, want InvalidArgument with %q", err, tc.want)
			}
			if n := len(f.pods()); n != 0 || len(f.engine.inlineReqs) != 0 {
				t.Errorf("%d pods, %d evaluations", n, len(f.engine.inlineReqs))
			}
		})
	}
}

// Declared attributes that fit become params, with the defaults of those
// not given; the creation pod's record holds them as admitted.
func TestInlineAttributesAdmittedWithDefaults(t *testing.T) {
	f, req := inlineFixture(t)
	f.inlinePolicy(sizePolicy())
	ctx := context.Background()
	go func() { _ = f.stager.Publish(ctx, testDriver, req) }()
	created := f.waitForPod(protocol.PhaseInlineCreation)
	want := map[string]string{"size": "5", "mode": "safe"}
	if v, _ := protocol.InlineOf(created); !reflect.DeepEqual(v.Attributes, want) {
		t.Errorf("recorded attributes %v, want %v", v.Attributes, want)
	}
	if cr := f.engine.inlineReqs[0]; !reflect.DeepEqual(cr.Inline.Attributes, want) {
		t.Errorf("creation saw params %v, want %v", cr.Inline.Attributes, want)
	}
}

// What a creation makes follows the rule of a claim's: the evaluated
// volumeCreation.capacity before /pav/capacity, the creation pod's
// attributes before the pod's own (a tenant cannot replace what the
// creation returned, e.g. an endpoint).
func TestInlineCreationResultsWin(t *testing.T) {
	f, req := inlineFixture(t)
	f.inlinePolicy(sizePolicy())
	f.engine.capacity = ptr.To(resource.MustParse("1Mi"))
	done := async(func() error { return f.stager.Publish(context.Background(), testDriver, req) })
	f.finish(f.waitForPod(protocol.PhaseInlineCreation), 0, map[string]string{
		protocol.AnnotationResultCapacity: "5Gi", protocol.AnnotationResultVolumeAttributes: `{"size": "9", "endpoint": "e"}`})
	staging := f.waitForPod(protocol.PhaseStaging)
	mkdir(t, hostDir(t, staging, f.root), "volume")
	f.setPhase(staging, corev1.PodSucceeded, 0)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	pv := f.engine.stagingReqs[0].PV
	if got := pv.Spec.Capacity.Storage(); got.Cmp(resource.MustParse("1Mi")) != 0 {
		t.Errorf("capacity %s, want volumeCreation.capacity's 1Mi before /pav/capacity's 5Gi", got)
	}
	if a := pv.Spec.CSI.VolumeAttributes; a["size"] != "9" || a["endpoint"] != "e" || a["mode"] != "safe" {
		t.Errorf("attributes %v, want the creation's size and endpoint, the default mode", a)
	}
}

// The capacity a creation makes is checked as a claim's volume's is:
// positive (a 0-byte volume fails), and within minCapacity and maxCapacity.
// A failed check reverts the creation.
func TestInlineCapacityChecked(t *testing.T) {
	for _, tc := range []struct {
		name, capacity, want string
	}{
		{"zero", "0", "capacity 0 is not positive"},
		{"above maxCapacity", "2Gi", "above the maximum capacity 1Gi"},
		{"below minCapacity", "1Ki", "below the minimum capacity 1Mi"},
		{"none", "", "did not write /pav/capacity"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, req := inlineFixture(t)
			f.inlinePolicy(sizePolicy())
			f.engine.validation = &templating.ValidationConfig{VolumeModes: []corev1.PersistentVolumeMode{corev1.PersistentVolumeFilesystem},
				MinCapacity: ptr.To(resource.MustParse("1Mi")), MaxCapacity: ptr.To(resource.MustParse("1Gi"))}
			done := async(func() error { return f.stager.Publish(context.Background(), testDriver, req) })
			results := map[string]string{}
			if tc.capacity != "" {
				results[protocol.AnnotationResultCapacity] = tc.capacity
			}
			f.finish(f.waitForPod(protocol.PhaseInlineCreation), 0, results)
			f.finish(f.waitForPod(protocol.PhaseInlineDeletion), 0, nil)
			if err := <-done; err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("publish: %v, want %q", err, tc.want)
			}
			if pods := f.pods(); len(pods) != 0 {
				t.Errorf("%d pods left, the first %s", len(pods), pods[0].Name)
			}
		})
	}
}

// volumeValidation's volumeModes applies: a provisioner of Block volumes
// only serves no inline volume.
func TestInlineValidationVolumeMode(t *testing.T) {
	f, req := inlineFixture(t)
	f.inlinePolicy(sizePolicy())
	f.engine.validation = &templating.ValidationConfig{VolumeModes: []corev1.PersistentVolumeMode{corev1.PersistentVolumeBlock}}
	err := f.stager.Publish(context.Background(), testDriver, req)
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "volume mode Filesystem is not supported") {
		t.Fatalf("publish: %v", err)
	}
	if n := len(f.pods()); n != 0 {
		t.Errorf("%d pods", n)
	}
}

// namespaceSelector: only the pods of matching namespaces get inline
// volumes.
func TestInlineNamespaceSelector(t *testing.T) {
	for _, tc := range []struct {
		name   string
		labels map[string]string
		ok     bool
	}{{"matching", map[string]string{"inline": "yes"}, true}, {"not matching", map[string]string{"inline": "no"}, false}} {
		t.Run(tc.name, func(t *testing.T) {
			f, req := inlineFixture(t)
			pol := sizePolicy()
			pol.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"inline": "yes"}}
			f.inlinePolicy(pol)
			if _, err := f.kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Labels: tc.labels}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := async(func() error { return f.stager.Publish(ctx, testDriver, req) })
			if tc.ok {
				f.waitForPod(protocol.PhaseInlineCreation)
				return
			}
			if err := <-done; status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "namespaceSelector") {
				t.Fatalf("publish: %v", err)
			}
			if n := len(f.pods()); n != 0 {
				t.Errorf("%d pods", n)
			}
		})
	}
}

// A limit refuses the mount with a message on the pod.
func TestInlineLimitRefusesTheMount(t *testing.T) {
	f, req := inlineFixture(t)
	pol := sizePolicy()
	pol.MaxVolumesPerPod = ptr.To(int32(1))
	f.inlinePolicy(pol)
	client := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "client", Namespace: "ns", UID: inlineClientUID}, Spec: corev1.PodSpec{Volumes: []corev1.Volume{
		{Name: "a", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: testDriver}}},
		{Name: "b", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: testDriver}}},
	}}}
	if _, err := f.kube.CoreV1().Pods("ns").Create(context.Background(), client, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := f.stager.Publish(context.Background(), testDriver, req)
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "maxVolumesPerPod") {
		t.Fatalf("publish: %v", err)
	}
	if n := len(f.pods()); n != 1 {
		t.Errorf("%d pods, want the client only", n)
	}
}

// Unpublishing a claim's volume whose handle is an inline volume's ID of
// another provisioner leaves that inline volume alone: records are matched
// by provisioner too.
func TestDeleteInlineMatchesTheProvisioner(t *testing.T) {
	f, req := inlineFixture(t)
	f.inlinePolicy(sizePolicy())
	ctx, cancel := context.WithCancel(context.Background())
	done := async(func() error { return f.stager.Publish(ctx, testDriver, req) })
	created := f.waitForPod(protocol.PhaseInlineCreation)
	cancel()
	<-done
	f.finish(created, 0, nil)
	_ = f.provs.Add(&v1alpha1.PavProvisioner{ObjectMeta: metav1.ObjectMeta{Name: "other"},
		Spec: v1alpha1.PavProvisionerSpec{ProvisioningModes: []v1alpha1.ProvisioningMode{v1alpha1.Dynamic}}})
	if err := f.stager.inline.Delete(context.Background(), "other", inlineVolumeID); err != nil {
		t.Fatal(err)
	}
	if pods := f.pods(); len(pods) != 1 || pods[0].DeletionTimestamp != nil || len(f.engine.inlineReqs) != 1 {
		t.Errorf("pods %d, evaluations %d: another provisioner's unpublish touched the inline volume", len(pods), len(f.engine.inlineReqs))
	}
}
