#!/bin/bash
# deploy.sh - install deployment.yaml with $IMAGE (default pav:latest) using $KUBECTL (default
# the local cluster's), restart PaV so it runs that image even under the same tag, and wait
# until it is rolled out. Used by `make deploy-only`, on the local cluster or any other.
#
# The API server authenticates to PaV's admission webhook: with $WEBHOOK_CLIENT_CA (default,
# with the local cluster's kubectl: the CA of the client certificate hack/cluster/up.sh gives
# its API server), ConfigMap pav/pav-webhook-client-ca holds it, and the webhook answers only
# callers with a certificate from it (deployment.yaml mounts that optional ConfigMap).
#
# An uninstall cut short leaves the CRD terminating: it refuses every new PavProvisioner until
# its last one is gone, and applying deployment.yaml over it changes nothing. So this first
# lets that deletion finish (PaV's controller, started by the first apply, finalizes the
# PavProvisioners), then applies again, which creates the CRD afresh.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
KUBECTL=${KUBECTL:-$REPO/hack/cluster/kubectl}
IMAGE=${IMAGE:-pav:latest}
CRD=pavprovisioners.pav.albertofaria.github.io
k() { $KUBECTL "$@"; }
apply() { sed "s|image: pav:latest|image: $IMAGE|" "$REPO/deployment.yaml" | k apply -f -; }
# (make passes KUBECTL relative to the repository)
if [ -z "${WEBHOOK_CLIENT_CA+set}" ] && [ "$(realpath -m "$KUBECTL")" = "$REPO/hack/cluster/kubectl" ]; then
  . "$REPO/hack/cluster/lib.sh"   # the local cluster's PKI (PAV_CLUSTER: which one)
  [ ! -f "$PKI/webhook-client-ca.crt" ] || WEBHOOK_CLIENT_CA=$PKI/webhook-client-ca.crt
fi

apply
if [ -n "$(k get crd "$CRD" -o jsonpath='{.metadata.deletionTimestamp}' --ignore-not-found)" ]; then
  echo "CRD $CRD is being deleted (an earlier uninstall); waiting for it to go"
  if ! k wait --for=delete "crd/$CRD" --timeout=180s; then
    echo "CRD $CRD is still being deleted: these PavProvisioners wait for their volumes to go:" >&2
    k get pavprovisioners,pv -o wide >&2 || true
    exit 1
  fi
  apply
fi
if [ -n "${WEBHOOK_CLIENT_CA:-}" ]; then
  k -n pav create configmap pav-webhook-client-ca --from-file=ca.crt="$WEBHOOK_CLIENT_CA" --dry-run=client -o yaml | k apply -f -
fi
# same tag, new image: restart so the pods run what was just loaded
k -n pav rollout restart deployment/controller-agent daemonset/node-agent
k -n pav rollout status deployment/controller-agent --timeout=180s
k -n pav rollout status daemonset/node-agent --timeout=180s
