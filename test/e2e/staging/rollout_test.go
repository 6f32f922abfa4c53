//go:build e2e

package staging

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/test/e2e/framework"
)

// TestOutdatedStagingsReported: the PavProvisioner's status counts its
// staging pods, and after a change of spec.volumeStaging reports the running
// ones as outdated.
func TestOutdatedStagingsReported(t *testing.T) {
	e := newEnv(t, dynamicWith(`mkdir -p /pav/volume
touch /pav/ready
sleep 3600 & wait`, "", false, ""))
	e.storageClass(nil)
	e.claim("c1", corev1.PersistentVolumeFilesystem, corev1.ReadWriteMany)
	for _, name := range []string{"client-a", "client-b"} {
		e.CreatePod(framework.PinToNode(clientPodObject(name, "sleep 3600", []string{"c1"}, false, false), e.nodeName()))
		e.WaitForPod(name, timeout, framework.PodRunningReady)
	}
	e.waitForStagingCounts(2, 0)
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := e.pav.Get(e.Ctx, e.prov, metav1.GetOptions{})
		if err != nil {
			return err
		}
		p.Spec.VolumeStaging.AllowSetuidAndDevices = true // any change of the section
		_, err = e.pav.Update(e.Ctx, p, metav1.UpdateOptions{})
		return err
	}))
	e.waitForStagingCounts(2, 2)
}

// waitForStagingCounts waits until the provisioner's status counts stagings
// staging pods, outdated of them outdated.
func (e *env) waitForStagingCounts(stagings, outdated int32) {
	e.t.Helper()
	_, err := framework.WaitFor(e.Ctx, e.pav, e.prov, time.Minute, func(p *v1alpha1.PavProvisioner) (bool, error) {
		return p.Status.Stagings == stagings && p.Status.OutdatedStagings == outdated, nil
	})
	if err != nil {
		e.t.Fatalf("the provisioner's status never counted %d stagings, %d outdated: %v", stagings, outdated, err)
	}
}
