#!/usr/bin/env bash
# release-test.sh VERSION - install release VERSION on the local cluster from its artefacts alone
# (_output/release/VERSION, from `make release`) as the README tells a user to, and run
# hello-world (`make test-release`; the caller holds the cluster lock):
#   1. the checksums match;
#   2. the image archive is imported into every node's containerd (hack/cluster/load-images.sh,
#      as `ctr -n k8s.io images import`), nothing else is built or loaded;
#   3. the release's deployment.yaml is applied (and, on the local cluster's node with another
#      kubelet root, its node plugin copy: hack/cluster/kubelet-root-pool.sh), PaV rolls out and
#      runs that version (`pav version -o json` in the controller);
#   4. examples/hello-world reads its greeting (hack/hello-world.sh).
set -euo pipefail
VERSION=${1:?usage: release-test.sh VERSION}
REPO=$(cd "$(dirname "$0")/.." && pwd)
cd "$REPO"
REL=_output/release/$VERSION
KUBECTL=${KUBECTL:-$REPO/hack/cluster/kubectl}
k() { "$KUBECTL" "$@"; }
say() { printf '\n==> %s\n' "$*"; }

[ -f "$REL/SHA256SUMS" ] || { echo "no release in $REL: make release VERSION=$VERSION" >&2; exit 1; }
say "checksums"
(cd "$REL" && sha256sum -c SHA256SUMS)

say "importing $REL/pav-image-$VERSION.tar into every node"
hack/cluster/load-images.sh "$REL/pav-image-$VERSION.tar"

say "installing $REL/deployment.yaml"
k apply --server-side --force-conflicts -f "$REL/pavprovisioners.crd.yaml"
k apply -f "$REL/deployment.yaml"
IMAGE=pav:$VERSION hack/cluster/kubelet-root-pool.sh
k -n pav rollout status deployment/controller-agent --timeout=180s
k -n pav rollout status daemonset/node-agent --timeout=180s
running=$(k -n pav exec deployment/controller-agent -- /pav version -o json)
echo "$running"
grep -q "\"version\": *\"$VERSION\"" <<<"$running" || { echo "PaV runs another version than $VERSION" >&2; exit 1; }

say "hello-world"
KUBECTL=$KUBECTL hack/hello-world.sh
