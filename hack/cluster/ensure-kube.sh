#!/bin/bash
# ensure-kube.sh - build the multi-call Kubernetes binary into $PAV_CACHE/kube-<version>/ unless
# an up-to-date one is there, and print its directory. Used by cluster-up and integration tests.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
ensure_kube >&2
echo "$KUBE_DIR"
