#!/bin/bash
# upstream-tests.sh [TEST]... - run the original PaV's system tests (test/upstream/system-tests,
# copied unchanged from albertofaria/pav) against PaV-Go on the local cluster.
#
# As the original's tests/run-system-tests.bash does, each test gets PaV freshly installed
# (`kubectl create -f deployment.yaml`), runs with errexit in the test's directory, and must
# leave PaV uninstallable (CRD first, then deployment.yaml, each within 60 s). The original
# makes a new k3d cluster per test; here the local cluster is shared, so PaV must not be
# installed when this starts (the Makefile's test-upstream target uninstalls it first) and a
# failed test's objects are deleted before the next test. Default: every test (*.bash, plus
# mount-three-volumes.sh, which the original's `all` skips only because of its extension).
# PAV_REPO_ROOT is this repository: create-example-provisioners.bash creates our examples.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
. "$REPO/hack/cluster/lib.sh"
IMAGE=${IMAGE:-pav:latest}
TESTS_DIR=$REPO/test/upstream/system-tests
[ $# -gt 0 ] || set -- "$TESTS_DIR"/*.bash "$TESTS_DIR"/*.sh

# deletion.bash uses mikefarah's yq (v4 syntax; lib.sh's ensure_yq)
YQ=$(ensure_yq)
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
# (a wrapper, not a symlink: hack/cluster/kubectl finds lib.sh next to itself)
# deletion.bash ends with `kubectl delete pav my-provisioner --timeout=60s`, "only here to wait
# until actually deleted": against PaV-Go the provisioner can be gone before that call (its last
# volume's deletion pod done within 2 s of the claim's deletion), which the original's slower
# PaV never was, and kubectl then fails with NotFound. So a PavProvisioner's delete takes
# --ignore-not-found: it still waits, up to its timeout, for one that exists.
cat > "$bin/kubectl" <<EOF
#!/bin/sh
case "\$1 \$2" in "delete pav"|"delete pavprovisioner"|"delete pavprovisioners") set -- "\$@" --ignore-not-found ;; esac
exec $(printf %q "$REPO/hack/cluster/kubectl") "\$@"
EOF
chmod +x "$bin/kubectl"
ln -s "$YQ" "$bin/yq"
export PATH=$bin:$PATH PAV_REPO_ROOT=$REPO IMAGE

if [ -z "${PAV_E2E_LOCKED:-}" ]; then
  echo "waiting for $E2E_LOCK"
  exec 9>"$E2E_LOCK"
  flock 9
fi
if kubectl get crd pavprovisioners.pav.albertofaria.github.io >/dev/null 2>&1 || kubectl get namespace pav >/dev/null 2>&1; then
  echo "PaV is installed; uninstall it first (make undeploy)" >&2
  exit 1
fi

# The helpers the original's runner exports to its tests, the same but for the image.
pav_log() { printf -- "--- [%s] %s\n" "$(date +%H:%M:%S)" "$(printf "$@")"; }
pav_install() (
  set -o errexit -o nounset +o xtrace
  pav_log "Installing PaV..."
  sed "s|image: pav:latest|image: $IMAGE|" "$PAV_REPO_ROOT/deployment.yaml" | kubectl create -f -
  pav_log "Waiting for the controller agent to come up..."
  kubectl --namespace=pav rollout status deployment/controller-agent --timeout=60s
)
pav_uninstall() (
  set -o errexit -o nounset +o xtrace
  pav_log "Uninstalling PaV..."
  kubectl delete --ignore-not-found --timeout=60s crd pavprovisioners.pav.albertofaria.github.io
  kubectl delete --ignore-not-found --timeout=60s -f "$PAV_REPO_ROOT/deployment.yaml"
)
pav_poll() (
  set -o errexit -o nounset +o xtrace
  for ((__poll_index = 1; __poll_index < "$2"; ++__poll_index)); do
    if eval "${*:3}"; then return 0; fi
    sleep "$1"
  done
  eval "${*:3}"
)
export -f pav_log pav_install pav_uninstall pav_poll

# What a test may leave behind: the original runs each test in a new cluster, so its
# tests leave objects (deletion.bash ends with an unprovisioned claim my-pvc-2) that would
# meet the next test's provisioner of the same name here. After a passed test PaV is
# uninstalled already: what it left must go without it (finalizers of a crashed test too).
cleanup_objects() {
  local objects=(pod/my-pod pvc/my-pvc pvc/my-pvc-1 pvc/my-pvc-2 pvc/my-pvc-3 pv/my-pv sc/my-sc)
  kubectl delete --ignore-not-found --wait=false "${objects[@]}" || true
  if ! kubectl wait --for=delete --timeout=120s "${objects[@]}" 2>/dev/null; then
    for o in "${objects[@]}"; do
      kubectl patch --type=merge -p '{"metadata":{"finalizers":null}}' "$o" 2>/dev/null || true
    done
    kubectl wait --for=delete --timeout=60s "${objects[@]}" 2>/dev/null || true
  fi
}

passed=() failed=()
for t in "$@"; do
  name=$(basename "$t")
  pav_log "Running upstream system test $name"
  start=$SECONDS
  # Not inside `if`: bash ignores errexit in a condition, subshells included.
  set +o errexit
  (
    set -o errexit -o pipefail -o nounset -o xtrace
    pav_install
    cd "$(dirname "$t")"
    # shellcheck disable=SC1090
    source "$t"
  )
  rc=$?
  set -o errexit
  if [ "$rc" -eq 0 ] && pav_uninstall; then
    passed+=("$name ($((SECONDS - start)) s)")
    cleanup_objects
  else
    failed+=("$name")
    pav_log "FAILED: $name; events in namespace default:"
    kubectl get events --sort-by=.lastTimestamp | tail -20 || true
    cleanup_objects
    pav_uninstall || true
  fi
done
pav_log "passed: ${passed[*]:-none}"
if [ ${#failed[@]} -gt 0 ]; then
  pav_log "failed: ${failed[*]}"
  exit 1
fi
echo "upstream system tests: PASS"
