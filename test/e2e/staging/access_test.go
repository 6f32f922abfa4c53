//go:build e2e

package staging

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/albertofaria/pav/test/e2e/framework"
)

// A ReadWriteOncePod claim is provisioned when the provisioner lists the
// mode; a second pod using it stays Pending with the scheduler's reason
// until the first is gone, then runs.
func TestReadWriteOncePodSecondPodPending(t *testing.T) {
	e := newEnv(t, dynamicWith(writeHello, "", false, "volumeValidation:\n  accessModes: [ReadWriteOncePod]\n"))
	e.storageClass(nil)
	e.claim("c1", corev1.PersistentVolumeFilesystem, corev1.ReadWriteOncePod)
	e.WaitForPVCBound("c1")

	e.clientPod("first", "cat /data/c1/hello && sleep 3600", []string{"c1"}, false, false)
	e.WaitForPod("first", timeout, framework.PodRunningReady)
	e.clientPod("second", "cat /data/c1/hello", []string{"c1"}, false, false)
	pod := e.WaitForPod("second", timeout, func(p *corev1.Pod) (bool, error) {
		if p.Spec.NodeName != "" {
			return false, fmt.Errorf("the second pod of a ReadWriteOncePod claim was scheduled to %s", p.Spec.NodeName)
		}
		c := podCondition(p, corev1.PodScheduled)
		return c != nil && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable, nil
	})
	if c := podCondition(pod, corev1.PodScheduled); !strings.Contains(c.Message, "ReadWriteOncePod") {
		t.Errorf("PodScheduled message %q does not name ReadWriteOncePod", c.Message)
	}
	t.Logf("second pod: %s", podCondition(pod, corev1.PodScheduled).Message)

	e.DeletePod("first", timeout)
	if out := e.succeeded("second"); !strings.Contains(out, "hello from pvc-") {
		t.Errorf("second client read %q once the first was gone", out)
	}
}

func podCondition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// Under fsGroupPolicy File kubelet gives a client pod's fsGroup the
// volume's files; under the default (ReadWriteOnceWithFSType, and PaV's PVs
// have no fsType) it leaves them as the staging pod made them.
func TestFSGroupPolicy(t *testing.T) {
	for _, policy := range []string{"", "File"} {
		t.Run("fsGroupPolicy="+policy, func(t *testing.T) {
			spec := dynamicWith(writeHello, "", false, "")
			if policy != "" {
				spec = strings.Replace(spec, "volumeStaging:\n", "volumeStaging:\n  fsGroupPolicy: "+policy+"\n", 1)
			}
			e := newEnv(t, spec)
			e.storageClass(nil)
			e.claim("c1", corev1.PersistentVolumeFilesystem, corev1.ReadWriteOnce)
			group := int64(4321)
			pod := clientPodObject("client", "stat -c '%g' /data/c1/hello", []string{"c1"}, false, false)
			pod.Spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: &group}
			e.CreatePod(framework.PinToNode(pod, e.nodeName()))
			got := strings.TrimSpace(e.succeeded("client"))
			want := "0"
			if policy == "File" {
				want = "4321"
			}
			if got != want {
				t.Errorf("the volume's file has group %s, want %s", got, want)
			}
		})
	}
}

// A generic ephemeral volume of a PaV class is a claim like any other: it
// is provisioned, the pod writes to it, and deleting the pod deletes the
// claim, whose volume PaV's deletion pod then removes.
func TestGenericEphemeralVolume(t *testing.T) {
	e := newEnv(t, dynamicWith(writeHello, "", false,
		section("volumeDeletion", podTemplate("delete", "touch /marker/deleted-{{ handle }}", false))))
	e.storageClass(nil)
	class := e.prov
	pod := clientPodObject("client", "cat /scratch/hello && echo written > /scratch/w && cat /scratch/w", nil, false, false)
	pod.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{
		VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &class,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}},
		}},
	}}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
	created := e.CreatePod(framework.PinToNode(pod, e.nodeName()))
	out := e.succeeded("client")
	if !strings.Contains(out, "hello from pvc-") || !strings.Contains(out, "written") {
		t.Errorf("client output %q", out)
	}

	// The claim Kubernetes made for the pod: "<pod>-<volume>", owned by it.
	claims := e.Client.CoreV1().PersistentVolumeClaims(e.Namespace)
	pvc, err := claims.Get(e.Ctx, "client-scratch", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if o := metav1.GetControllerOf(pvc); o == nil || o.UID != created.UID {
		t.Errorf("claim %s is not owned by the pod: %v", pvc.Name, pvc.OwnerReferences)
	}
	if pvc.Status.Phase != corev1.ClaimBound {
		t.Fatalf("claim %s is %s", pvc.Name, pvc.Status.Phase)
	}
	pvName := pvc.Spec.VolumeName
	pv, err := e.Client.CoreV1().PersistentVolumes().Get(e.Ctx, pvName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	e.DeletePod("client", timeout)
	ctx, cancel := context.WithTimeout(e.Ctx, timeout)
	defer cancel()
	must(t, framework.WaitForDeletion(ctx, claims, pvc.Name))
	must(t, framework.WaitForDeletion(ctx, e.Client.CoreV1().PersistentVolumes(), pvName))
	if !e.marked("deleted-" + pv.Spec.CSI.VolumeHandle) {
		t.Error("PaV's deletion pod did not run for the ephemeral volume")
	}
}
