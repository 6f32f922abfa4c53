#!/bin/bash
# load-images.sh [NAME|FILE.tar]... - import OCI image tarballs into the cluster's containerd
# (namespace k8s.io, where the kubelet looks). NAME is a tarball in $IMAGES_DIR without .tar
# (pause, test, pav, or one made by hack/images/debimage); no argument imports them all.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
IMAGES_DIR=${IMAGES_DIR:-$(cd "$HACK_CLUSTER/../.." && pwd)/_output/images}
ctr --address "$SOCK" version >/dev/null 2>&1 || { echo "containerd of the cluster is not running: make cluster-up" >&2; exit 1; }
files=()
if [ $# = 0 ]; then
  files=("$IMAGES_DIR"/*.tar)
else
  for a in "$@"; do case $a in *.tar) files+=("$a") ;; *) files+=("$IMAGES_DIR/$a.tar") ;; esac; done
fi
for f in "${files[@]}"; do
  [ -f "$f" ] || { echo "no such image tarball: $f (make images)" >&2; exit 1; }
  ctr --address "$SOCK" -n k8s.io images import --platform linux/amd64 "$f" | sed 's/^/  /'
done
