#!/bin/bash
# ensure-helm.sh - print the path of the helm binary the chart is checked and tested with
# (make verify-chart, make test-helm), building it from the Go module proxy into
# $PAV_CACHE/tools/helm-<version> the first time (~8 min on 2 cores with an empty Go cache,
# seconds after). Built as helm's own Makefile builds a release: with its version and the
# Kubernetes version of its client libraries (what `helm template` assumes of a cluster).
set -euo pipefail
HELM_VERSION=v3.22.0
HELM_KUBE_MINOR=37   # helm v3.22.0 uses k8s.io/client-go v0.37.0
PAV_CACHE=${PAV_CACHE:-/var/cache/pav}
d=$PAV_CACHE/tools/helm-$HELM_VERSION
if [ ! -x "$d/helm" ]; then
  echo "building helm $HELM_VERSION into $d" >&2
  mkdir -p "$d"
  ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
  for p in pkg/lint/rules pkg/chartutil; do
    ldflags+=" -X helm.sh/helm/v3/$p.k8sVersionMajor=1 -X helm.sh/helm/v3/$p.k8sVersionMinor=$HELM_KUBE_MINOR"
  done
  tmp=$(mktemp -d "$d/.build.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && GOBIN=$tmp GOFLAGS=-trimpath CGO_ENABLED=0 go install -ldflags "$ldflags" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION") >&2
  mv "$tmp/helm" "$d/helm"
fi
echo "$d/helm"
