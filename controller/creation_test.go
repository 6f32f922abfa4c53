package controller

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/templating"
)

func TestDecideCreation(t *testing.T) {
	str := func(s string) *string { return &s }
	qty := func(s string) *resource.Quantity { q := resource.MustParse(s); return &q }
	// base is a claim of 1Gi, at most 4Gi, whose creation pod succeeded
	// writing /pav/handle and /pav/capacity, for a volumeCreation without
	// handle or capacity.
	base := func() creationView {
		return creationView{
			pvc: &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", UID: "uid"},
				Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
					Limits:   corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("4Gi")}}},
			},
			class:    &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "sc"}},
			creation: &templating.CreationConfig{},
			pod:      &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "pods", Name: "pav-creation-uid"}},
			outcome:  podOutcome{done: true, succeeded: true, handle: str("from-file\n"), capacity: str("2Gi\n")},
		}
	}
	noPod := func(v *creationView) { v.pod, v.outcome = nil, podOutcome{} }
	tests := []struct {
		name   string
		change func(v *creationView)
		// want: handle and capacity made, or a part of the refusal.
		handle, capacity, refusal string
		revert                    string // the handle a reverting deletion pod gets
		attributes                map[string]string
	}{
		{name: "the pod's files", change: func(v *creationView) {}, handle: "from-file", capacity: "2Gi", revert: "from-file"},
		{name: "the fields before the files", change: func(v *creationView) {
			v.creation.Handle, v.creation.Capacity = str("from-field"), qty("3Gi")
		}, handle: "from-field", capacity: "3Gi", revert: "from-field"},
		{name: "no handle anywhere: the default", change: func(v *creationView) { v.outcome.handle = nil }, handle: "pvc-uid", capacity: "2Gi"},
		{name: "no pod: the fields", change: func(v *creationView) {
			noPod(v)
			v.creation.Capacity = qty("1Gi")
		}, handle: "pvc-uid", capacity: "1Gi"},
		{name: "capacity exactly the limit", change: func(v *creationView) { v.outcome.capacity = str("4Gi") }, handle: "from-file", capacity: "4Gi", revert: "from-file"},
		{name: "attributes", change: func(v *creationView) { v.outcome.attributes = str(`{"tier":"gold"}`) },
			handle: "from-file", capacity: "2Gi", revert: "from-file", attributes: map[string]string{"tier": "gold"}},

		// Refusals.
		{name: "the pod failed", change: func(v *creationView) { v.outcome.succeeded, v.outcome.message = false, "exit 3" },
			refusal: "creation pod pods/pav-creation-uid failed: exit 3", revert: "from-file"},
		{name: "a failed pod's record unreadable too: the pod's failure is told", change: func(v *creationView) {
			v.outcome.succeeded, v.outcome.message = false, "exit 3"
			v.creation, v.creationErr = nil, errors.New("bad record")
		}, refusal: "failed: exit 3", revert: "from-file"},
		{name: "the record unreadable", change: func(v *creationView) { v.creation, v.creationErr = nil, errors.New("bad record") },
			refusal: "bad record", revert: "from-file"},
		{name: "no capacity from the pod", change: func(v *creationView) { v.outcome.capacity = nil },
			refusal: "did not write /pav/capacity", revert: "from-file"},
		{name: "no capacity without a pod", change: noPod, refusal: "there is no creation pod to write /pav/capacity"},
		{name: "capacity not a quantity", change: func(v *creationView) { v.outcome.capacity = str("lots") },
			refusal: `wrote "lots" to /pav/capacity, which is not a capacity`, revert: "from-file"},
		{name: "capacity zero", change: func(v *creationView) { v.outcome.capacity = str("0") }, refusal: "is not positive", revert: "from-file"},
		{name: "capacity negative", change: func(v *creationView) { v.outcome.capacity = str("-1Gi") }, refusal: "is not positive", revert: "from-file"},
		{name: "capacity beyond an int64", change: func(v *creationView) { v.outcome.capacity = str("1e19") }, refusal: "too large", revert: "from-file"},
		{name: "capacity below the request", change: func(v *creationView) { v.outcome.capacity = str("512Mi") },
			refusal: "less than the 1Gi the claim requests", revert: "from-file"},
		{name: "capacity above the limit", change: func(v *creationView) { v.outcome.capacity = str("5Gi") },
			refusal: "exceeds the claim's limit of 4Gi", revert: "from-file"},
		{name: "the field's capacity below the request, whatever the file says", change: func(v *creationView) { v.creation.Capacity = qty("1Mi") },
			refusal: "less than the 1Gi the claim requests", revert: "from-file"},
		{name: "a bad handle from the pod is refused and never reverted", change: func(v *creationView) { v.outcome.handle = str("..") },
			refusal: "/pav/handle"},
		{name: "a bad handle field", change: func(v *creationView) { v.creation.Handle = str("../x") }, refusal: "spec.volumeCreation.handle"},
		{name: "attributes refused", change: func(v *creationView) { v.outcome.attributes, v.outcome.resultError = str("not json"), "the pod's note" },
			refusal: "creation pod pods/pav-creation-uid: its /pav/volume-attributes is refused", revert: "from-file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := base()
			tc.change(&v)
			got := decideCreation(v)
			if got.revertHandle != tc.revert {
				t.Errorf("revert handle %q, want %q", got.revertHandle, tc.revert)
			}
			if tc.refusal != "" {
				if !strings.Contains(got.refusal, tc.refusal) {
					t.Errorf("refusal %q, want one saying %q", got.refusal, tc.refusal)
				}
				return
			}
			if got.refusal != "" {
				t.Fatalf("refused: %s", got.refusal)
			}
			if got.handle != tc.handle || got.capacity.Cmp(resource.MustParse(tc.capacity)) != 0 {
				t.Errorf("handle %q capacity %s, want %q %s", got.handle, got.capacity.String(), tc.handle, tc.capacity)
			}
			if len(got.attributes) != len(tc.attributes) {
				t.Errorf("attributes %v, want %v", got.attributes, tc.attributes)
			}
			for k, want := range tc.attributes {
				if got.attributes[k] != want {
					t.Errorf("attribute %s = %q, want %q", k, got.attributes[k], want)
				}
			}
		})
	}
}

// refusedCapacity: the first creation pod writes a capacity below the
// claim's request; the creation is refused and reverted by one deletion
// pod, and the next attempt makes the PV.
var refusedCapacity = scenario{
	setup: func(h *harness) { h.creationCapacities = []string{"1Mi"} },
	step:  (*harness).step,
	done:  (*harness).provisioned,
	check: func(h *harness) {
		h.checkVolume()
		if len(h.creationCapacities) != 0 {
			h.t.Errorf("the creation pod with the refused capacity never ran")
		}
	},
	once: protocol.PhaseDeletion,
}

// TestRefusedCapacitySurvivesAFaultAtEveryWrite: a refused capacity under
// faults; the creation is reverted once and retried, and its PV made.
func TestRefusedCapacitySurvivesAFaultAtEveryWrite(t *testing.T) {
	testEveryFault(t, refusedCapacity)
}
