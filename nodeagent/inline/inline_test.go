package inline

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/albertofaria/pav/crds/v1alpha1"
)

// The limits count the pod's own inline volumes of the provisioner and
// those of older pods of its namespace that have not terminated.
func TestCheckInlineLimits(t *testing.T) {
	pod := func(name string, age int, phase corev1.PodPhase, drivers ...string) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name),
			CreationTimestamp: metav1.NewTime(time.Unix(1000-int64(age), 0))}, Status: corev1.PodStatus{Phase: phase}}
		for i, d := range drivers {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: fmt.Sprint(i), VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: d}}})
		}
		return p
	}
	pods := []corev1.Pod{
		pod("old", 30, corev1.PodRunning, "prov", "prov"),
		pod("done", 20, corev1.PodSucceeded, "prov", "prov", "prov"),
		pod("other", 15, corev1.PodRunning, "another", "another"),
		pod("me", 10, corev1.PodPending, "prov", "another"),
		pod("young", 5, corev1.PodPending, "prov", "prov"),
	}
	for _, tc := range []struct {
		perPod, perNS int32
		uid, want     string
	}{
		{perPod: 1, uid: "me"},
		{perPod: 1, uid: "old", want: "the pod has 2 inline volumes of the provisioner; at most 1"},
		{perNS: 3, uid: "me"}, // old's 2 and its own 1; done has terminated
		{perNS: 2, uid: "me", want: "would have 3 inline volumes"},    // over
		{perNS: 3, uid: "young", want: "would have 5 inline volumes"}, // me came first
		{perNS: 5, uid: "young"},
		{perNS: 5, uid: "gone", want: "not in its namespace any more"},
	} {
		pol := &v1alpha1.InlineVolumePolicy{}
		if tc.perPod > 0 {
			pol.MaxVolumesPerPod = ptr.To(tc.perPod)
		}
		if tc.perNS > 0 {
			pol.MaxVolumesPerNamespace = ptr.To(tc.perNS)
		}
		err := checkInlineLimits(pol, "prov", pods, tc.uid)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("per pod %d, per namespace %d, pod %s: %v, want %q", tc.perPod, tc.perNS, tc.uid, err, tc.want)
		}
	}
}
