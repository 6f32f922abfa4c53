package nodeagent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	mount "k8s.io/mount-utils"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/nodeagent/mounts"
	"github.com/albertofaria/pav/protocol"
)

// fakeOwnMounts is the node plugin's mount namespace as the fake mounter
// records it: one file system (0:1) mounted at /, and each recorded mount
// a bind of a directory of it (a staging pod's /pav/volume), as
// host-directory volumes are. A swap rebinds a mount in place.
type fakeOwnMounts struct{ m *mount.FakeMounter }

func (f *fakeOwnMounts) Table() ([]mount.MountInfo, error) {
	infos := []mount.MountInfo{{ID: 1, Major: 0, Minor: 1, Root: "/", MountPoint: "/"}}
	for i, mp := range f.m.MountPoints {
		infos = append(infos, mount.MountInfo{ID: i + 2, Major: 0, Minor: 1, Root: mp.Device, MountPoint: mp.Path, Source: mp.Device, MountOptions: mp.Opts})
	}
	return infos, nil
}

func (f *fakeOwnMounts) Swap(_ context.Context, old []mounts.VolumeMount, src *os.File, _ mounts.BindOptions, keep func(string) bool) ([]string, error) {
	path, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", src.Fd()))
	if err != nil {
		return nil, err
	}
	var replaced []string
	for i, mp := range f.m.MountPoints {
		for _, v := range old {
			if v == (mounts.VolumeMount{Major: 0, Minor: 1, Root: mp.Device}) && keep(mp.Path) {
				f.m.MountPoints[i].Device = path
				replaced = append(replaced, mp.Path)
			}
		}
	}
	return replaced, nil
}

// rollingProvisioner is the test provisioner with updateStrategy
// RollingUpdate; recovery (Restage, the default either way) written out or
// not makes two revisions of its spec.volumeStaging.
func rollingProvisioner(recovery v1alpha1.StagingRecovery) *v1alpha1.PavProvisioner {
	return &v1alpha1.PavProvisioner{ObjectMeta: metav1.ObjectMeta{Name: testDriver}, Spec: v1alpha1.PavProvisionerSpec{
		ProvisioningModes: []v1alpha1.ProvisioningMode{v1alpha1.Dynamic},
		VolumeStaging:     &v1alpha1.VolumeStaging{UpdateStrategy: v1alpha1.UpdateRollingUpdate, Recovery: recovery},
	}}
}

// TestRolloutSurvivesAFaultAtEveryWrite: an outdated staging pod serving a
// client is replaced make-before-break: one new staging pod, the client's
// mount swapped to its volume, then the old staging unstaged once and
// released, whatever write fails.
func TestRolloutSurvivesAFaultAtEveryWrite(t *testing.T) {
	var id string
	testNodeFaults(t, nodeScenario{
		fixture: func(t *testing.T) *stagerFixture {
			f := newStagerFixture(t, nil).withUIDs()
			// Creation times tell the newer of two staging pods apart.
			f.kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
				a.(k8stesting.CreateAction).GetObject().(*corev1.Pod).CreationTimestamp = metav1.Now()
				return false, nil, nil
			})
			f.target = filepath.Join(t.TempDir(), "pods", string(newClientPod().UID), "volumes", "kubernetes.io~csi", "pvc", "mount")
			f.cfg.Recovery, f.cfg.Processes = true, noContainers{}
			f.cfg.ownMounts = &fakeOwnMounts{m: f.mounter}
			if err := f.provs.Update(rollingProvisioner("")); err != nil {
				t.Fatal(err)
			}
			f.stager = NewStager(f.cfg)
			return f
		},
		longRunning: true,
		setup: func(f *stagerFixture) {
			ctx := context.Background()
			if _, err := f.kube.CoreV1().Pods("ns").Create(ctx, newClientPod(), metav1.CreateOptions{}); err != nil {
				f.t.Fatal(err)
			}
			if err := f.publish(ctx); err != nil {
				f.t.Fatal(err)
			}
			id = f.waitForPod(protocol.PhaseStaging).Labels[protocol.LabelStagingID]
			if err := f.provs.Update(rollingProvisioner(v1alpha1.RecoveryRestage)); err != nil {
				f.t.Fatal(err)
			}
		},
		steps: []func(context.Context, *stagerFixture) error{
			func(ctx context.Context, f *stagerFixture) error {
				if err := f.stager.recover(ctx, id); err != nil {
					return err
				}
				// Done when the only staging pod is a current one and the
				// target shows its volume (recover returns nil also when
				// the cache lags).
				var stagings []corev1.Pod
				for _, p := range f.pods() {
					if p.Labels[protocol.LabelPhase] == string(protocol.PhaseStaging) {
						stagings = append(stagings, p)
					}
				}
				p, _ := f.stager.provisioner(testDriver)
				if len(stagings) != 1 || outdated(&stagings[0], p) || stagings[0].DeletionTimestamp != nil {
					return fmt.Errorf("staging pods %v, want one current one", podNames(stagings))
				}
				dir, err := protocol.PodHostDir(&stagings[0], f.root)
				if err != nil {
					return err
				}
				want := filepath.Join(dir, protocol.FileVolume)
				for _, mp := range f.mounter.MountPoints {
					if mp.Path == f.target && mp.Device == want {
						return nil
					}
				}
				return fmt.Errorf("mounts %+v, want %s at the target", f.mounter.MountPoints, want)
			},
		},
		check: func(t *testing.T, f *stagerFixture) {
			for _, p := range f.pods() {
				if ph := p.Labels[protocol.LabelPhase]; ph != string(protocol.PhaseStaging) && ph != "" {
					t.Errorf("%s pod %s left", ph, p.Name)
				}
			}
			if len(f.mounter.MountPoints) != 1 {
				t.Errorf("mounts %+v, want the new volume's at the target", f.mounter.MountPoints)
			}
		},
		once: []protocol.Phase{protocol.PhaseStaging, protocol.PhaseUnstaging},
	})
}
