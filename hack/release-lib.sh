# release-lib.sh - what the release tests share (sourced by hack/release-test.sh and
# hack/upgrade-test.sh, after hack/cluster/lib.sh): kubectl and helm on the local cluster, the
# pushed image of a release, and the steps of installing and removing PaV as docs/install.md says.
KUBECTL=${KUBECTL:-$REPO/hack/cluster/kubectl}
k() { "$KUBECTL" "$@"; }
helm() { nsenter --net="$NSPATH" env KUBECONFIG="$KUBECONFIG_ADMIN" "$HELM" "$@"; }
say() { printf '\n==> [%ss] %s\n' "$SECONDS" "$*"; }
HELM=$(hack/ensure-helm.sh)
CRD=pavprovisioners.pav.albertofaria.github.io

# pushed_image REL NAME: what release-push.sh pushed of release directory REL under NAME ("pav",
# "busybox"): REGISTRY/...@sha256:..., or fail.
pushed_image() {
  local pushed=$1/pushed/${REGISTRY//[:\/]/_} ref
  [ -f "$pushed" ] || { echo "$1 was not pushed to $REGISTRY: make release-push EXAMPLES=1" >&2; return 1; }
  ref=$(sed -n "s/^$2 //p" "$pushed")
  [ -n "$ref" ] || { echo "$pushed lacks $2: make release-push EXAMPLES=1" >&2; return 1; }
  echo "$ref"
}
# pool_values: the Helm values of the node with k0s's kubelet root, if the cluster has one.
pool_values() {
  if [ -n "$(k get nodes -l "$ALT_ROOT_LABEL" -o name)" ]; then
    printf 'nodePools:\n  - {name: %s, kubeletDir: %s, nodeSelector: {%s: %s}}\n' \
      "${ALT_ROOT_LABEL#*=}" "$ALT_KUBELET_ROOT" "${ALT_ROOT_LABEL%%=*}" "${ALT_ROOT_LABEL#*=}"
  fi
}
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
# check_pulled IMAGE: every node that runs one of PaV's pods holds $IMAGE (by its registry name),
# which only a pull from the registry can have given it.
check_pulled() {
  local IMAGE=$1 n i
  for n in $(k -n pav get pods -l app.kubernetes.io/name=pav -o jsonpath='{.items[*].spec.nodeName}' | tr ' ' '\n' | sort -u); do
    node_vars "$(node_number "$n")"
    ctr --address "$NODE_SOCK" -n k8s.io images ls -q "name==$IMAGE" | grep -qx "$IMAGE" ||
      { echo "$n runs PaV but has not pulled $IMAGE" >&2; exit 1; }
    echo "  $n pulled $IMAGE"
  done
}
# check_version VERSION: the controller runs VERSION.
check_version() {
  local VERSION=$1 running
  running=$(k -n pav exec deployment/controller-agent -- /pav version -o json)
  grep -q "\"version\": *\"$VERSION\"" <<<"$running" || { echo "PaV runs another version than $VERSION: $running" >&2; exit 1; }
  echo "  PaV runs $VERSION"
}
# uninstall: PaV as installed by the release in $REL or an earlier one, as docs/install.md says: the CRD first, while PaV runs to delete the provisioners'
# volumes, then the rest (helm uninstall keeps the CRD).
uninstall() {
  k delete --ignore-not-found --timeout=180s crd "$CRD"
  if helm status pav -n pav >/dev/null 2>&1; then helm uninstall pav -n pav --wait --timeout=3m; fi
  k delete --ignore-not-found --timeout=180s -f "$REL/deployment.yaml"
  k delete --ignore-not-found --timeout=180s namespace pav
}

