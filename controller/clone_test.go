package controller

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/protocol"
)

const sourceClaimKey = "ns/src"

// cloneObjects is testObjects whose claim is a clone of claim "src", bound
// to a volume of the provisioner.
func cloneObjects() []runtime.Object {
	objs := testObjects()
	clone := objs[1].(*corev1.PersistentVolumeClaim)
	clone.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "src"}
	src := clone.DeepCopy()
	src.Name, src.UID, src.Spec.DataSource = "src", "src-uid", nil
	src.Spec.VolumeName = "pvc-src-uid"
	src.Status.Phase = corev1.ClaimBound
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pvc-src-uid"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			ClaimRef:               &corev1.ObjectReference{Namespace: "ns", Name: "src", UID: "src-uid"},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: testProvisioner, VolumeHandle: "src-vol"}},
		},
	}
	return append(objs, src, pv)
}

func allowCloning(h *harness) {
	h.prov.Spec.VolumeCreation = &v1alpha1.VolumeCreation{Cloning: true}
}

// stepBoth is a step of the clone and then of its source (what their events would queue).
func (h *harness) stepBoth() error {
	err := h.step()
	h.refresh()
	if e := h.c.syncClaim(context.Background(), sourceClaimKey); err == nil {
		err = e
	}
	return err
}

// source is the source claim as the API has it (nil if gone).
func (h *harness) source() *corev1.PersistentVolumeClaim {
	src, err := h.kube.CoreV1().PersistentVolumeClaims("ns").Get(context.Background(), "src", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		h.t.Fatal(err)
	}
	return src
}

func holdsClone(src *corev1.PersistentVolumeClaim) bool {
	return src != nil && protocol.HasFinalizer(src, protocol.CloneFinalizer("claim-uid"))
}

// cloned: the clone is provisioned (its PV made, its pods and finalizer
// gone) and the source no longer holds its finalizer.
func (h *harness) cloned() bool {
	ctx := context.Background()
	_, pvErr := h.kube.CoreV1().PersistentVolumes().Get(ctx, testVolume, metav1.GetOptions{})
	pods, _ := h.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	pvc, err := h.kube.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "claim", metav1.GetOptions{})
	return pvErr == nil && len(pods.Items) == 0 && err == nil && !protocol.HasFinalizer(pvc, protocol.FinalizerClaim) && !holdsClone(h.source())
}

// cloning: a clone is provisioned; its source holds the clone's finalizer
// from before the first pod until the PV is made, then not.
var cloning = scenario{
	objects: cloneObjects,
	setup:   allowCloning,
	step:    (*harness).stepBoth,
	done:    (*harness).cloned,
	check:   (*harness).checkVolume,
	once:    protocol.PhaseCreation,
}

func TestCloneSourceProtectionSurvivesAFaultAtEveryWrite(t *testing.T) {
	testEveryFault(t, cloning)
}

// The source holds the clone's finalizer whenever one of the clone's pods
// exists, and not once the clone is provisioned.
func TestCloneSourceHeldWhileTheClonesPodsRun(t *testing.T) {
	h := newHarness(t, cloneObjects()...)
	allowCloning(h)
	ctx := context.Background()
	for i := 0; i < 10 && !h.cloned(); i++ {
		if err := h.stepBoth(); err != nil {
			t.Fatal(err)
		}
		pods, _ := h.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if len(pods.Items) > 0 && !holdsClone(h.source()) {
			t.Fatalf("the clone's %s pod exists but its source does not hold the clone's finalizer:\n%s", phaseOf(&pods.Items[0]), h.describe())
		}
	}
	if !h.cloned() {
		t.Fatalf("not cloned:\n%s", h.describe())
	}
	if src := h.source(); src == nil || len(src.Finalizers) != 0 {
		t.Errorf("source claim after cloning: %v", src)
	}
}

// untilCreationPod steps until the clone's creation pod exists (not run yet).
func (h *harness) untilCreationPod() {
	h.t.Helper()
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		if _, err := h.kube.CoreV1().Pods("pav-pods").Get(ctx, protocol.PodName(protocol.PhaseCreation, "claim-uid"), metav1.GetOptions{}); err == nil {
			return
		}
		_ = h.stepBoth()
	}
	h.t.Fatalf("no creation pod:\n%s", h.describe())
}

// sourceDeletedDuringClone: the source is deleted while the clone's
// creation pod runs; it stays until the clone is provisioned, then goes.
var sourceDeletedDuringClone = scenario{
	objects: cloneObjects,
	setup: func(h *harness) {
		h.t.Helper()
		allowCloning(h)
		h.untilCreationPod()
		if err := h.kube.CoreV1().PersistentVolumeClaims("ns").Delete(context.Background(), "src", metav1.DeleteOptions{}); err != nil {
			h.t.Fatal(err)
		}
		if src := h.source(); src == nil || src.DeletionTimestamp == nil {
			h.t.Fatalf("the source claim is not kept while the clone is created: %v", src)
		}
	},
	step: (*harness).stepBoth,
	done: func(h *harness) bool {
		ctx := context.Background()
		_, pvErr := h.kube.CoreV1().PersistentVolumes().Get(ctx, testVolume, metav1.GetOptions{})
		return pvErr == nil && h.source() == nil
	},
	check:      (*harness).checkVolume,
	once:       protocol.PhaseCreation,
	ranInSetup: true, // created in setup: not to be created again
}

