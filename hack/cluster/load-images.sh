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
# One node after the other: importing is CPU-bound (unpacking), and on 2 cores three nodes in
# parallel took as long (52 s against 49 s for the images of `make images examples-images`).
for i in $nodes; do
  node_vars "$i"
  for f in "${files[@]}"; do
    ctr --address "$NODE_SOCK" -n k8s.io images import --platform linux/amd64 "$f" | sed "s/^/  $NODE_NAME: /"
  done
done
