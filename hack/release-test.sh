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
KUBECTL=${KUBECTL:-$REPO/hack/cluster/kubectl}
k() { "$KUBECTL" "$@"; }
helm() { nsenter --net="$NSPATH" env KUBECONFIG="$KUBECONFIG_ADMIN" "$HELM" "$@"; }
say() { printf '\n==> [%ss] %s\n' "$SECONDS" "$*"; }
HELM=$(hack/ensure-helm.sh)
CRD=pavprovisioners.pav.albertofaria.github.io

[ -f "$REL/SHA256SUMS" ] || { echo "no release in $REL: make release VERSION=$VERSION" >&2; exit 1; }
pushed=$REL/pushed/${REGISTRY//[:\/]/_}
[ -f "$pushed" ] || { echo "release $VERSION was not pushed to $REGISTRY: make release-push VERSION=$VERSION EXAMPLES=1" >&2; exit 1; }
IMAGE=$(sed -n 's/^pav //p' "$pushed")              # REGISTRY/pav@sha256:...
EXAMPLE_IMAGE=$(sed -n 's/^busybox //p' "$pushed")  # REGISTRY/examples/busybox@sha256:...
[ -n "$IMAGE" ] && [ -n "$EXAMPLE_IMAGE" ] || { echo "$pushed lacks the image or hello-world's image: make release-push VERSION=$VERSION EXAMPLES=1" >&2; exit 1; }
say "checksums"
(cd "$REL" && sha256sum -c SHA256SUMS)
if [ -n "${COSIGN_PUB:-}" ]; then
  say "cosign verify --key $COSIGN_PUB $IMAGE"
  SSL_CERT_FILE=$REGISTRY_CA nsenter --net="$NSPATH" "$(ensure_cosign)" verify --key "$COSIGN_PUB" --insecure-ignore-tlog=true "$IMAGE" >/dev/null
fi

# forget_images: every node removes every image name in the registry (from an earlier run), so
# that the names used next must be pulled from it (blobs a node holds under other names, e.g.
# busybox:latest that the other tests use, are not fetched again, but the pull resolves the
# name in the registry). Names outside the registry are other tests' images: they stay.
forget_images() {
  local i refs
  for i in $(cluster_nodes); do
    node_vars "$i"
    refs=$(ctr --address "$NODE_SOCK" -n k8s.io images ls -q | grep -F "$REGISTRY/" || true)
    [ -z "$refs" ] || ctr --address "$NODE_SOCK" -n k8s.io images rm $refs >/dev/null
  done
}
# check_pulled: every node that runs one of PaV's pods holds $IMAGE (by its registry name),
# which only a pull from the registry can have given it.
check_pulled() {
  local n i
  for n in $(k -n pav get pods -l app.kubernetes.io/name=pav -o jsonpath='{.items[*].spec.nodeName}' | tr ' ' '\n' | sort -u); do
    node_vars "$(node_number "$n")"
    ctr --address "$NODE_SOCK" -n k8s.io images ls -q "name==$IMAGE" | grep -qx "$IMAGE" ||
      { echo "$n runs PaV but has not pulled $IMAGE" >&2; exit 1; }
    echo "  $n pulled $IMAGE"
  done
}
check_version() {
  local running
  running=$(k -n pav exec deployment/controller-agent -- /pav version -o json)
  grep -q "\"version\": *\"$VERSION\"" <<<"$running" || { echo "PaV runs another version than $VERSION: $running" >&2; exit 1; }
  echo "  PaV runs $VERSION"
}
# uninstall: as docs/install.md says: the CRD first, while PaV runs to delete the provisioners'
# volumes, then the rest (helm uninstall keeps the CRD).
uninstall() {
  k delete --ignore-not-found --timeout=180s crd "$CRD"
  if helm status pav -n pav >/dev/null 2>&1; then helm uninstall pav -n pav --wait --timeout=3m; fi
  k delete --ignore-not-found --timeout=180s -f "$REL/deployment.yaml"
  k delete --ignore-not-found --timeout=180s namespace pav
}

say "removing the installed PaV"
uninstall

say "helm install oci://$REGISTRY/charts/pav --version $CHART_VERSION (image $IMAGE)"
forget_images
values=$(mktemp)
trap 'rm -f "$values"' EXIT
printf 'image: {repository: %s, digest: "%s"}\n' "${IMAGE%@*}" "${IMAGE#*@}" > "$values"
if [ -n "$(k get nodes -l "$ALT_ROOT_LABEL" -o name)" ]; then   # the node with k0s's kubelet root
  printf 'nodePools:\n  - {name: %s, kubeletDir: %s, nodeSelector: {%s: %s}}\n' \
    "${ALT_ROOT_LABEL#*=}" "$ALT_KUBELET_ROOT" "${ALT_ROOT_LABEL%%=*}" "${ALT_ROOT_LABEL#*=}" >> "$values"
fi
cat "$values"
helm install pav "oci://$REGISTRY/charts/pav" --version "$CHART_VERSION" --ca-file "$REGISTRY_CA" \
  -n pav --create-namespace -f "$values" --wait --timeout=5m >/dev/null
helm list -n pav
check_pulled
check_version
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
check_pulled
check_version
say "hello-world (image $EXAMPLE_IMAGE)"
EXAMPLE_IMAGE=$EXAMPLE_IMAGE KUBECTL=$KUBECTL hack/hello-world.sh
say "release $VERSION installed from $REGISTRY with Helm and with the pinned manifest in ${SECONDS}s"
