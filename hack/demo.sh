#!/usr/bin/env bash
# make demo: bring the local cluster up if none is reachable, build and install
# PaV, run the hello-world example end to end, print what the client pod read,
# and clean up after itself (PaV stays installed).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
KUBECTL=${KUBECTL:-$ROOT/hack/cluster/kubectl}

say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
k() { "$KUBECTL" "$@"; }

if ! k get --raw /readyz >/dev/null 2>&1; then
  say "no cluster reachable: bringing the local cluster up (make cluster-up)"
  make cluster-up
fi

say "building PaV's image (make images)"
make images

# Only one e2e run or PaV (re)install may touch the cluster at a time.
say "waiting for the cluster lock (/tmp/pav-e2e.lock)"
exec 9> /tmp/pav-e2e.lock
flock 9
export PAV_E2E_LOCKED=1

say "installing PaV (make cluster-load deploy-only)"
make cluster-load deploy-only

say "running the hello-world example (hack/hello-world.sh)"
KUBECTL=$KUBECTL hack/hello-world.sh
