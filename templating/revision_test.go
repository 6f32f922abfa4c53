package templating

import (
	"testing"

	"github.com/albertofaria/pav/crds/v1alpha1"
)

func TestStagingRevisionFollowsVolumeStagingOnly(t *testing.T) {
	p := &v1alpha1.PavProvisioner{}
	p.Spec.VolumeStaging = &v1alpha1.VolumeStaging{}
	first := StagingRevision(p)
	p.Spec.VolumeCreation = &v1alpha1.VolumeCreation{Cloning: true}
	if StagingRevision(p) != first {
		t.Error("a change outside spec.volumeStaging changed the staging revision")
	}
	p.Spec.VolumeStaging.AllowSetuidAndDevices = true
	if StagingRevision(p) == first {
		t.Error("a change of spec.volumeStaging kept the staging revision")
	}
}
