#!/bin/bash
# build.sh [pause|test|pav|csi-anchor|conformance|all]... - build the local images as OCI tarballs in $IMAGES_DIR
# (default _output/images), without Docker. Import them with hack/cluster/load-images.sh.
#
#   pause  registry.k8s.io/pause:3.10 (the name containerd's sandbox_image expects)
#   test   busybox-static + bash, as pav-test:latest, busybox:latest, ubuntu:20.04, alpine:3.15,
#          and /bin/pav-webhook-load (test/e2e/webhookload/loadgen)
#   pav    $IMAGE (default pav:latest): cmd/pav (CGO_ENABLED=0, stamped by hack/version.sh with
#          $VERSION and the commit) on busybox-static, entrypoint /pav
#   csi-anchor  pav-bench-csi-anchor:latest, the cluster benchmark's CSI anchor (not in all):
#          external-provisioner v5.3.0 as /csi-provisioner (built with hack/csianchor/provisioner's
#          module file, which copies its replace directives) and /csi-anchor-driver
#          (hack/csianchor/driver), on busybox-static
#   conformance  the images Kubernetes' storage conformance suite runs (not in all; make
#          test-conformance): agnhost (built with e2e.test by hack/cluster/ensure-e2e.sh) on
#          busybox-static as e2e-agnhost.tar, and busybox-static as e2e-busybox.tar for the suite's
#          busybox, nginx (the suite gives nginx a shell command) and glibc-dns-testing (the
#          multiVolume clone tests' pods only run a shell loop in it), each under the name and tag
#          that release's test/utils/image/manifest.go asks for
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
IMAGES_DIR=${IMAGES_DIR:-$REPO/_output/images}
TOOLS=$REPO/_output/bin
IMAGE=${IMAGE:-pav:latest}
mkdir -p "$IMAGES_DIR" "$TOOLS"
IMAGES_DIR=$(cd "$IMAGES_DIR" && pwd)   # builds below run in other directories
export CGO_ENABLED=0

. "$REPO/hack/images/lib.sh"

# Uncompressed layers (mkimg's default): these archives never cross a network (`ctr import` on each
# node, or a push to the cluster's registry on the host), so gzip would only cost CPU on every
# build and import (seconds of CPU per image of tens of MB on a 2-core machine). The release compresses.
(cd "$REPO" && go build -trimpath -ldflags '-s -w' -o "$TOOLS/" ./hack/tools/mkimg ./hack/tools/pause)
MKIMG=$TOOLS/mkimg

build_pause() {
  local r=$IMAGES_DIR/rootfs-pause
  rm -rf "$r"; mkdir -p "$r"
  cp "$TOOLS/pause" "$r/pause"
  "$MKIMG" -rootfs "$r" -name registry.k8s.io/pause:3.10 -entrypoint /pause -out "$IMAGES_DIR/pause.tar"
}

build_test() {
  local r=$IMAGES_DIR/rootfs-test l
  busybox_rootfs "$r"
  # real bash (PaV's examples and tests use bash), with the libraries it links
  rm -f "$r/bin/bash"; cp -L /bin/bash "$r/bin/bash"
  for l in $(ldd /bin/bash | grep -o '/[^ ]*'); do
    mkdir -p "$r$(dirname "$l")"; cp -L "$l" "$r$l"
  done
  # the webhook load test's client (busybox has no HTTP client that posts 4 MiB concurrently)
  (cd "$REPO" && go build -trimpath -ldflags '-s -w' -o "$r/bin/pav-webhook-load" ./test/e2e/webhookload/loadgen)
  "$MKIMG" -rootfs "$r" -cmd sh -out "$IMAGES_DIR/test.tar" -name \
    docker.io/library/pav-test:latest,docker.io/library/busybox:latest,docker.io/library/ubuntu:20.04,docker.io/library/alpine:3.15
}

build_pav() {
  local r=$IMAGES_DIR/rootfs-pav
  busybox_rootfs "$r"   # the node plugin runs mount/umount (k8s.io/mount-utils) and sh
  (cd "$REPO" && go build -trimpath -ldflags "-s -w $(hack/version.sh)" -o "$r/pav" ./cmd/pav)
  "$MKIMG" -rootfs "$r" -entrypoint /pav -annotation org.opencontainers.image.licenses=Apache-2.0 -out "$IMAGES_DIR/pav.tar" -name "$(fullname "$IMAGE")"
}

build_csi_anchor() {
  local r=$IMAGES_DIR/rootfs-csi-anchor
  busybox_rootfs "$r"
  (cd "$REPO/hack/csianchor/provisioner" && go build -modfile=provisioner.mod -trimpath -ldflags '-s -w' \
    -o "$r/csi-provisioner" github.com/kubernetes-csi/external-provisioner/v5/cmd/csi-provisioner)
  (cd "$REPO" && go build -trimpath -ldflags '-s -w' -o "$r/csi-anchor-driver" ./hack/csianchor/driver)
  "$MKIMG" -rootfs "$r" -out "$IMAGES_DIR/csi-anchor.tar" -name docker.io/library/pav-bench-csi-anchor:latest
}

# e2e_image ID: the name the suite of the cluster's Kubernetes release uses for image ID (Agnhost,
# BusyBox, Nginx), read from its test/utils/image/manifest.go (registry.k8s.io/e2e-test-images)
e2e_image() {
  local dir mod
  mod=$REPO/hack/cluster/kbuild/e2e/$KUBE_VERSION.mod
  dir=$(cd "$REPO/hack/cluster/kbuild" && go list -modfile="$mod" -m -f '{{.Dir}}' k8s.io/kubernetes)
  sed -n 's|^[[:space:]]*configs\['"$1"'\] = Config{list.PromoterE2eRegistry, "\([^"]*\)", "\([^"]*\)"}.*|registry.k8s.io/e2e-test-images/\1:\2|p' \
    "$dir/test/utils/image/manifest.go" | grep . || { echo "no image $1 in $dir/test/utils/image/manifest.go" >&2; exit 1; }
}

build_conformance() {
  local e2e r=$IMAGES_DIR/rootfs-e2e busybox nginx glibc agnhost
  e2e=$("$REPO/hack/cluster/ensure-e2e.sh")
  KUBE_VERSION=$(basename "$e2e"); KUBE_VERSION=${KUBE_VERSION#e2e-}
  busybox=$(e2e_image BusyBox); nginx=$(e2e_image Nginx); glibc=$(e2e_image GlibcDnsTesting)
  agnhost=$(e2e_image Agnhost)
  busybox_rootfs "$r"
  "$MKIMG" -rootfs "$r" -cmd sh -out "$IMAGES_DIR/e2e-busybox.tar" -name "$busybox,$nginx,$glibc"
  cp "$e2e/agnhost" "$r/agnhost"
  "$MKIMG" -rootfs "$r" -entrypoint /agnhost -out "$IMAGES_DIR/e2e-agnhost.tar" -name "$agnhost"
}

[ $# = 0 ] && set -- all
for what in "$@"; do
  case $what in
    pause) build_pause ;;
    test) build_test ;;
    pav) build_pav ;;
    csi-anchor) build_csi_anchor ;;
    conformance) build_conformance ;;
    all) build_pause; build_test; build_pav ;;
    *) echo "usage: $0 [pause|test|pav|csi-anchor|conformance|all]..." >&2; exit 2 ;;
  esac
done
