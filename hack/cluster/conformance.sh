#!/bin/bash
# conformance.sh [EXAMPLE]... - Kubernetes' storage conformance suite (the "External Storage
# [Driver: ...]" tests of k8s.io/kubernetes/test/e2e/storage/external, as CSI drivers run it)
# against examples/EXAMPLE/testdriver.yaml on the local cluster, one example after the other
# (default: every example with a testdriver.yaml). Used by `make test-conformance`, which first
# builds the images (make images examples-images, hack/images/build.sh conformance).
#
# e2e.test, agnhost and the ginkgo CLI of the cluster's Kubernetes release come from
# ensure-e2e.sh (built once into $PAV_CACHE). For each example, holding /tmp/pav-e2e.lock
# (unless PAV_E2E_LOCKED=1 says the caller holds it; released between examples): load the
# images, install PaV (deploy-only), the example's provisioner (and for sshfs its SSH server
# and key), run the suite inside the cluster's netns in CONFORMANCE_PROCS parallel ginkgo
# processes (default 3), uninstall the example. Results: $OUT/<example>/junit.xml and the
# ginkgo log, and $OUT/results.md (hack/tools/conformancereport), OUT=_output/conformance.
#
# CONFORMANCE_FOCUS (default External.Storage) and CONFORMANCE_SKIP (added to the skips below)
# narrow the run (`make test-conformance-quick`: CONFORMANCE_QUICK_FOCUS of the Makefile).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
. "$REPO/hack/cluster/lib.sh"
use_running_kube_version
cd "$REPO"
[ $# -gt 0 ] || set -- $(ls examples/*/testdriver.yaml | cut -d/ -f2)
OUT=${CONFORMANCE_OUT:-$REPO/_output/conformance}
IMAGES=${IMAGES_DIR:-$REPO/_output/images}
E2E_IMAGES=${CONFORMANCE_IMAGES_DIR:-$REPO/_output/conformance/images}
FOCUS=${CONFORMANCE_FOCUS:-External.Storage}
PROCS=${CONFORMANCE_PROCS:-3}
TIMEOUT=${CONFORMANCE_TIMEOUT:-2h}   # per example (ginkgo --timeout): what has not run by then is reported so
E2E=$("$HACK_CLUSTER/ensure-e2e.sh")
k() { "$HACK_CLUSTER/kubectl" "$@"; }

# Skipped for every driver, by name, each for a reason outside PaV (regular expressions on the
# full test name; the whole list is one -ginkgo.skip):
SKIP=(
  # They stop kubelet, restart nodes or need the whole cluster: not beside other tests.
  'Disruptive' 'Serial'
  # Its hostexec pod enters the node's mount namespace with nsenter through /proc/1, which this
  # machine's sandbox refuses ("can't open '/rootfs/proc/1/ns/mnt': Permission denied").
  'volumeMode should not mount / map unused volumes in a pod'
)
[ -z "${CONFORMANCE_SKIP:-}" ] || SKIP+=("$CONFORMANCE_SKIP")

# per-example settings: the images its pods run, and what the suite must skip for it besides
example_images() {
  case $1 in
    loop-block) echo pav-example-loop-latest ;;
    sshfs) echo pav-example-sshfs-latest pav-example-sshd-latest ;;
  esac
}
example_skip() {
  case $1 in
    # Block volumes only (its testdriver.yaml): the suite's patterns of Filesystem volumes (the
    # snapshot suite's write files) are skipped, and the block pattern's test that pairs a Block
    # volume with a Filesystem one (which loop-block refuses, as it says).
    loop-block) echo '\[Testpattern: [^]]*(default fs|filesystem volmode| Snapshot )|multiVolume should access to two volumes with different volume mode' ;;
  esac
}

# example_pinned EXAMPLE: whether the suite must run the example's client pods on one node: its
# snapshots stay on the volume's node, and the snapshot suite, unlike the clone tests, does not
# keep a restored claim's pod on the snapshot's node (the scheduler cannot know it). The in-tree
# hostpath driver's suite pins its pods to one node for the same reason (ClientNodeName).
example_pinned() {
  case $1 in host-directory|loop-block) return 0 ;; esac
  return 1
}

# testdriver EXAMPLE DIR: the testdriver file to run, with ClientNodeName (a Ready node without
# taints) added for a pinned example
testdriver() {
  local ex=$1 dir=$2 node
  if ! example_pinned "$ex"; then echo "$REPO/examples/$ex/testdriver.yaml"; return; fi
  node=$(k get nodes -o jsonpath='{range .items[*]}{.metadata.name}{"\t"}{.spec.taints}{"\t"}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' |
    awk -F'\t' '$2 == "" && $3 == "True" { print $1; exit }')
  [ -n "$node" ] || { echo "no Ready node without taints to pin $ex's pods to" >&2; exit 1; }
  { cat "$REPO/examples/$ex/testdriver.yaml"; echo "ClientNodeName: $node  # hack/cluster/conformance.sh: pinned (example_pinned)"; } > "$dir/testdriver.yaml"
  echo "$dir/testdriver.yaml"
}

