#!/usr/bin/env bash
# previous-release.sh [VERSION] - the artefacts of an earlier release, as its users downloaded
# them: built once by that release's own `make release`, from the commit hack/releases.tsv names
# (default: the last release there), in a temporary worktree, and kept in
# $PAV_CACHE/releases/VERSION. Prints that directory (`make test-upgrade` upgrades from it).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
cd "$REPO"
PAV_CACHE=${PAV_CACHE:-/var/cache/pav}
VERSION=${1:-$(awk '!/^#/ && NF { v = $1 } END { print v }' hack/releases.tsv)}
COMMIT=$(awk -v v="$VERSION" '$1 == v { print $2 }' hack/releases.tsv)
[ -n "$COMMIT" ] || { echo "hack/releases.tsv names no release $VERSION" >&2; exit 1; }
OUT=$PAV_CACHE/releases/$VERSION

if [ -f "$OUT/SHA256SUMS" ] && (cd "$OUT" && sha256sum --quiet -c SHA256SUMS); then
  echo "$OUT"; exit 0
fi
git cat-file -e "$COMMIT^{commit}" 2>/dev/null || {
  echo "commit $COMMIT of release $VERSION is not in this clone (a shallow clone? git fetch --unshallow)" >&2; exit 1; }
tree=$(mktemp -d "${TMPDIR:-/tmp}/pav-release-$VERSION.XXXXXX")
cleanup() { git worktree remove --force "$tree" >/dev/null 2>&1 || rm -rf "$tree"; git worktree prune; }
trap cleanup EXIT
git worktree add --detach "$tree" "$COMMIT" >&2
echo "==> building release $VERSION from $COMMIT (once; kept in $OUT)" >&2
(cd "$tree" && make release VERSION="$VERSION") >&2
rm -rf "$OUT"
mkdir -p "$(dirname "$OUT")"
cp -r "$tree/_output/release/$VERSION" "$OUT"
echo "$OUT"
