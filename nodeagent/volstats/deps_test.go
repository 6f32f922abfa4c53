package volstats

import (
	"testing"

	"github.com/albertofaria/pav/internal/deptest"
)

// Reading a volume's usage knows nothing of the API server: the package and
// its tests import no client-go, so whoever reads or reuses them needs no
// cluster, and a Kubernetes rule cannot creep in here.
func TestImportsNoClientGo(t *testing.T) {
	deptest.NoClientGo(t)
}
