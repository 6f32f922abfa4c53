#!/usr/bin/env bash
# Refreshes third_party/leaderelection from k8s.io/client-go's
# tools/leaderelection at the version in go.mod: copies the upstream files PaV
# keeps from the Go module cache and applies PaV's changes,
# third_party/leaderelection/pav.patch (PAV.md says what they are). Run by
# hack/generate.sh, so `make verify-generated` fails when the copy differs from
# what this writes.
#
# After changing the copy by hand, rewrite the patch from it:
#   hack/refresh-leaderelection.sh --write-patch
set -euo pipefail
cd "$(dirname "$0")/.."

dest=third_party/leaderelection
patch_file=$dest/pav.patch
# The upstream files PaV keeps, relative to tools/leaderelection.
files=(leaderelection.go healthzadaptor.go metrics.go resourcelock/interface.go resourcelock/leaselock.go)

version=$(go list -m -f '{{.Version}}' k8s.io/client-go)
moddir=$(go mod download -json "k8s.io/client-go@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
if [ -z "$moddir" ]; then
  echo "refresh-leaderelection: k8s.io/client-go@$version is not in the module cache and could not be downloaded" >&2
  exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/a/resourcelock" "$tmp/b"
for f in "${files[@]}"; do
  cp "$moddir/tools/leaderelection/$f" "$tmp/a/$f"
done
cp "$moddir/LICENSE" "$tmp/a/LICENSE"
chmod -R u+w "$tmp/a"

if [ "${1:-}" = --write-patch ]; then
  mkdir -p "$tmp/b/resourcelock"
  for f in "${files[@]}" LICENSE; do cp "$dest/$f" "$tmp/b/$f"; done
  # diff exits 1 when the trees differ, which they do; the file times are dropped.
  (cd "$tmp" && diff -ruN a b >diff.out) || [ $? = 1 ]
  sed -E 's/^((---|\+\+\+) [^\t]*)\t.*/\1/' "$tmp/diff.out" >"$patch_file"
  exit 0
fi

cp -R "$tmp/a/." "$tmp/b"
if ! (cd "$tmp/b" && patch -p1 --batch --fuzz=0 --no-backup-if-mismatch --quiet <"$OLDPWD/$patch_file"); then
  echo "refresh-leaderelection: $patch_file does not apply to client-go $version; make PaV's changes by hand (PAV.md), then run $0 --write-patch" >&2
  exit 1
fi
rm -f "$dest"/*.go "$dest"/resourcelock/*.go
cp -R "$tmp/b/." "$dest"
