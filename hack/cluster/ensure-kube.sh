#!/bin/bash
# ensure-kube.sh - build the multi-call Kubernetes binary into $PAV_CACHE/kube-<version>/ unless
# an up-to-date one is there, install the host packages (etcd, ...), and print its directory.
# Used by `make test-integration`.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
ensure_host_pkgs >&2
ensure_kube >&2
echo "$KUBE_DIR"
