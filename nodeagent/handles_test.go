package nodeagent

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/albertofaria/pav/crds/v1alpha1"
	pavcsi "github.com/albertofaria/pav/csi"
	"github.com/albertofaria/pav/internal/testwait"
	"github.com/albertofaria/pav/kubelet"
	"github.com/albertofaria/pav/protocol"
)

// sharedStaged is a fixture whose provisioner stages once per node, with
// the fixture's PV staged at stagingPath.
func sharedStaged(t *testing.T) (f *stagerFixture, stagingPath string) {
	t.Helper()
	f = newStagerFixture(t, nil, v1alpha1.Dynamic, v1alpha1.Static)
	obj, _, _ := f.provs.GetByKey(testDriver)
	p := obj.(*v1alpha1.PavProvisioner).DeepCopy()
	p.Spec.VolumeStaging = &v1alpha1.VolumeStaging{Shared: true}
	if err := f.provs.Update(p); err != nil {
		t.Fatal(err)
	}
	stagingPath = filepath.Join(t.TempDir(), "csi", testDriver, "globalmount")
	done := async(func() error {
		return f.stager.Stage(context.Background(), testDriver, &pavcsi.PublishRequest{VolumeID: testHandle, TargetPath: stagingPath})
	})
	pod := f.waitForPod(protocol.PhaseStaging)
	mkdir(t, hostDir(t, pod, f.root), "volume")
	f.setPhase(pod, corev1.PodSucceeded, 0)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return f, stagingPath
}

// addStaticTwin adds what an admin might: a static PV with the staged PV's
// handle, bound to another claim, and a client pod of that claim.
func addStaticTwin(t *testing.T, f *stagerFixture) {
	t.Helper()
	ctx := context.Background()
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "claim2", Namespace: "ns", UID: "claim2-uid"}}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "static-twin", UID: "twin-uid"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")},
			ClaimRef:               &corev1.ObjectReference{Namespace: "ns", Name: "claim2", UID: "claim2-uid"},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: testDriver, VolumeHandle: testHandle}},
		},
	}
	for _, pod := range []*corev1.Pod{clientOf("client1", "claim"), clientOf("client2", "claim2")} {
		if _, err := f.kube.CoreV1().Pods("ns").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.kube.CoreV1().PersistentVolumeClaims("ns").Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.kube.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitForPVs(2)
}

func clientOf(name, claim string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}},
	}
}

// waitForPVs waits until the stager's PV cache holds n PVs with the handle.
func (f *stagerFixture) waitForPVs(n int) {
	f.t.Helper()
	for deadline := time.Now().Add(testwait.Timeout); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if objs, _ := f.stager.pvs.ByIndex(pvsByHandle, testDriver+"/"+testHandle); len(objs) == n {
			return
		}
	}
	f.t.Fatalf("the PV cache never held %d PVs with handle %q", n, testHandle)
}

func publishStagedFor(f *stagerFixture, stagingPath, client string) error {
	return f.stager.Publish(context.Background(), testDriver, &pavcsi.PublishRequest{
		VolumeID: testHandle, StagingPath: stagingPath,
		TargetPath:    filepath.Join(f.t.(*testing.T).TempDir(), "pods", "uid-"+client, "mount"),
		VolumeContext: map[string]string{pavcsi.ContextPodName: client, pavcsi.ContextPodNamespace: "ns"},
	})
}

// A second PV with a staged PV's handle (a static PV an admin made) shares
// kubelet's staging path, and so the staging ID: its client is refused the
// first claim's staging, while the first claim's clients still get it.
func TestSharedStagingServesOnlyItsPV(t *testing.T) {
	f, stagingPath := sharedStaged(t)
	addStaticTwin(t, f)

	err := publishStagedFor(f, stagingPath, "client2")
	if status.Code(err) != codes.FailedPrecondition ||
		!strings.Contains(err.Error(), `PersistentVolume static-twin (claim ns/claim2) has volume handle "handle-1", which this node already stages for PersistentVolume pvc-claim-uid (claim ns/claim`) {
		t.Fatalf("publish for the second claim: %v", err)
	}
	if n := len(f.mounter.MountPoints); n != 0 {
		t.Fatalf("mounts after the refused publish: %+v", f.mounter.MountPoints)
	}
	if err := publishStagedFor(f, stagingPath, "client1"); err != nil {
		t.Fatalf("publish for the first claim: %v", err)
	}
	if n := len(f.mounter.MountPoints); n != 1 {
		t.Errorf("mounts: %+v", f.mounter.MountPoints)
	}
}

