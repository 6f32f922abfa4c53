#!/bin/bash
# e2e.sh [TEST-BINARY-FLAG]... - build and run the e2e tests (build tag e2e) against the local cluster.
#
# The test binaries are built with `go test -c` outside the netns (building needs the module
# proxy), into a directory of this run only (several people share one checkout), then run one
# after the other inside the cluster's netns (hack/cluster/netns-exec), each in its package
# directory as go test does, holding the cluster's lock (lib.sh's E2E_LOCK, /tmp/pav-e2e.lock)
# unless PAV_E2E_LOCKED=1 says the caller holds it. Flags are passed to every test binary, e.g.
# -test.run Smoke -test.v.
# E2E_PKGS overrides which packages run (default: every package with e2e-tagged tests), E2E_TAGS
# the build tags (default: e2e; make test-helm runs ./test/e2e/helm with tag helm, make e2e-slow
# the packages with tag e2e_slow).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
. "$REPO/hack/cluster/lib.sh"
cd "$REPO"
[ $# -gt 0 ] || set -- -test.v -test.timeout=60m
tags=${E2E_TAGS:-e2e}
pkgs=${E2E_PKGS:-$(grep -rlE "^//go:build .*\\b${tags}\\b" --include='*_test.go' . | grep -v -e '^./hack/cluster/kbuild/' -e '^./third_party/' | xargs -r -n1 dirname | sort -u)}
[ -n "$pkgs" ] || { echo "no e2e tests"; exit 0; }

mkdir -p _output
out=$(mktemp -d "$REPO/_output/e2e.XXXXXX")
trap 'rm -rf "$out"' EXIT
# one go command builds every package's binary (<package name>.test) in parallel, sharing work
echo "go test -c -tags $tags -o $out/" $pkgs
go test -c -tags "$tags" -o "$out/" $pkgs
go list -tags "$tags" -f '{{.Name}} {{.Dir}}' $pkgs | while read -r name dir; do
  if [ -e "$out/$name.test" ]; then echo "$dir" > "$out/$name.dir"; fi   # no binary if the package has no tests
done

run_binary() {
  local t=$1 d
  shift
  d=$(cat "${t%.test}.dir")
  (cd "$d" && "$REPO/hack/cluster/netns-exec" "$t" "$@")
}

# The examples' tests (build tag e2e), the longest package, run as three
# processes unless the flags pick tests themselves: the multi-node ones first,
# alone (one stops a node), then two processes at once, each running its tests
# in turn. Tests that use one example's PavProvisioner and StorageClass must
# stay in one process, so the lanes split by example: lane A runs the tests of
# host-directory and of gocryptfs (which stacks on host-directory), lane B every
# other example's. PAV_E2E_EXAMPLES tells each process its examples, and a test
# that installs a PavProvisioner not named there fails at once (helpers_test.go),
# so a test in the wrong lane is found on every run, not on an unlucky one. The
# other packages' tests, and the slow ones, restart or stop PaV's components,
# so they run alone.
lane_a='TestHostDirectory|TestGocryptfs'
lane_a_examples='host-directory gocryptfs'
lane_b_examples='hello-world hello-world-psa loop-block sshfs s3-bucket'
run_examples() {
  local t=$1 rc=0 a b
  shift
  case " $* " in *" -test.run"*|*" -test.skip"*)
    run_binary "$t" "$@"
    return ;;
  esac
  if [ "$tags" != e2e ]; then
    run_binary "$t" "$@"
    return
  fi
  run_binary "$t" "$@" -test.run '^TestMultiNode' || rc=1
  echo "=== $(basename "$t"): the tests of $lane_a_examples, beside every other example's (each output when both ended)"
  PAV_E2E_EXAMPLES=$lane_a_examples run_binary "$t" "$@" -test.run "^($lane_a)" > "$out/lane-a.log" 2>&1 & a=$!
  PAV_E2E_EXAMPLES=$lane_b_examples run_binary "$t" "$@" -test.skip "^(TestMultiNode|$lane_a)" > "$out/lane-b.log" 2>&1 & b=$!
  wait $a || rc=1
  wait $b || rc=1
  echo "--- examples.test -test.run '^($lane_a)'"; cat "$out/lane-a.log"
  echo "--- examples.test -test.skip '^(TestMultiNode|$lane_a)'"; cat "$out/lane-b.log"
  return $rc
}

run() {
  local rc=0 t
  for t in "$out"/*.test; do
    [ -e "$t" ] || continue
    echo "=== $(basename "$t") (in $(cat "${t%.test}.dir"), flags $*)"
    if [ "$(basename "$t")" = examples.test ]; then
      run_examples "$t" "$@" || rc=1
    else
      run_binary "$t" "$@" || rc=1
    fi
  done
  return $rc
}
if [ -z "${PAV_E2E_LOCKED:-}" ]; then
  echo "waiting for $E2E_LOCK"
  exec 9>"$E2E_LOCK"
  flock 9
  export PAV_E2E_LOCKED=1
fi
rc=0
run "$@" || rc=1
[ $rc = 0 ] && echo "e2e: PASS" || echo "e2e: FAIL"
exit $rc
