#!/bin/bash
# version.sh - print the -ldflags -X flags that stamp PaV's version into cmd/pav (`pav version`):
#   main.version  $VERSION, else the tag (v*) this commit carries, else "dev"
#   main.commit   $GIT_COMMIT, else this checkout's commit (none outside a checkout)
#   main.dirty    $GIT_DIRTY, else whether the checkout has uncommitted or untracked files
# The Go toolchain records the commit and dirty flag itself (vcs.revision, vcs.modified) and
# pav prefers those; it records nothing in a git worktree or with -buildvcs=false, hence these.
# Used by `make build`, hack/images/build.sh and the Dockerfile.
set -euo pipefail
cd "$(dirname "$0")/.."
version=${VERSION:-}
commit=${GIT_COMMIT:-}
dirty=${GIT_DIRTY:-}
if git rev-parse --git-dir >/dev/null 2>&1; then
  [ -n "$version" ] || version=$(git describe --tags --exact-match --match 'v[0-9]*' 2>/dev/null || true)
  [ -n "$commit" ] || commit=$(git rev-parse HEAD)
  if [ -z "$dirty" ]; then
    if [ -n "$(git status --porcelain)" ]; then dirty=true; else dirty=false; fi
  fi
fi
flags="-X main.version=${version:-dev}"
[ -z "$commit" ] || flags+=" -X main.commit=$commit"
[ -z "$dirty" ] || flags+=" -X main.dirty=$dirty"
echo "$flags"
