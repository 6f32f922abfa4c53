#!/bin/bash
# load-images.sh [NAME|FILE.tar]... - import OCI image tarballs into the containerd of every node
# of the cluster (namespace k8s.io, where the kubelet looks). NAME is a tarball in $IMAGES_DIR
# without .tar (pause, test, pav, or one made by hack/images/debimage); no argument imports them
# all.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
IMAGES_DIR=${IMAGES_DIR:-$(cd "$HACK_CLUSTER/../.." && pwd)/_output/images}
nodes=$(cluster_nodes)
[ -n "$nodes" ] || { echo "no cluster ($NODES_TSV): make cluster-up" >&2; exit 1; }
for i in $nodes; do
  node_vars "$i"
  ctr --address "$NODE_SOCK" version >/dev/null 2>&1 || { echo "containerd of $NODE_NAME is not running: make cluster-up" >&2; exit 1; }
done
files=()
if [ $# = 0 ]; then
  files=("$IMAGES_DIR"/*.tar)
else
  for a in "$@"; do case $a in *.tar) files+=("$a") ;; *) files+=("$IMAGES_DIR/$a.tar") ;; esac; done
fi
for f in "${files[@]}"; do
  [ -f "$f" ] || { echo "no such image tarball: $f (make images)" >&2; exit 1; }
done
# refs FILE: the "name digest" of each image in an OCI tarball (its index.json)
refs() {
  tar -xOf "$1" index.json | python3 -c 'import json, sys
for m in json.load(sys.stdin).get("manifests", []):
    print(m.get("annotations", {}).get("io.containerd.image.name", "?"), m["digest"])'
}
# One node after the other: importing is CPU-bound (unpacking), and on 2 cores three nodes in
# parallel took as long (52 s against 49 s for the images of `make images examples-images`).
# A tarball whose images the node has already, by name and digest, is not imported again
# (the conformance suite loads its images once per example).
declare -A refs_of
for f in "${files[@]}"; do refs_of[$f]=$(refs "$f" 2>/dev/null || true); done
for i in $nodes; do
  node_vars "$i"
  have=$(ctr --address "$NODE_SOCK" -n k8s.io images ls | awk 'NR > 1 { print $1, $3 }')
  for f in "${files[@]}"; do
    missing=$(printf '%s\n' "${refs_of[$f]}" | grep -vxF -f <(printf '%s\n' "$have") || true)
    if [ -n "${refs_of[$f]}" ] && [ -z "$missing" ]; then  # (no refs read: imported)
      echo "  $NODE_NAME: $(basename "$f"): already imported"
      continue
    fi
    ctr --address "$NODE_SOCK" -n k8s.io images import --platform linux/amd64 "$f" | sed "s/^/  $NODE_NAME: /"
  done
done
