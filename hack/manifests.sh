#!/usr/bin/env bash
# manifests.sh [FILE] - write deployment.yaml (or FILE), PaV's plain manifest: the Helm chart charts/pav
# ($CHART: another copy of it, e.g. hack/release.sh's with the release's appVersion) rendered by the real helm (hack/ensure-helm.sh) with its default values, its CRD
# (charts/pav/crds) and its Namespace (namespace.create=true), in helm's install order
# (the CRD, then the Namespace, then the rest), so `kubectl create -f deployment.yaml`
# works. `make manifests` and `make generate` run this; `make verify-generated` checks
# that deployment.yaml is what it writes.
set -euo pipefail
out=${1:+$(realpath -m "$1")}
cd "$(dirname "$0")/.."
out=${out:-deployment.yaml}
chart=${CHART:-charts/pav}
helm=$(hack/ensure-helm.sh)
{
  cat <<'HEADER'
# PaV (Pods-as-Volumes). Install: kubectl create -f deployment.yaml
# Uninstall: kubectl delete crd pavprovisioners.pav.albertofaria.github.io, then
# kubectl delete --ignore-not-found -f deployment.yaml
#
# Generated from the Helm chart charts/pav by `make manifests` (helm template
# with the default values, the CRD and namespace.create=true): do not edit,
# change the chart.
HEADER
  "$helm" template pav "$chart" --namespace pav --include-crds --set namespace.create=true
} > "$out.tmp"
mv "$out.tmp" "$out"
