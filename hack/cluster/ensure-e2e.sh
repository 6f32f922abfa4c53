#!/bin/bash
# ensure-e2e.sh - build Kubernetes' e2e.test, agnhost and the ginkgo CLI (of the running cluster's
# release, else KUBE_VERSION's, else the newest) into $PAV_CACHE/e2e-<version>/ unless up-to-date
# ones are there, and print that directory. Used by `make test-conformance` (conformance.sh).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
use_running_kube_version
ensure_e2e >&2
echo "$E2E_DIR"
