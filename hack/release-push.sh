#!/bin/bash
# release-push.sh VERSION [REGISTRY] - push release VERSION (_output/release/VERSION, from
# `make release`) to an OCI registry (`make release-push`):
#   REGISTRY/pav:VERSION         the two-platform image (the archive's image index, pushed as is:
#                                its digest is the archive's), with go-containerregistry's crane
#   REGISTRY/pav@DIGEST          the archive's SBOM artifact, a referrer of the image (OCI 1.1)
#   oci://REGISTRY/charts/pav    the chart, version X.Y.Z, with `helm push` (Helm's OCI support)
#   REGISTRY/examples/busybox    with EXAMPLES=1: hello-world's image (busybox:latest of
#                                _output/images/test.tar, `make images`), for test-release
# and write what it pushed ("pav REGISTRY/pav@DIGEST", "sbom REGISTRY/pav@DIGEST",
# "busybox REGISTRY/examples/busybox@DIGEST")
# into _output/release/VERSION/pushed/REGISTRY (":" and "/" as "_"; not part of SHA256SUMS: the
# release does not depend on where it was pushed).
#
# REGISTRY defaults to the local cluster's (https://10.201.0.1:5000, hack/cluster/up.sh), which is
# reached in netns pavcluster and verified with the cluster's registry CA. Another registry is
# reached from here: log in first (`crane auth login` or ~/.docker/config.json for the image,
# `helm registry login` for the chart); REGISTRY_CA_FILE=FILE verifies it with that CA instead of the
# system's.
set -euo pipefail
VERSION=${1:?usage: release-push.sh VERSION [REGISTRY]}
REPO=$(cd "$(dirname "$0")/.." && pwd)
cd "$REPO"
. hack/cluster/lib.sh   # REGISTRY, REGISTRY_CA, ensure_crane
CLUSTER_REGISTRY=$REGISTRY
REGISTRY=${2:-$CLUSTER_REGISTRY}
REL=${RELEASE_DIR:-$REPO/_output/release/$VERSION}   # RELEASE_DIR: a release kept elsewhere (hack/previous-release.sh)
CHART_VERSION=${VERSION#v}
[ -f "$REL/SHA256SUMS" ] || { echo "no release in $REL: make release VERSION=$VERSION" >&2; exit 1; }
(cd "$REL" && sha256sum --quiet -c SHA256SUMS)

run=() ca=()
if [ "$REGISTRY" = "$CLUSTER_REGISTRY" ]; then
  [ -e "$NSPATH" ] || { echo "the local cluster is not up (make cluster-up): its registry $REGISTRY is not running" >&2; exit 1; }
  run=(nsenter --net="$NSPATH")
else
  REGISTRY_CA=${REGISTRY_CA_FILE:-}
fi
[ -z "$REGISTRY_CA" ] || ca=(--ca-file "$REGISTRY_CA")
# crane and cosign verify with Go's system roots, which SSL_CERT_FILE replaces
tool() { if [ -n "$REGISTRY_CA" ]; then SSL_CERT_FILE=$REGISTRY_CA "${run[@]}" "$@"; else "${run[@]}" "$@"; fi; }
crane() { tool "$CRANE" "$@"; }
CRANE=$(ensure_crane)
helm=$(hack/ensure-helm.sh)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# layout TAR SELECT: extract OCI archive TAR into $WORK/layout, its index.json keeping only the
# entries jq's SELECT picks; print the first one's digest (nothing if none).
layout() {
  local d=$WORK/layout
  rm -rf "$d"; mkdir -p "$d"
  tar -xf "$1" -C "$d"
  jq ".manifests |= map(select($2))" "$d/index.json" > "$d/index.one"
  mv "$d/index.one" "$d/index.json"
  jq -r '.manifests[0].digest // empty' "$d/index.json"
}

# push_layout TAR NAME REF: push the image NAME of OCI archive TAR (an index.json entry named
# NAME, io.containerd.image.name) as REF; print REF's repository@digest, checked to be the archive's.
push_layout() {
  local tar=$1 name=$2 ref=$3 want got
  want=$(layout "$tar" ".annotations[\"io.containerd.image.name\"] == \"$name\"")
  [ -n "$want" ] || { echo "$tar has no image $name" >&2; return 1; }
  crane push "$WORK/layout" "$ref" >/dev/null
  got=$(crane digest "$ref")
  [ "$got" = "$want" ] || { echo "$ref has digest $got, the archive's $name is $want" >&2; return 1; }
  echo "${ref%:*}@$got"
}

# push_sbom TAR REPO: push the SBOM of OCI archive TAR (hack/tools/mkimg -sbom: an artifact of
# artifactType application/spdx+json whose subject is the image) to REPO by digest, where the
# registry lists it among the image's referrers (crane maintains the tag sha256-IMAGEDIGEST, OCI
# 1.1's fallback, where the registry lacks the referrers API); print REPO@DIGEST, or nothing for an
# archive without one (releases before SBOMs were attached).
push_sbom() {
  local tar=$1 repo=$2 want
  want=$(layout "$tar" '.artifactType == "application/spdx+json"')
  [ -n "$want" ] || return 0
  crane push "$WORK/layout" "$repo@$want" >/dev/null || return 1
  echo "$repo@$want"
}

mkdir -p "$REL/pushed"
pushed=$REL/pushed/${REGISTRY//[:\/]/_}
rm -f "$pushed"
image=$(push_layout "$REL/pav-image-$VERSION.tar" "docker.io/library/pav:$VERSION" "$REGISTRY/pav:$VERSION")
echo "image: $image (tag $VERSION)"
sbom=$(push_sbom "$REL/pav-image-$VERSION.tar" "$REGISTRY/pav")
[ -z "$sbom" ] || echo "SBOM: $sbom (a referrer of the image)"
if [ -n "${COSIGN_KEY:-}" ]; then
  # no transparency log: the registry may be air-gapped; verify with --insecure-ignore-tlog
  tool "$(ensure_cosign)" sign --key "$COSIGN_KEY" --tlog-upload=false -y "$image" 2>&1 | sed 's/^/cosign: /'
fi

"${run[@]}" "$helm" push "$REL/pav-$CHART_VERSION.tgz" "oci://$REGISTRY/charts" "${ca[@]}" 2>&1 | sed 's/^/chart: /'

example=""
if [ "${EXAMPLES:-0}" = 1 ]; then
  tar=$REPO/_output/images/test.tar
  [ -f "$tar" ] || { echo "no $tar: make images" >&2; exit 1; }
  push_layout "$tar" docker.io/library/busybox:latest "$REGISTRY/examples/busybox:latest" >/dev/null
  # An image ID of its own (a label in its config): kubelet records which registry it pulled an
  # image ID from, and then pulls again, to check the pod may have it, every name with that ID it
  # did not pull from there: the nodes' preloaded images that are this busybox too (pav-test,
  # busybox:latest) would no longer start where hello-world ran.
  example=$(crane mutate "$REGISTRY/examples/busybox:latest" --label org.opencontainers.image.title=pav-example-busybox \
    -t "$REGISTRY/examples/busybox:latest" 2>/dev/null)
  [[ $example == "$REGISTRY/examples/busybox@sha256:"* ]] || { echo "crane mutate of hello-world's image gave '$example'" >&2; exit 1; }
  echo "hello-world's image: $example"
fi
{ echo "pav $image"; [ -z "$sbom" ] || echo "sbom $sbom"; [ -z "$example" ] || echo "busybox $example"; } > "$pushed"
