#!/usr/bin/env bash
# Generates what is derived from the PavProvisioner Go types (crds/v1alpha1):
# deep copies, the clientset, listers and informers (crds/generated), with
# k8s.io/code-generator; and the CRD (crds/pavprovisioners.yaml, and its copy
# in deployment.yaml), with controller-gen. The generators are Go tools pinned
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
