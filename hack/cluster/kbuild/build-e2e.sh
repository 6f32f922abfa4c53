#!/bin/bash
# build-e2e.sh KUBE_VERSION OUTDIR - build Kubernetes' end-to-end test binary e2e.test with only
# its storage suite for external CSI drivers (test/e2e/storage/external; cmd/e2e-storage says
# how it differs from upstream's e2e.test) and agnhost (test/images/agnhost, the suite's utility image's
# binary) of KUBE_VERSION into OUTDIR, with the module file e2e/KUBE_VERSION.mod: a copy of the
# cluster's versions/KUBE_VERSION.mod whose .sum also has the test-only dependencies (both written
# by gen-gomod.sh; kept apart, so the cluster's binary is not rebuilt when they change). And the
# ginkgo CLI, which runs e2e.test's specs in parallel processes, from its own module (ginkgo/,
# at the version of ginkgo that e2e.test links: the CLI and the library must match).
# Used by hack/cluster/conformance.sh (`make test-conformance`) through ensure-e2e.sh, which
# caches OUTDIR.
set -euo pipefail
KV=$1
OUT=$(mkdir -p "$2" && cd "$2" && pwd)
cd "$(dirname "$0")"
MF=e2e/$KV.mod
[ -f "$MF" ] || { echo "no $MF: run gen-gomod.sh $KV" >&2; exit 1; }
cmp -s "$MF" "versions/$KV.mod" || { echo "$MF is not versions/$KV.mod: run gen-gomod.sh $KV" >&2; exit 1; }
GV=$(go list -modfile="$MF" -m -f '{{.Version}}' github.com/onsi/ginkgo/v2)
[ "$(cd ginkgo && go list -m -f '{{.Version}}' github.com/onsi/ginkgo/v2)" = "$GV" ] ||
  { echo "ginkgo/go.mod must require github.com/onsi/ginkgo/v2 $GV (as $MF): cd ginkgo && go get -tool github.com/onsi/ginkgo/v2/ginkgo@$GV && go mod tidy" >&2; exit 1; }
MINOR=$(echo "$KV" | cut -d. -f2)
LD="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  LD="$LD -X $p.gitVersion=$KV -X $p.gitMajor=1 -X $p.gitMinor=$MINOR -X $p.gitTreeState=clean -X $p.gitCommit=0000000000000000000000000000000000000000 -X $p.buildDate=1970-01-01T00:00:00Z"
done
export CGO_ENABLED=0
# build to temporary names and rename, so a concurrent reader never sees a half-written binary
# cmd/e2e-storage, a package of this module, imports test-only modules the cluster's binaries do
# not: a temporary copy of the module file gets their requirements (-mod=mod adds the modules the
# graph already selects, at those versions), so MF stays the cluster's.
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
cp "$MF" "$TMP/e2e.mod"; cp "e2e/$KV.sum" "$TMP/e2e.sum"
go test -c -vet=off -modfile="$TMP/e2e.mod" -mod=mod -trimpath -ldflags "$LD" -o "$OUT/.e2e.test.tmp" ./cmd/e2e-storage
go build -modfile="$MF" -trimpath -ldflags "-s -w" -o "$OUT/.agnhost.tmp" k8s.io/kubernetes/test/images/agnhost
(cd ginkgo && go build -trimpath -ldflags "-s -w" -o "$OUT/.ginkgo.tmp" github.com/onsi/ginkgo/v2/ginkgo)
mv -f "$OUT/.e2e.test.tmp" "$OUT/e2e.test"
mv -f "$OUT/.agnhost.tmp" "$OUT/agnhost"
mv -f "$OUT/.ginkgo.tmp" "$OUT/ginkgo"
