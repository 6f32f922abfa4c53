#!/bin/bash
# build.sh KUBE_VERSION OUTDIR - build the multi-call Kubernetes binary (kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet, kube-proxy; dispatch on argv[0]) and crilite
# (a tiny CRI client used by cluster-down) of KUBE_VERSION into OUTDIR, with the module file
# versions/KUBE_VERSION.mod. The version is stamped into the binaries: an empty version string
# makes every component panic at start.
set -euo pipefail
KV=$1
OUT=$(mkdir -p "$2" && cd "$2" && pwd)
cd "$(dirname "$0")"
MF=versions/$KV.mod
[ -f "$MF" ] || { echo "no $MF: supported versions are $(ls versions | sed -n 's/\.mod$//p' | xargs)" >&2; exit 1; }
[ "$(go list -modfile="$MF" -m -f '{{.Version}}' k8s.io/kubernetes)" = "$KV" ] || { echo "$MF does not require k8s.io/kubernetes $KV" >&2; exit 1; }
MINOR=$(echo "$KV" | cut -d. -f2)
LD="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  LD="$LD -X $p.gitVersion=$KV -X $p.gitMajor=1 -X $p.gitMinor=$MINOR -X $p.gitTreeState=clean -X $p.gitCommit=0000000000000000000000000000000000000000 -X $p.buildDate=1970-01-01T00:00:00Z"
done
export CGO_ENABLED=0
# build to temporary names and rename, so a concurrent reader never sees a half-written binary
go build -modfile="$MF" -tags=kubeproxy -trimpath -ldflags "$LD" -o "$OUT/.kube.tmp" ./cmd/kube
go build -modfile="$MF" -trimpath -ldflags "-s -w" -o "$OUT/.crilite.tmp" ./cmd/crilite
mv -f "$OUT/.kube.tmp" "$OUT/kube"
mv -f "$OUT/.crilite.tmp" "$OUT/crilite"
