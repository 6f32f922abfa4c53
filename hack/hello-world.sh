#!/usr/bin/env bash
# hello-world.sh - run examples/hello-world end to end on the cluster $KUBECTL talks to (default
# the local cluster's) with PaV already installed: the provisioner, a claim and a client pod in
# namespace pav-demo; print what the client pod read from the volume; clean up after itself
# (PaV stays installed). Exits non-zero if the client pod does not read the greeting. Used by
# `make demo` and `make test-release`. EXAMPLE_IMAGE: the image of the staging and client pods
# instead of the example's busybox:latest (test-release: the registry's, by digest).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
KUBECTL=${KUBECTL:-$ROOT/hack/cluster/kubectl}
NS=pav-demo
EX=examples/hello-world
# example FILE: FILE with busybox:latest replaced by $EXAMPLE_IMAGE
example() { sed "s|image: busybox:latest$|image: ${EXAMPLE_IMAGE:-busybox:latest}|" "$1"; }

say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
k() { "$KUBECTL" "$@"; }

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
example "$EX/provisioner.yaml" | k apply -f -

say "creating the StorageClass, claim and client pod in namespace $NS"
k create namespace "$NS" --dry-run=client -o yaml | k apply -f -
example "$EX/usage.yaml" | k -n "$NS" apply -f -

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

k -n "$NS" logs hello-world-client | grep -q . || { echo "the client pod read nothing" >&2; exit 1; }
