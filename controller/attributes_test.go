package controller

import (
	"context"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/albertofaria/pav/protocol"
)

// withParameters is testObjects with StorageClass parameters.
func withParameters(params map[string]string) []runtime.Object {
	objs := testObjects()
	objs[0].(*storagev1.StorageClass).Parameters = params
	return objs
}

// withAttributes: provisioning whose creation pod returns volume attributes;
// the PV carries them beside the class's parameters, whatever fault.
var withAttributes = scenario{
	setup: func(h *harness) {
		attrs := `{"bucketEndpoint": "http://10.0.0.7:7070", "example.com/region": "eu"}`
		h.attributes = &attrs
	},
	step: provisioning.step,
	done: provisioning.done,
	check: func(h *harness) {
		h.t.Helper()
		h.checkVolume()
		pv, err := h.kube.CoreV1().PersistentVolumes().Get(context.Background(), testVolume, metav1.GetOptions{})
		if err != nil {
			h.t.Fatal(err)
		}
		want := map[string]string{"bucketEndpoint": "http://10.0.0.7:7070", "example.com/region": "eu"}
		if got := pv.Spec.CSI.VolumeAttributes; !reflect.DeepEqual(got, want) {
			h.t.Errorf("PV volumeAttributes %v, want %v", got, want)
		}
	},
	once: protocol.PhaseCreation,
}

func TestCreationPodAttributesSurviveAFaultAtEveryWrite(t *testing.T) {
	testEveryFault(t, withAttributes)
}

func TestCreationPodAttributesBesideClassParameters(t *testing.T) {
	h := newHarness(t, withParameters(map[string]string{"region": "eu", "csi.storage.k8s.io/fstype": "ext4"})...)
	attrs := `{"bucketEndpoint": "http://10.0.0.7:7070"}`
	h.attributes = &attrs
	provisioning.run(t, h, 10)
	pv, err := h.kube.CoreV1().PersistentVolumes().Get(context.Background(), testVolume, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"region": "eu", "bucketEndpoint": "http://10.0.0.7:7070"}
	if got := pv.Spec.CSI.VolumeAttributes; !reflect.DeepEqual(got, want) {
		t.Errorf("PV volumeAttributes %v, want %v", got, want)
	}
}

// Attributes PaV refuses fail the creation as a failed creation pod does:
// an Event on the claim names the problem, the deletion pod reverts what the
// pod created, and no PV is made.
func TestRefusedCreationPodAttributesFailTheCreation(t *testing.T) {
	for name, c := range map[string]struct{ raw, resultError, want string }{
		"collision with a class parameter": {raw: `{"region": "us"}`, want: `key "region" is a parameter of StorageClass "sc"`},
		"reserved key":                     {raw: `{"csi.storage.k8s.io/pvc/name": "x"}`, want: `key "csi.storage.k8s.io/pvc/name" is reserved`},
		"not strings":                      {raw: `{"port": 7070}`, want: `the value of key "port" is not a string`},
		"refused by the node plugin": {raw: "", resultError: "PaV refused to read the pod's results: [/pav/volume-attributes is a symbolic link; PaV only reads regular files]",
			want: "it is empty or could not be read: write a JSON object of strings ({} for none) (its /pav/error: PaV refused to read the pod's results: [/pav/volume-attributes is a symbolic link"},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, withParameters(map[string]string{"region": "eu"})...)
			raw := c.raw
			h.attributes = &raw
			if c.resultError != "" {
				h.kube.PrependReactor("update", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
					if pod, ok := a.(k8stesting.UpdateAction).GetObject().(*corev1.Pod); ok && phaseOf(pod) == protocol.PhaseCreation && protocol.Terminated(pod) {
						pod.Annotations[protocol.AnnotationResultError] = c.resultError
					}
					return false, nil, nil
				})
			}
			var deletions int
			h.kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if isPodCreate(a, protocol.PhaseDeletion) {
					deletions++
				}
				return false, nil, nil
			})
			var events []string
			for i := 0; i < 6; i++ {
				_ = h.step()
				events = append(events, drain(h.events)...)
			}
			all := strings.Join(events, "\n")
			if !strings.Contains(all, reasonProvisioningFailed) || !strings.Contains(all, "creation pod pav-pods/"+protocol.PodName(protocol.PhaseCreation, "claim-uid")+": its /pav/volume-attributes is refused: "+c.want) {
				t.Errorf("events:\n%s\nwant one saying %q", all, c.want)
			}
			if deletions == 0 {
				t.Errorf("no deletion pod reverted the creation:\n%s", h.describe())
			}
			pvs, _ := h.kube.CoreV1().PersistentVolumes().List(context.Background(), metav1.ListOptions{})
			if len(pvs.Items) != 0 {
				t.Errorf("%d PVs made from refused attributes", len(pvs.Items))
			}
		})
	}
}
