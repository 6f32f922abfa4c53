#!/usr/bin/env bash
# examples.sh [NAME]... - build the examples' images as OCI tarballs in
# $IMAGES_DIR (default _output/images), mostly from Debian packages with the
# shared builder hack/images/debimage; `make cluster-load` imports them. With
# no argument every image is built. Used by `make examples-images`.
#
#   loop       pav-example-loop:latest       util-linux (losetup)        loop-block
#   sshfs      pav-example-sshfs:latest      sshfs, openssh-client       sshfs (PaV's pods)
#   sshd       pav-example-sshd:latest       openssh-server              sshfs (the server pod)
#   gocryptfs  pav-example-gocryptfs:latest  gocryptfs, fuse3            gocryptfs
#   s3         pav-example-s3:latest         s3fs, rclone, curl          s3-bucket (PaV's pods, bucket seeding)
#   s3-server  pav-example-s3-server:latest  versitygw (Go) + busybox    s3-bucket (the server pod)
#
# hello-world and host-directory only need pav-test:latest (make images).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export IMAGES_DIR=${IMAGES_DIR:-$ROOT/_output/images}
DEBIMAGE=$ROOT/hack/images/debimage
MKIMG=$ROOT/_output/bin/mkimg
PAV_CACHE=${PAV_CACHE:-/var/cache/pav}
[ -x "$DEBIMAGE" ] || { echo "missing $DEBIMAGE (the shared Debian image builder)" >&2; exit 1; }

# Every image gets bash and the util-linux/coreutils versions of the basic tools
# (debimage adds busybox for anything else).
BASE="bash coreutils util-linux mount"

# versitygw: built from the module proxy (its own module, pinned by go.sum), and
# cached outside the clone keyed by that module's files, so fresh clones on the
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

# s3_server: versitygw plus busybox-static, packed directly with mkimg.
s3_server() {
  local bin r=$IMAGES_DIR/rootfs-pav-example-s3-server a
  bin=$(versitygw)
  [ -x "$MKIMG" ] || (cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -o _output/bin/ ./hack/tools/mkimg)
  rm -rf "$r"
  mkdir -p "$r"/{bin,sbin,usr/bin,usr/sbin,usr/local/bin,etc,tmp,root,data,proc,sys,dev,run}
  chmod 1777 "$r/tmp"
  cp /bin/busybox "$r/bin/busybox"
  for a in $(/bin/busybox --list-full); do [ -e "$r/$a" ] || ln -s /bin/busybox "$r/$a"; done
  cp "$bin" "$r/usr/local/bin/versitygw"
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' > "$r/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' > "$r/etc/group"
  : > "$r/etc/hosts"
  "$MKIMG" -rootfs "$r" -name docker.io/library/pav-example-s3-server:latest \
    -entrypoint /usr/local/bin/versitygw -out "$IMAGES_DIR/pav-example-s3-server-latest.tar"
  rm -rf "$r"
}

build() {
  case $1 in
    loop)      "$DEBIMAGE" pav-example-loop:latest $BASE ;;
    sshfs)     "$DEBIMAGE" pav-example-sshfs:latest $BASE sshfs fuse3 openssh-client ;;
    sshd)      "$DEBIMAGE" pav-example-sshd:latest $BASE openssh-server openssh-sftp-server ;;
    gocryptfs) "$DEBIMAGE" pav-example-gocryptfs:latest $BASE gocryptfs fuse3 ;;
    s3)        "$DEBIMAGE" pav-example-s3:latest $BASE s3fs fuse3 rclone curl grep sed ;;
    s3-server) s3_server ;;
    *) echo "unknown image $1 (loop sshfs sshd gocryptfs s3 s3-server)" >&2; exit 2 ;;
  esac
}

names=("$@")
[ ${#names[@]} -gt 0 ] || names=(loop sshfs sshd gocryptfs s3 s3-server)
for n in "${names[@]}"; do
  start=$(date +%s)
  build "$n"
  echo "hack/images/examples.sh: $n built in $(( $(date +%s) - start ))s"
done