# the lock around one example (the image tag pav:latest and the cluster are shared)
locked() {
  if [ -n "${PAV_E2E_LOCKED:-}" ]; then "$@"; else flock "$E2E_LOCK" env PAV_E2E_LOCKED=1 "$@"; fi
}

install_example() {
  local ex=$1 key
  if [ "$ex" = sshfs ]; then
    # the README's steps: a namespace where PaV's pods may run, a key pair in a Secret, the server
    k delete namespace pav-example-sshfs --ignore-not-found --wait=true --timeout=120s
    k create namespace pav-example-sshfs
    k label namespace pav-example-sshfs pav.albertofaria.github.io/allow-pods=true
    key=$(mktemp -d)
    ssh-keygen -q -t ed25519 -N '' -C pav-sshfs-example -f "$key/sshfs-key"
    k -n pav-example-sshfs create secret generic sshfs-key --type=kubernetes.io/ssh-auth \
      --from-file=ssh-privatekey="$key/sshfs-key" --from-file=ssh-publickey="$key/sshfs-key.pub"
    rm -rf "$key"
    k create -f examples/sshfs/server.yaml
    k -n pav-example-sshfs wait --for=condition=Ready pod/ssh-server --timeout=120s
  fi
  k apply -f "examples/$ex/provisioner.yaml"
  k wait --for=condition=Ready "pavprovisioner/$ex" --timeout=120s
}

uninstall_example() {
  local ex=$1
  # the suite deletes its namespaces, claims and snapshots; the provisioner goes once PaV has
  # deleted their volumes
  k delete pavprovisioner "$ex" --ignore-not-found --wait=true --timeout=300s || true
  [ "$ex" != sshfs ] || k delete namespace pav-example-sshfs --ignore-not-found --wait=true --timeout=120s || true
}

run_example() {
  local ex=$1 dir=$OUT/$1 skip rc=0 imgs i driver
  skip=$(IFS='|'; echo "${SKIP[*]}")
  [ -z "$(example_skip "$ex")" ] || skip="$skip|$(example_skip "$ex")"
  rm -rf "$dir"; mkdir -p "$dir"
  imgs=("$IMAGES/pav.tar" "$IMAGES/test.tar" "$E2E_IMAGES"/e2e-*.tar)
  for i in $(example_images "$ex"); do imgs+=("$IMAGES/$i.tar"); done
  step "conformance $ex: loading images, installing PaV and the example"
  "$HACK_CLUSTER/load-images.sh" "${imgs[@]}" >/dev/null
  make -s deploy-only
  install_example "$ex"
  driver=$(testdriver "$ex" "$dir") || { uninstall_example "$ex"; return 1; }
  step "conformance $ex: focus $FOCUS, skip $skip, $PROCS processes"
  # ginkgo -p runs e2e.test's specs in parallel processes; flags after -- go to e2e.test.
  # -non-blocking-taints: node 3's NoSchedule taint (the k0s kubelet root pool) must not keep the
  # framework waiting for every node to be schedulable.
  "$HACK_CLUSTER/netns-exec" "$E2E/ginkgo" -p --procs="$PROCS" --timeout="$TIMEOUT" \
    --focus="$FOCUS" --skip="$skip" --no-color \
    --junit-report=junit.xml --output-dir="$dir" --silence-skips \
    "$E2E/e2e.test" -- \
    -kubeconfig="$KUBECONFIG_ADMIN" -kubectl-path="$KUBE_DIR/kubectl" -repo-root="$REPO" \
    -storage.testdriver="$driver" \
    -non-blocking-taints="node-role.kubernetes.io/control-plane,${ALT_ROOT_LABEL%%=*}" \
    > "$dir/ginkgo.log" 2>&1 || rc=$?
  tail -n 30 "$dir/ginkgo.log"
  uninstall_example "$ex"
  step "conformance $ex: ginkgo exited $rc"
  return $rc
}

# one example, the lock held: the script runs itself so (flock runs commands, not functions)
if [ "${1:-}" = --one ]; then run_example "$2"; exit; fi
rc=0
for ex in "$@"; do
  [ -f "examples/$ex/testdriver.yaml" ] || { echo "no examples/$ex/testdriver.yaml" >&2; exit 2; }
  locked "$HACK_CLUSTER/conformance.sh" --one "$ex" || rc=1
done
go run ./hack/tools/conformancereport "$OUT" "$@" > "$OUT/results.md" || rc=1
cat "$OUT/results.md"
exit $rc
