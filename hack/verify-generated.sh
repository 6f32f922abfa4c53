#!/usr/bin/env bash
# Fails if what hack/generate.sh writes differs from the working tree: run
# `make generate` and commit the result. Generates into a copy, so the tree is
# left alone.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar --exclude=./_output --exclude=./.git --exclude=./bin -cf - . | tar -xf - -C "$tmp"
"$tmp/hack/generate.sh"
status=0
for path in crds/v1alpha1/zz_generated.deepcopy.go crds/generated kubeclient/generated crds/pavprovisioners.yaml charts/pav/crds/pavprovisioners.yaml deployment.yaml third_party/leaderelection third_party/external-snapshotter; do
  if ! diff -r -u "$path" "$tmp/$path"; then
    status=1
  fi
done
if [ "$status" != 0 ]; then
  echo "generated files are out of date: run 'make generate' and commit the result" >&2
fi
exit "$status"
