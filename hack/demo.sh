#!/usr/bin/env bash
# make demo: bring the local cluster up if none is reachable, build and install
# PaV, run the hello-world example end to end, print what the client pod read,
# and clean up after itself (PaV stays installed).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
KUBECTL=${KUBECTL:-$ROOT/hack/cluster/kubectl}
NS=pav-demo
EX=examples/hello-world

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

cleanup() {
  say "cleaning up"
  local pv
  pv=$(k -n "$NS" get pvc hello-world -o jsonpath='{.spec.volumeName}' 2>/dev/null || true)
  k delete namespace "$NS" --ignore-not-found --wait=true --timeout=120s >/dev/null || true
  # The PV goes once PaV has deleted the volume; only then can the provisioner go.
  [ -z "$pv" ] || k wait --for=delete "pv/$pv" --timeout=120s >/dev/null 2>&1 || true
  k delete -f "$EX/usage.yaml" --ignore-not-found --wait=true --timeout=60s >/dev/null 2>&1 || true
  k delete -f "$EX/provisioner.yaml" --ignore-not-found --wait=true --timeout=120s >/dev/null || true
}
trap cleanup EXIT

say "creating the hello-world PavProvisioner"
k apply -f "$EX/provisioner.yaml"

say "creating the StorageClass, claim and client pod in namespace $NS"
k create namespace "$NS" --dry-run=client -o yaml | k apply -f -
k -n "$NS" apply -f "$EX/usage.yaml"

say "waiting for the client pod to read the volume"
start=$(date +%s)
while :; do
  phase=$(k -n "$NS" get pod hello-world-client -o jsonpath='{.status.phase}' 2>/dev/null || true)
  case "$phase" in
    Succeeded) break ;;
    Failed) echo "client pod failed"; k -n "$NS" describe pod hello-world-client; exit 1 ;;
  esac
  if (( $(date +%s) - start > 180 )); then
    echo "timed out waiting for the client pod; what PaV and Kubernetes said:"
    k -n "$NS" describe pvc hello-world || true
    k -n "$NS" describe pod hello-world-client || true
    exit 1
  fi
  sleep 1
done

say "the client pod read:"
k -n "$NS" logs hello-world-client
