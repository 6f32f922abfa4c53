package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/templating"
)

// firstVolume is a PV of the test provisioner that already has resultHandle,
// bound to another claim: the volume a duplicate handle would reach.
func firstVolume() *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pvc-first-uid", UID: "first-pv-uid"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			ClaimRef:               &corev1.ObjectReference{Namespace: "other", Name: "first", UID: "first-uid"},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: testProvisioner, VolumeHandle: resultHandle}},
		},
	}
}

func (h *harness) volumeNames() []string {
	pvs, err := h.kube.CoreV1().PersistentVolumes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	var names []string
	for _, pv := range pvs.Items {
		names = append(names, pv.Name)
	}
	return names
}

// checkRefusedWithoutRevert: the claim got no PV, the first volume is
// untouched, no deletion pod was evaluated or created, and an Event says why.
func checkRefusedWithoutRevert(t *testing.T, h *harness, rec *requestRecorder) {
	t.Helper()
	if names := h.volumeNames(); len(names) != 1 || names[0] != "pvc-first-uid" {
		t.Errorf("PVs %v, want only the first volume", names)
	}
	if len(rec.requests) != 0 {
		t.Errorf("a deletion was evaluated with handle %q", rec.requests[0].Handle)
	}
	for _, a := range h.actions() {
		if isPodCreate(a, protocol.PhaseDeletion) {
			t.Errorf("a deletion pod was created:\n%s", h.describe())
		}
	}
	events := strings.Join(drain(h.events), "\n")
	if !strings.Contains(events, "Warning "+reasonProvisioningFailed) ||
		!strings.Contains(events, `volume handle "vol-1" is already the handle of PersistentVolume pvc-first-uid (claim other/first)`) ||
		!strings.Contains(events, "no deletion pod runs") {
		t.Errorf("events:\n%s", events)
	}
}

// A creation pod's /pav/handle that is another PV's handle gets no PV, and
// the creation is not reverted: the deletion pod, given that handle, would
// delete the first claim's volume. The attempt's pods go; the claim is
// retried later.
func TestDuplicateHandleFromCreationPodIsRefusedWithoutRevert(t *testing.T) {
	h := newHarness(t, append(testObjects(), firstVolume())...)
	rec := &requestRecorder{}
	h.engine = rec
	h.restart()
	for i := 0; i < 6; i++ { // validation, creation, refused; then again
		_ = h.step()
	}
	checkRefusedWithoutRevert(t, h, rec)
	if got := h.podsCreated(protocol.PhaseCreation); len(got) < 2 {
		t.Errorf("%d creation pods, want the claim retried", len(got))
	}
}

// A creation pod that failed after writing another PV's handle is not
// reverted either.
func TestFailedCreationWithAnotherVolumesHandleIsNotReverted(t *testing.T) {
	h := newHarness(t, append(testObjects(), firstVolume())...)
	rec := &requestRecorder{}
	h.engine = rec
	h.restart()
	for i := 0; i < 2; i++ { // validation, then the creation pod
		if err := h.step(); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	cre, err := h.kube.CoreV1().Pods("pav-pods").Get(ctx, protocol.PodName(protocol.PhaseCreation, "claim-uid"), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("no creation pod: %v\n%s", err, h.describe())
	}
	cre.Status.Phase = corev1.PodFailed
	cre.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, FinishedAt: metav1.NewTime(h.now)}}}}
	cre.Annotations[protocol.AnnotationResultsCollected] = "true"
	cre.Annotations[protocol.AnnotationResultHandle] = resultHandle + "\n"
	if _, err := h.kube.CoreV1().Pods(cre.Namespace).Update(ctx, cre, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.refresh()
	_ = h.c.syncClaim(ctx, testClaimKey)
	checkRefusedWithoutRevert(t, h, rec)
	if _, err := h.kube.CoreV1().Pods("pav-pods").Get(ctx, cre.Name, metav1.GetOptions{}); err == nil {
		t.Errorf("the failed creation pod was kept")
	}
}

