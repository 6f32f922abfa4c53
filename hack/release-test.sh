#!/usr/bin/env bash
# release-test.sh VERSION - install release VERSION on the local cluster from the cluster's
# registry alone, as docs/install.md tells a user to, and run hello-world with its image from the
# registry too (`make test-release`; the caller pushed the release with `make release-push
# EXAMPLES=1` and holds the cluster lock):
#   1. the checksums match; with COSIGN_PUB=cosign.pub, `cosign verify` passes; PaV as installed by `make deploy` (or an earlier run) is removed;
#   2. Helm: `helm install oci://REGISTRY/charts/pav --version X.Y.Z` with image.repository
#      REGISTRY/pav and image.digest; PaV rolls out and runs VERSION (`pav version -o json`);
#      hello-world; `helm uninstall`;
#   3. the pinned manifest: the release's deployment.yaml with its image rewritten to
#      REGISTRY/pav@DIGEST, applied (and on the node with another kubelet root its node plugin
#      copy: hack/cluster/kubelet-root-pool.sh); rolls out, runs VERSION; hello-world.
# Before each install every node forgets the pushed images (every name of their digests), so the
# nodes pull them from the registry; after it, each node that runs a PaV pod must hold the
# image under its registry name: there is no `ctr import` anywhere. PaV stays installed from the
# manifest (`make deploy-only` replaces it).
set -euo pipefail
VERSION=${1:?usage: release-test.sh VERSION}
REPO=$(cd "$(dirname "$0")/.." && pwd)
cd "$REPO"
. hack/cluster/lib.sh   # REGISTRY, REGISTRY_CA, node_vars, cluster_nodes
REL=_output/release/$VERSION
CHART_VERSION=${VERSION#v}
. hack/release-lib.sh  # k, helm, say, pushed_image, pool_values, forget_images, check_pulled, check_version, uninstall

[ -f "$REL/SHA256SUMS" ] || { echo "no release in $REL: make release VERSION=$VERSION" >&2; exit 1; }
IMAGE=$(pushed_image "$REL" pav)              # REGISTRY/pav@sha256:...
EXAMPLE_IMAGE=$(pushed_image "$REL" busybox)  # REGISTRY/examples/busybox@sha256:...
say "checksums"
(cd "$REL" && sha256sum -c SHA256SUMS)
if [ -n "${COSIGN_PUB:-}" ]; then
  say "cosign verify --key $COSIGN_PUB $IMAGE"
  cosign() { SSL_CERT_FILE=$REGISTRY_CA nsenter --net="$NSPATH" "$(ensure_cosign)" "$@"; }
  cosign verify --key "$COSIGN_PUB" --insecure-ignore-tlog=true "$IMAGE" >/dev/null
  say "cosign verify with another key fails"
  other=$(mktemp -d)
  (cd "$other" && COSIGN_PASSWORD=x cosign generate-key-pair >/dev/null 2>&1) && [ -f "$other/cosign.pub" ] ||
    { echo "cosign generate-key-pair made no key pair in $other" >&2; exit 1; }
  if cosign verify --key "$other/cosign.pub" --insecure-ignore-tlog=true "$IMAGE" >/dev/null 2>&1; then
    echo "cosign verify accepted $IMAGE with a key that never signed it" >&2; exit 1
  fi
  rm -rf "$other"
fi

say "removing the installed PaV"
uninstall

say "helm install oci://$REGISTRY/charts/pav --version $CHART_VERSION (image $IMAGE)"
forget_images
values=$(mktemp)
trap 'rm -f "$values"' EXIT
printf 'image: {repository: %s, digest: "%s"}\n' "${IMAGE%@*}" "${IMAGE#*@}" > "$values"
pool_values >> "$values"
cat "$values"
helm install pav "oci://$REGISTRY/charts/pav" --version "$CHART_VERSION" --ca-file "$REGISTRY_CA" \
  -n pav --create-namespace -f "$values" --wait --timeout=5m >/dev/null
helm list -n pav
check_pulled "$IMAGE"
check_version "$VERSION"
say "hello-world (image $EXAMPLE_IMAGE)"
EXAMPLE_IMAGE=$EXAMPLE_IMAGE KUBECTL=$KUBECTL hack/hello-world.sh
say "helm uninstall"
uninstall

say "the pinned manifest $REL/deployment.yaml, its image rewritten to $IMAGE"
forget_images
sed "s|image: \"\{0,1\}pav:$VERSION\"\{0,1\}$|image: $IMAGE|" "$REL/deployment.yaml" > "$REL/pushed/deployment.yaml"
grep -q "image: $IMAGE$" "$REL/pushed/deployment.yaml" || { echo "no image to rewrite in $REL/deployment.yaml" >&2; exit 1; }
k apply --server-side --force-conflicts -f "$REL/pavprovisioners.crd.yaml"
k apply -f "$REL/pushed/deployment.yaml"
IMAGE=$IMAGE hack/cluster/kubelet-root-pool.sh
k -n pav rollout status deployment/controller-agent --timeout=180s
k -n pav rollout status daemonset/node-agent --timeout=180s
check_pulled "$IMAGE"
check_version "$VERSION"
say "hello-world (image $EXAMPLE_IMAGE)"
EXAMPLE_IMAGE=$EXAMPLE_IMAGE KUBECTL=$KUBECTL hack/hello-world.sh
say "release $VERSION installed from $REGISTRY with Helm and with the pinned manifest in ${SECONDS}s"
