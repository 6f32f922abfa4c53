//go:build e2e

package provisioning

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/albertofaria/pav/test/e2e/framework"
)

// A claim's VolumeAttributesClass: a new volume is created with its
// parameters and its PV records it; changing it runs the modification pod
// once and ends as external-resizer's modify controller would (current
// class, no modifyVolumeStatus, the PV's class); a class the pod declares
// infeasible ends Infeasible, and setting the claim back to its current
// class clears that without another pod.
func TestVolumeAttributesClassModification(t *testing.T) {
	e := newEnv(t)
	p := e.provisioner("vac", "provisioningModes: [Dynamic]\n"+
		section("volumeCreation", "capacity: 1Gi\n"+pod(`echo -n {{ mutableParams.tier | tobash }} > /markers/created-$CLAIM_UID`))+
		section("volumeModification", pod(`if [ {{ mutableParams.tier | tobash }} = impossible ]; then echo "no such tier" > /pav/infeasible; exit 1; fi
echo {{ currentMutableParams.tier | default('') | tobash }}"->"{{ mutableParams.tier | tobash }} >> /markers/modified-$CLAIM_UID`))+staging)
	markers := e.markerDir()
	for _, tier := range []string{"silver", "gold", "impossible"} {
		vac := &storagev1.VolumeAttributesClass{ObjectMeta: metav1.ObjectMeta{Name: p.Name + "-" + tier}, DriverName: p.Name, Parameters: map[string]string{"tier": tier}}
		if _, err := e.Client.StorageV1().VolumeAttributesClasses().Create(e.Ctx, vac, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = e.Client.StorageV1().VolumeAttributesClasses().Delete(context.Background(), vac.Name, metav1.DeleteOptions{})
		})
	}
	class := e.class(p, nil)
	claims := e.Client.CoreV1().PersistentVolumeClaims(e.Namespace)
	ask := func(tier string) {
		t.Helper()
		patch := `{"spec":{"volumeAttributesClassName":"` + p.Name + "-" + tier + `"}}`
		if _, err := claims.Patch(e.Ctx, "data", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pvc := e.claimWith("data", class, "1Gi", func(c *corev1.PersistentVolumeClaim) {
		silver := p.Name + "-silver"
		c.Spec.VolumeAttributesClassName = &silver
	})
	_, pv := e.waitBound("data")
	modified := filepath.Join(markers, "modified-"+string(pvc.UID))

	// current: the claim's status and its PV say the volume has class tier,
	// with no modification under way.
	current := func(tier string) {
		t.Helper()
		want := p.Name + "-" + tier
		cur, err := framework.WaitFor(e.Ctx, claims, "data", timeout, func(c *corev1.PersistentVolumeClaim) (bool, error) {
			return c.Status.CurrentVolumeAttributesClassName != nil && *c.Status.CurrentVolumeAttributesClassName == want && c.Status.ModifyVolumeStatus == nil, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if c := claimCondition(cur, corev1.PersistentVolumeClaimVolumeModifyingVolume); c != nil {
			t.Errorf("condition %+v left", c)
		}
		got, err := e.Client.CoreV1().PersistentVolumes().Get(e.Ctx, pv.Name, metav1.GetOptions{})
		if err != nil || got.Spec.VolumeAttributesClassName == nil || *got.Spec.VolumeAttributesClassName != want {
			t.Errorf("PV class %v (%v), want %s", got.Spec.VolumeAttributesClassName, err, want)
		}
	}
	current("silver")
	if got := string(readMarker(t, filepath.Join(markers, "created-"+string(pvc.UID)))); got != "silver" {
		t.Errorf("the creation pod saw mutableParams.tier %q, want silver", got)
	}

	ask("gold")
	current("gold")
	e.waitEvent("data", "VolumeModifySuccessful", p.Name+"-gold")
	if got := string(readMarker(t, modified)); got != "silver->gold\n" {
		t.Errorf("modification pods ran %q, want once from silver to gold", got)
	}

	ask("impossible")
	cur, err := framework.WaitFor(e.Ctx, claims, "data", timeout, func(c *corev1.PersistentVolumeClaim) (bool, error) {
		st := c.Status.ModifyVolumeStatus
		return st != nil && st.Status == corev1.PersistentVolumeClaimModifyVolumeInfeasible, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if c := claimCondition(cur, corev1.PersistentVolumeClaimVolumeModifyVolumeError); c == nil || !strings.Contains(c.Message, "no such tier") ||
		cur.Status.ModifyVolumeStatus.TargetVolumeAttributesClassName != p.Name+"-impossible" || *cur.Status.CurrentVolumeAttributesClassName != p.Name+"-gold" {
		t.Errorf("claim status %+v, want Infeasible to %s-impossible with the pod's reason, current class gold", cur.Status, p.Name)
	}
	e.waitEvent("data", "VolumeModifyFailed", "no such tier")
	e.waitNoPavPods(pvc.UID)

	// The rollback: back to the class the volume has.
	ask("gold")
	current("gold")
	if got := string(readMarker(t, modified)); got != "silver->gold\n" {
		t.Errorf("modification pods ran %q, want only the one from silver to gold", got)
	}
	e.waitNoPavPods(pvc.UID)
}

func readMarker(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