func TestCloneSourceDeletedDuringCloneSurvivesAFaultAtEveryWrite(t *testing.T) {
	testEveryFault(t, sourceDeletedDuringClone)
}

// cloneDeletedDuringCreation: the clone is deleted while its creation pod
// runs: the creation ends and is reverted, and the source is let go.
var cloneDeletedDuringCreation = scenario{
	objects: cloneObjects,
	setup: func(h *harness) {
		h.t.Helper()
		allowCloning(h)
		h.untilCreationPod()
		if err := h.kube.CoreV1().PersistentVolumeClaims("ns").Delete(context.Background(), "claim", metav1.DeleteOptions{}); err != nil {
			h.t.Fatal(err)
		}
	},
	step: (*harness).stepBoth,
	done: func(h *harness) bool {
		ctx := context.Background()
		_, err := h.kube.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "claim", metav1.GetOptions{})
		pods, _ := h.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		src := h.source()
		return apierrors.IsNotFound(err) && len(pods.Items) == 0 && src != nil && len(src.Finalizers) == 0
	},
	check: func(h *harness) {},
	once:  protocol.PhaseDeletion,
}

func TestCloneDeletedDuringCreationLetsTheSourceGo(t *testing.T) {
	testEveryFault(t, cloneDeletedDuringCreation)
}

// A clone whose source is being deleted, between attempts, does not start
// another and lets the source go.
func TestCloneOfASourceBeingDeletedLetsItGo(t *testing.T) {
	h := newHarness(t, cloneObjects()...)
	allowCloning(h)
	ctx := context.Background()
	// An attempt ended (its pods gone, the clone still holding FinalizerClaim
	// and the source the clone's finalizer); then the source is deleted.
	h.untilCreationPod()
	pods, _ := h.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	for _, pod := range pods.Items {
		pod.Finalizers = nil
		if _, err := h.kube.CoreV1().Pods(pod.Namespace).Update(ctx, &pod, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := h.kube.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.kube.CoreV1().PersistentVolumeClaims("ns").Delete(ctx, "src", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5 && h.source() != nil; i++ {
		_ = h.stepBoth()
	}
	if src := h.source(); src != nil {
		t.Fatalf("the source claim is held by a clone that cannot start: %v\n%s", src.Finalizers, h.describe())
	}
	pods, _ = h.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if len(pods.Items) != 0 {
		t.Errorf("a clone of a deleted source started pods: %d", len(pods.Items))
	}
	if events := strings.Join(drain(h.events), "\n"); !strings.Contains(events, `the claim "src" to clone is being deleted`) {
		t.Errorf("events:\n%s", events)
	}
}

// external-provisioner's checks of a clone's source: a clone that fails
// one gets an Event and no pod, and its source is not held.
func TestCloneChecks(t *testing.T) {
	block := corev1.PersistentVolumeBlock
	other := "other"
	for _, tc := range []struct {
		name   string
		change func(clone, src *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume)
		want   string
	}{
		{"smaller than the source", func(_, src *corev1.PersistentVolumeClaim, _ *corev1.PersistentVolume) {
			src.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}
		}, `the claim requests 1Gi (1073741824 bytes), less than the size of the claim "src" to clone (2Gi, 2147483648 bytes)`},
		{"Block clone of a Filesystem source", func(clone, _ *corev1.PersistentVolumeClaim, _ *corev1.PersistentVolume) {
			clone.Spec.VolumeMode = &block
		}, `the claim's volumeMode Block differs from volumeMode Filesystem of the claim "src" to clone`},
		{"Filesystem clone of a Block source", func(_, _ *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) {
			pv.Spec.VolumeMode = &block
		}, `the claim's volumeMode Filesystem differs from volumeMode Block of the claim "src" to clone`},
		{"another class", func(_, src *corev1.PersistentVolumeClaim, _ *corev1.PersistentVolume) {
			src.Spec.StorageClassName = &other
		}, `the claim "src" to clone is of StorageClass "other", the clone of "sc"`},
		{"volume bound to another claim", func(_, _ *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) {
			pv.Spec.ClaimRef.UID = "someone-else"
		}, `the volume "pvc-src-uid" of the claim "src" to clone is not bound to that claim`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := cloneObjects()
			tc.change(objs[1].(*corev1.PersistentVolumeClaim), objs[2].(*corev1.PersistentVolumeClaim), objs[3].(*corev1.PersistentVolume))
			h := newHarness(t, objs...)
			allowCloning(h)
			for i := 0; i < 3; i++ {
				_ = h.stepBoth()
			}
			pods, _ := h.kube.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
			if len(pods.Items) != 0 {
				t.Errorf("%d pods for a clone that fails a check", len(pods.Items))
			}
			if holdsClone(h.source()) {
				t.Errorf("the source is held by a clone that fails a check")
			}
			if events := strings.Join(drain(h.events), "\n"); !strings.Contains(events, tc.want) {
				t.Errorf("events:\n%s\nwant %q", events, tc.want)
			}
		})
	}
}