// fieldHandleEngine evaluates spec.volumeCreation.handle to resultHandle.
type fieldHandleEngine struct{ requestRecorder }

func (e *fieldHandleEngine) Creation(ctx context.Context, p *v1alpha1.PavProvisioner, r templating.DynamicRequest) (*templating.CreationConfig, error) {
	cc, err := e.requestRecorder.Creation(ctx, p, r)
	if cc != nil {
		h := resultHandle
		cc.Handle = &h
	}
	return cc, err
}

// A spec.volumeCreation.handle that is another PV's is refused before any
// creation pod runs for it.
func TestDuplicateFieldHandleRunsNoCreationPod(t *testing.T) {
	h := newHarness(t, append(testObjects(), firstVolume())...)
	e := &fieldHandleEngine{}
	h.engine = e
	h.restart()
	for i := 0; i < 4; i++ {
		_ = h.step()
	}
	if got := h.podsCreated(protocol.PhaseCreation); len(got) != 0 {
		t.Errorf("%d creation pods created", len(got))
	}
	if names := h.volumeNames(); len(names) != 1 {
		t.Errorf("PVs %v, want only the first volume", names)
	}
	events := strings.Join(drain(h.events), "\n")
	if !strings.Contains(events, `spec.volumeCreation.handle: volume handle "vol-1" is already the handle of PersistentVolume pvc-first-uid`) {
		t.Errorf("events:\n%s", events)
	}
}

func secondClaim() runtime.Object {
	pvc := testObjects()[1].(*corev1.PersistentVolumeClaim).DeepCopy()
	pvc.Name, pvc.UID = "claim2", "claim2-uid"
	return pvc
}

// Two creations that finish at once with the same handle: the second sync
// runs before the cache shows the first one's PV, and still gets none.
func TestDuplicateHandlesFinishingTogetherMakeOnePV(t *testing.T) {
	h := newHarness(t, append(testObjects(), secondClaim())...)
	rec := &requestRecorder{}
	h.engine = rec
	h.restart()
	ctx := context.Background()
	for i := 0; i < 3; i++ { // validation pods, creation pods, both done
		h.now = h.now.Add(time.Hour)
		h.runPods()
		h.refresh()
		_ = h.c.syncClaim(ctx, testClaimKey)
		_ = h.c.syncClaim(ctx, "ns/claim2")
	}
	names := h.volumeNames()
	if len(names) != 1 || names[0] != testVolume {
		t.Fatalf("PVs %v, want only %s:\n%s", names, testVolume, h.describe())
	}
	if len(rec.requests) != 0 {
		t.Errorf("a deletion was evaluated with handle %q", rec.requests[0].Handle)
	}
	events := strings.Join(drain(h.events), "\n")
	if !strings.Contains(events, `volume handle "vol-1" is already the handle of PersistentVolume `+testVolume+` (claim ns/claim)`) {
		t.Errorf("events:\n%s", events)
	}
}

// A PV the cache still shows but the API server no longer has does not
// hold its handle.
func TestHandleOfAVolumeGoneIsFree(t *testing.T) {
	h := newHarness(t, testObjects()...)
	if err := h.c.pvIndexer.Add(firstVolume()); err != nil {
		t.Fatal(err)
	}
	owner, err := h.c.handleOwner(context.Background(), testProvisioner, resultHandle, testVolume)
	if err != nil || owner != nil {
		t.Fatalf("owner %v, err %v", owner, err)
	}
	// Another driver's PV with the handle does not hold it either.
	other := firstVolume()
	other.Spec.CSI.Driver = "other"
	if _, err := h.kube.CoreV1().PersistentVolumes().Create(context.Background(), other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.refresh()
	if owner, err := h.c.handleOwner(context.Background(), testProvisioner, resultHandle, testVolume); err != nil || owner != nil {
		t.Fatalf("owner %v, err %v", owner, err)
	}
}