// A NodeStageVolume for another PV with the handle (the first one gone,
// its staging not yet unstaged) does not join the staging either.
func TestSharedStagingIsNotJoinedByAnotherPV(t *testing.T) {
	f, stagingPath := sharedStaged(t)
	addStaticTwin(t, f)
	if err := f.kube.CoreV1().PersistentVolumes().Delete(context.Background(), "pvc-claim-uid", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitForPVs(1)
	err := f.stager.Stage(context.Background(), testDriver, &pavcsi.PublishRequest{VolumeID: testHandle, TargetPath: stagingPath})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "already stages for PersistentVolume pvc-claim-uid") {
		t.Fatalf("stage of the second PV: %v", err)
	}
	var pav []string
	for _, pod := range f.pods() {
		if pod.Labels[protocol.LabelPhase] != "" {
			pav = append(pav, pod.Name)
		}
	}
	if len(pav) != 1 {
		t.Errorf("PaV pods %v, want the first staging pod only", pav)
	}
}

// A static PV's handle that a shell would expand is refused before any pod
// runs for it, with the character named.
func TestPublishRefusesAnUnsafeHandle(t *testing.T) {
	const bad = "vol;reboot"
	f := newStagerFixture(t, func(pv *corev1.PersistentVolume) {
		pv.Annotations = nil
		pv.Spec.CSI.VolumeHandle = bad
	}, v1alpha1.Static)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := f.stager.Publish(ctx, testDriver, &pavcsi.PublishRequest{VolumeID: bad, TargetPath: f.target})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `contains ';'`) {
		t.Fatalf("err = %v", err)
	}
	if n := len(f.pods()); n != 0 {
		t.Errorf("%d pods created", n)
	}
}

// A ReadWriteOncePod volume of a shared staging is published at one of
// kubelet's target paths at a time: a second pod's publish on the node
// (one bound by spec.nodeName skips the scheduler) is refused until the
// first is unpublished.
func TestSharedStagingSingleWriter(t *testing.T) {
	f, stagingPath := sharedStaged(t)
	kubeletDir := kubelet.Dir(t.TempDir())
	publishRWOP := func(uid types.UID) (string, error) {
		target := kubeletDir.PublishPath(uid, "pvc-claim-uid")
		return target, f.stager.Publish(context.Background(), testDriver, &pavcsi.PublishRequest{
			VolumeID: testHandle, StagingPath: stagingPath, TargetPath: target, SingleWriter: true,
			VolumeContext: map[string]string{pavcsi.ContextPodName: "client1", pavcsi.ContextPodNamespace: "ns"},
		})
	}
	first, err := publishRWOP("0f6f8a3e-7c1b-4d0a-9a51-2b8d3c4e5f60")
	if err != nil {
		t.Fatalf("first publish: %v", err)
	}
	if _, err := publishRWOP("0f6f8a3e-7c1b-4d0a-9a51-2b8d3c4e5f60"); err != nil {
		t.Fatalf("the first publish again (kubelet retries): %v", err)
	}
	_, err = publishRWOP("0f6f8a3e-7c1b-4d0a-9a51-2b8d3c4e5f61")
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "is ReadWriteOncePod and already published on this node at "+first) {
		t.Fatalf("second pod's publish: %v", err)
	}
	if err := f.stager.Unpublish(context.Background(), testDriver, testHandle, first); err != nil {
		t.Fatal(err)
	}
	if _, err := publishRWOP("0f6f8a3e-7c1b-4d0a-9a51-2b8d3c4e5f61"); err != nil {
		t.Fatalf("second pod's publish after the first was unpublished: %v", err)
	}
}
