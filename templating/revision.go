package templating

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/albertofaria/pav/crds/v1alpha1"
)

// StagingRevision names the version of p's spec.volumeStaging that a staging
// pod is made from: equal revisions stage alike. The node plugin records it
// on each staging pod (protocol.AnnotationStagingRevision); the controller
// counts the staging pods whose revision is not the current one.
func StagingRevision(p *v1alpha1.PavProvisioner) string {
	b, _ := json.Marshal(p.Spec.VolumeStaging)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}
