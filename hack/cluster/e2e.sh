#!/bin/bash
# e2e.sh [TEST-BINARY-FLAG]... - build and run the e2e tests (build tag e2e) against the local cluster.
#
# The test binaries are built with `go test -c` outside the netns (building needs the module
# proxy), into a directory of this run only (several people share one checkout), then run one
# after the other inside the cluster's netns (hack/cluster/netns-exec), each in its package
# directory as go test does, holding /tmp/pav-e2e.lock (unless PAV_E2E_LOCKED=1 says the
# caller holds it). Flags are passed to every test binary, e.g. -test.run Smoke -test.v.
# E2E_PKGS overrides which packages run (default: every package with e2e-tagged tests), E2E_TAGS
# the build tags (default: e2e; make test-helm runs ./test/e2e/helm with tag helm, make e2e-slow
# the packages with tag e2e_slow).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
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

run() {
  local rc=0 t d
  for t in "$out"/*.test; do
    [ -e "$t" ] || continue
    d=$(cat "${t%.test}.dir")
    echo "=== $(basename "$t") (in $d, flags $*)"
    (cd "$d" && "$REPO/hack/cluster/netns-exec" "$t" "$@") || rc=1
  done
  return $rc
}
if [ -z "${PAV_E2E_LOCKED:-}" ]; then
  echo "waiting for /tmp/pav-e2e.lock"
  exec 9>/tmp/pav-e2e.lock
  flock 9
  export PAV_E2E_LOCKED=1
fi
rc=0
run "$@" || rc=1
[ $rc = 0 ] && echo "e2e: PASS" || echo "e2e: FAIL"
exit $rc
