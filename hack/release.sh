#!/bin/bash
# release.sh VERSION - build PaV's release artefacts into _output/release/VERSION (`make release`):
#
#   pav-linux-amd64, pav-linux-arm64   the CLI and server binary (CGO_ENABLED=0), `pav version` = VERSION
#   pav-image-VERSION.tar              the image docker.io/library/pav:VERSION (deployment.yaml's pav:VERSION)
#                                      for linux/amd64 and linux/arm64: an OCI image layout archive whose
#                                      index points to one manifest per platform (gzip layers), with the
#                                      annotations and labels org.opencontainers.image.{version,revision,source,created},
#                                      and the SBOM as an OCI 1.1 artifact (artifactType application/spdx+json)
#                                      whose subject is that index: pushed with it, scanners find it as a referrer
#   pav-VERSION.spdx.json              SPDX 2.3 SBOM of the image: the Go modules in the binaries
#                                      (hack/tools/sbom, from their build information) and busybox-static,
#                                      each with its purl and licence
#   pav-X.Y.Z.tgz                      the Helm chart, version X.Y.Z and appVersion VERSION (its default tag)
#   deployment.yaml                    the plain manifest (hack/manifests.sh) pinned to pav:VERSION
#   pavprovisioners.crd.yaml           the CRD alone: upgrades apply it first
#   RELEASE-NOTES.md                   CHANGELOG.md's section for VERSION (which must exist; a
#                                      pre-release without one takes the Unreleased section)
#   LICENSE                            Apache-2.0 (also in the chart and the image's label
#                                      org.opencontainers.image.licenses)
#   SHA256SUMS                         of all of the above
#
# Without Docker or a registry: the image is packed by hack/tools/mkimg from busybox-static (each
# architecture's Debian package, fetched with apt-get into $PAV_CACHE/apt-ARCH, a private package
# list) and the binary. The image's creation time is the commit's, so a rebuild of a clean
# checkout of the same commit gives the same image.
set -euo pipefail
VERSION=${1:-}
[[ $VERSION =~ ^v([0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?)$ ]] || {
  echo "usage: make release VERSION=vX.Y.Z (semantic version with a leading v; got '$VERSION')" >&2; exit 2; }
CHART_VERSION=${BASH_REMATCH[1]}
REPO=$(cd "$(dirname "$0")/.." && pwd)
cd "$REPO"
. hack/images/lib.sh
OUT=$REPO/_output/release/$VERSION
WORK=$REPO/_output/release/.work-$VERSION
PAV_CACHE=${PAV_CACHE:-/var/cache/pav}
SOURCE=https://github.com/albertofaria/pav
ARCHES=(amd64 arm64)

say() { printf '==> %s\n' "$*"; }

# The release notes first: a release without them is a mistake to stop early.
# changelog SECTION: the text under CHANGELOG.md's "## SECTION".
changelog() {
  awk -v v="$1" '
    /^## / { if (found) exit; if ($2 == v) { found = 1; next } }
    found { print }' CHANGELOG.md
}
notes=$(changelog "$VERSION")
# A pre-release (vX.Y.Z-rc.1) without a section of its own is what is Unreleased so far.
[[ -n $(echo "$notes" | tr -d '[:space:]') || $VERSION != *-* ]] || notes=$(changelog Unreleased)
[ -n "$(echo "$notes" | tr -d '[:space:]')" ] || {
  echo "CHANGELOG.md has no section \"## $VERSION\": write its changes and upgrade notes first" >&2; exit 1; }
if [ -n "$(git status --porcelain)" ]; then
  echo "warning: the checkout has uncommitted changes: pav version will say dirty" >&2
fi
commit=$(git rev-parse HEAD)
created=$(TZ=UTC git log -1 --date=format-local:%Y-%m-%dT%H:%M:%SZ --format=%cd)

rm -rf "$OUT" "$WORK"
mkdir -p "$OUT" "$WORK"
trap 'rm -rf "$WORK"' EXIT
go build -trimpath -ldflags '-s -w' -o "$WORK/" ./hack/tools/mkimg ./hack/tools/sbom

say "binaries"
ldflags="-s -w $(VERSION=$VERSION hack/version.sh)"
for arch in "${ARCHES[@]}"; do
  CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -ldflags "$ldflags" -o "$OUT/pav-linux-$arch" ./cmd/pav
done
"$OUT/pav-linux-$(go env GOARCH)" version

# busybox_deb ARCH: unpack Debian's busybox-static for ARCH into $WORK/bb-ARCH; print its version.
busybox_deb() {
  local arch=$1 c=$PAV_CACHE/apt-$1 deb
  mkdir -p "$c/lists/partial" "$c/archives/partial" "$c/debs"
  local apt=(-q -o APT::Architecture="$arch" -o APT::Architectures::="$arch" -o Dir::State::Lists="$c/lists"
             -o Dir::Cache="$c" -o APT::Sandbox::User=root)
  if ! ls "$c/lists/"*Packages* >/dev/null 2>&1; then apt-get "${apt[@]}" update >&2; fi
  (cd "$c/debs" && apt-get "${apt[@]}" download busybox-static >&2)
  deb=$(ls -t "$c/debs"/busybox-static_*_"$arch".deb | head -1)
  mkdir -p "$WORK/bb-$arch"
  dpkg-deb -x "$deb" "$WORK/bb-$arch"
  dpkg-deb -f "$deb" Version
}

say "image"
rootfs=() debs=()
for arch in "${ARCHES[@]}"; do
  v=$(busybox_deb "$arch")
  busybox_rootfs "$WORK/rootfs-$arch" "$WORK/bb-$arch/bin/busybox"
  cp "$OUT/pav-linux-$arch" "$WORK/rootfs-$arch/pav"
  rootfs+=("linux/$arch=$WORK/rootfs-$arch")
  debs+=("busybox-static=$v/$arch")
done
say "SBOM"
# licences: the Go modules' from the module cache the binaries were built from, busybox-static's
# from the copyright file of the package put in the image
"$WORK/sbom" -name pav -version "$VERSION" -created "$created" -source "$SOURCE" -modroot "$REPO" \
  -binary "$OUT/pav-linux-amd64,$OUT/pav-linux-arm64" -deb "$(IFS=,; echo "${debs[*]}")" \
  -debdoc "$WORK/bb-${ARCHES[0]}/usr/share/doc" -out "$OUT/pav-$VERSION.spdx.json"

image=pav-image-$VERSION.tar
annotations=org.opencontainers.image.version=$VERSION,org.opencontainers.image.revision=$commit
annotations+=,org.opencontainers.image.source=$SOURCE,org.opencontainers.image.created=$created
annotations+=,org.opencontainers.image.title=pav,org.opencontainers.image.licenses=Apache-2.0
"$WORK/mkimg" -rootfs "$(IFS=,; echo "${rootfs[*]}")" -name "$(fullname "pav:$VERSION")" -entrypoint /pav \
  -compress gzip -sbom "$OUT/pav-$VERSION.spdx.json" -annotation "$annotations" -out "$OUT/$image"

say "chart and deployment.yaml"
cp -r charts/pav "$WORK/chart"
sed -i -e "s/^version: .*/version: $CHART_VERSION/" -e "s/^appVersion: .*/appVersion: $VERSION/" "$WORK/chart/Chart.yaml"
helm=$(hack/ensure-helm.sh)
"$helm" lint --strict "$WORK/chart" >/dev/null
"$helm" package "$WORK/chart" --destination "$OUT" >/dev/null
chart_files=$(tar -tzf "$OUT/pav-$CHART_VERSION.tgz")  # not piped into grep -q: its early exit fails tar under pipefail
for f in README.md LICENSE; do # `helm show readme`, and the licence
  grep -qx "pav/$f" <<<"$chart_files" || { echo "the chart package lacks $f" >&2; exit 1; }
done
CHART=$WORK/chart hack/manifests.sh "$OUT/deployment.yaml"
grep -q "image: \"\?pav:$VERSION\"\?$" "$OUT/deployment.yaml" || { echo "deployment.yaml is not pinned to pav:$VERSION" >&2; exit 1; }
cp crds/pavprovisioners.yaml "$OUT/pavprovisioners.crd.yaml"
cp LICENSE "$OUT/LICENSE"
printf '# PaV %s\n%s\n' "$VERSION" "$notes" > "$OUT/RELEASE-NOTES.md"

(cd "$OUT" && sha256sum pav-linux-* "$image" "pav-$VERSION.spdx.json" "pav-$CHART_VERSION.tgz" deployment.yaml pavprovisioners.crd.yaml \
  RELEASE-NOTES.md LICENSE > SHA256SUMS)
say "release $VERSION in ${OUT#"$REPO"/}:"
(cd "$OUT" && ls -l)
