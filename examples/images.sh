#!/usr/bin/env bash
# images.sh [NAME]... - build the examples' images as OCI tarballs in
# $IMAGES_DIR (default _output/images), from Debian packages with the shared
# builder hack/images/debimage; `make cluster-load` imports them. With no
# argument every image is built. Used by `make examples-images`.
#
#   pav-example-loop:latest      util-linux (losetup)                       loop-block
#   pav-example-sshfs:latest     sshfs, openssh-client                      sshfs (client side)
#   pav-example-sshd:latest      openssh-server                             sshfs (the server pod)
#   pav-example-gocryptfs:latest gocryptfs, fuse3                           gocryptfs
#   pav-example-s3:latest        s3fs, rclone, curl + versitygw (Go)        s3-bucket (client and server)
#
# The hello-world and host-directory examples only need pav-test:latest
# (hack/images/build.sh test).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export IMAGES_DIR=${IMAGES_DIR:-$ROOT/_output/images}
DEBIMAGE=$ROOT/hack/images/debimage
PAV_CACHE=${PAV_CACHE:-/var/cache/pav}
[ -x "$DEBIMAGE" ] || { echo "missing $DEBIMAGE (the shared Debian image builder)" >&2; exit 1; }

# Every image gets a shell and the basic tools the examples' scripts use.
BASE="bash coreutils util-linux mount grep sed findutils"

# versitygw: built from the module proxy (its own module, pinned by go.sum), and
# cached outside the clone keyed by the module's go.sum, so fresh clones of the
# same machine do not rebuild it (~4 min cold, 45 MB).
versitygw() {
  local mod=$ROOT/examples/s3-bucket/versitygw key out
  key=$(cat "$mod/go.mod" "$mod/go.sum" | sha256sum | cut -c1-16)
  out=$PAV_CACHE/versitygw-$key/versitygw
  if [ ! -x "$out" ]; then
    echo "building versitygw into $out" >&2
    mkdir -p "$(dirname "$out")"
    (cd "$mod" && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$out.tmp" github.com/versity/versitygw/cmd/versitygw)
    mv "$out.tmp" "$out"
  fi
  echo "$out"
}

build() {
  case $1 in
    loop)      "$DEBIMAGE" pav-example-loop:latest $BASE ;;
    sshfs)     "$DEBIMAGE" pav-example-sshfs:latest $BASE sshfs fuse3 openssh-client ;;
    sshd)      "$DEBIMAGE" pav-example-sshd:latest $BASE openssh-server openssh-sftp-server ;;
    gocryptfs) "$DEBIMAGE" pav-example-gocryptfs:latest $BASE gocryptfs fuse3 ;;
    s3)
      local bin
      bin=$(versitygw)
      EXTRA_FILES="$bin:/usr/local/bin/versitygw" "$DEBIMAGE" pav-example-s3:latest $BASE s3fs fuse3 rclone curl ca-certificates ;;
    *) echo "unknown image $1 (loop sshfs sshd gocryptfs s3)" >&2; exit 2 ;;
  esac
}

names=("$@")
[ ${#names[@]} -gt 0 ] || names=(loop sshfs sshd gocryptfs s3)
for n in "${names[@]}"; do
  start=$(date +%s)
  build "$n"
  echo "pav-example-$n: $(( $(date +%s) - start ))s"
done
