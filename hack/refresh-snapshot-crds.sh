#!/usr/bin/env bash
# Refreshes third_party/external-snapshotter/crds: the CRDs of
# github.com/kubernetes-csi/external-snapshotter (client/config/crd of its
# client/v8 module: VolumeSnapshot, VolumeSnapshotContent, VolumeSnapshotClass,
# and the VolumeGroupSnapshot ones, which its snapshot-controller waits for), copied from the Go module cache at the version PaV's
# go.mod requires. hack/cluster/kbuild/snapshotter builds the snapshot-controller
# of the same release (checked here). Run by hack/generate.sh, so `make
# verify-generated` fails when the copy differs from the module's.
set -euo pipefail
cd "$(dirname "$0")/.."

client=github.com/kubernetes-csi/external-snapshotter/client/v8
dest=third_party/external-snapshotter/crds
version=$(go list -m -f '{{.Version}}' "$client")
built=$(cd hack/cluster/kbuild/snapshotter && go list -m -f '{{.Version}}' github.com/kubernetes-csi/external-snapshotter/v8)
if [ "$built" != "$version" ]; then
  echo "refresh-snapshot-crds: go.mod requires $client $version but hack/cluster/kbuild/snapshotter builds the snapshot-controller $built: use one release" >&2
  exit 1
fi
moddir=$(go mod download -json "$client@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -n "$moddir" ] || { echo "refresh-snapshot-crds: $client@$version could not be downloaded" >&2; exit 1; }
mkdir -p "$dest"
rm -f "$dest"/*.yaml
install -m 0644 "$moddir"/config/crd/*snapshot.storage.k8s.io_*.yaml "$dest/"
echo "$version" > "$dest/VERSION"
