#!/usr/bin/env bash
# Generates what is derived from the PavProvisioner Go types (crds/v1alpha1):
# deep copies, the clientset, listers and informers (crds/generated), with
# k8s.io/code-generator; and the CRD (crds/pavprovisioners.yaml, and its copies
# in deployment.yaml and the Helm chart's charts/pav/crds/), with controller-gen. The generators are Go tools pinned
# in hack/tools.mod. `make generate` runs this; `make verify-generated` checks
# that nothing it would write differs from what is committed.
set -euo pipefail
cd "$(dirname "$0")/.."

module=github.com/albertofaria/pav
tool() { go tool -modfile=hack/tools.mod "$@"; }
boilerplate=hack/boilerplate.go.txt

tool deepcopy-gen --go-header-file "$boilerplate" --output-file zz_generated.deepcopy.go ./crds/v1alpha1

rm -rf crds/generated
tool client-gen --go-header-file "$boilerplate" --clientset-name versioned \
  --input-base "" --input "$module/crds/v1alpha1" \
  --output-dir crds/generated/clientset --output-pkg "$module/crds/generated/clientset"
tool lister-gen --go-header-file "$boilerplate" \
  --output-dir crds/generated/listers --output-pkg "$module/crds/generated/listers" ./crds/v1alpha1
tool informer-gen --go-header-file "$boilerplate" \
  --versioned-clientset-package "$module/crds/generated/clientset/versioned" \
  --listers-package "$module/crds/generated/listers" \
  --output-dir crds/generated/informers --output-pkg "$module/crds/generated/informers" ./crds/v1alpha1

# The CRD, with a header, and its copies: the Helm chart's, and the first document of deployment.yaml.
crd=crds/pavprovisioners.yaml
{
  cat <<'HEADER'
# The PavProvisioner custom resource, generated from crds/v1alpha1 by
# controller-gen (make generate): do not edit. Embedded in the pav binary
# (package crds) and copied into deployment.yaml.
#
# Every field under spec except provisioningModes may be a Jinja template, and
# a template may evaluate to YAML of any type ({% set yaml = true %}), so the
# schema declares each known field of a phase section as "any value"
# (x-kubernetes-preserve-unknown-fields without a type), and a section itself
# may be one template string. The semantic checks (templates compile, literals
# well typed, pod templates valid) are done by PaV's admission webhook and
# controller with templating.Validate; the rules here hold even when no PaV
# process runs.
HEADER
  tool controller-gen crd paths=./crds/v1alpha1 output:crd:stdout | sed '1{/^---$/d}'
} > "$crd.tmp"
mv "$crd.tmp" "$crd"
cp "$crd" charts/pav/crds/pavprovisioners.yaml
awk -v crd="$crd" '
  /^---$/ { n++ }
  n == 1 && !done { print; while ((getline line < crd) > 0) print line; done = 1; next }
  n == 1 { next }
  { print }
' deployment.yaml > deployment.yaml.tmp
mv deployment.yaml.tmp deployment.yaml
