#!/usr/bin/env bash
# release.sh VERSION DIST: build troupe's release VERSION (vMAJOR.MINOR.PATCH[-PRE]) from this
# checkout into the directory DIST (emptied first), offline, with what `make release` lists:
#   troupe.yaml             CRDs and the cluster-wide install (kubectl apply --server-side -f)
#   troupe-crds.yaml        the CRDs alone, for the namespace-scoped install
#   troupe-namespaced.yaml  the namespace-scoped install (watches troupe-jobs; docs/security.md)
#   troupe-X.Y.Z.tgz        the Helm chart, its CRDs in crds/
#   troupe-operator-VERSION.oci.tar, troupe-agent-VERSION.oci.tar
#                           OCI image archives, each an index of linux/amd64 and linux/arm64,
#                           named $IMAGE_REGISTRY/<image>:VERSION
#   kubectl-troupe-VERSION-<os>-<arch>.tar.gz   the kubectl plugin (linux, darwin; amd64, arm64)
#   troupe.krew.yaml        the plugin's krew manifest, with those archives' checksums
#   SHA256SUMS              sha256sum of every other file
# Every binary is static (CGO_ENABLED=0), stamped with VERSION and the git revision; the images
# are built FROM scratch with buildah (no emulation: nothing runs inside them), their files
# dated at the commit's time. HELM names the helm binary (make release passes it).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=hack/controlplane/lib.sh
source hack/controlplane/lib.sh

version=${1:?usage: release.sh VERSION DIST}
dist=${2:?usage: release.sh VERSION DIST}
: "${HELM:?HELM names the helm binary}" "${IMAGE_REGISTRY:?}"
[[ $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] ||
  { echo "release.sh: VERSION $version is not vMAJOR.MINOR.PATCH[-PRE]" >&2; exit 2; }
command -v buildah >/dev/null || { echo "release.sh: buildah is missing: run hack/container-deps.sh" >&2; exit 1; }
log() { echo "[release] $*" >&2; }

# A release is built with a Go that has the standard library's fixes for every advisory the code
# calls (hack/vuln-accepted.txt lists those this machine's Go lacks): an older one is refused,
# unless ALLOW_UNPATCHED_GO=1 says the build is not for publishing (the real-node suite's).
go_version=$(go env GOVERSION)
go_version=${go_version#go}
: "${GO_RELEASE_MIN:?GO_RELEASE_MIN names the oldest Go a release is built with (hack/versions.mk)}"
if [[ $(printf '%s\n%s\n' "$GO_RELEASE_MIN" "$go_version" | sort -V | head -1) != "$GO_RELEASE_MIN" ]]; then
  if [[ ${ALLOW_UNPATCHED_GO:-} != 1 ]]; then
    echo "release.sh: go$go_version is older than go$GO_RELEASE_MIN, which fixes the standard library's advisories in hack/vuln-accepted.txt; build the release with go$GO_RELEASE_MIN or newer (ALLOW_UNPATCHED_GO=1: a build not to publish)" >&2
    exit 1
  fi
  log "WARNING: built with go$go_version, older than go$GO_RELEASE_MIN (ALLOW_UNPATCHED_GO=1): not to publish"
fi

# Architectures of the images and (with darwin) of the plugin.
IMAGE_PLATFORMS=${IMAGE_PLATFORMS:-linux/amd64 linux/arm64}
PLUGIN_PLATFORMS=${PLUGIN_PLATFORMS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64}

rm -rf "$dist"
mkdir -p "$dist"
dist=$(cd "$dist" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export CGO_ENABLED=0 GOWORK=off GOFLAGS="-trimpath -buildvcs=false"
ldflags="-s -w $(hack/version-ldflags.sh "$version")"
# Files in the images and archives are dated at the commit, so two builds of one commit match.
epoch=$(git log -1 --format=%ct 2>/dev/null || echo 0)
start=$SECONDS

# The installs, with the release's operator image (the operator defaults to the agent of its
# own version, which the build stamps).
operator_image=$IMAGE_REGISTRY/troupe-operator:$version
render() {
  echo "# troupe $version: $2"
  "$KUBE_BIN/kubectl" kustomize "$1" |
    sed -E "s#^( *image: )[^ ]*/troupe-operator:[^ ]*\$#\\1$operator_image#"
}
render config "CRDs and the cluster-wide install. kubectl apply --server-side -f troupe.yaml" >"$dist/troupe.yaml"
render config/namespaced "the namespace-scoped install (docs/security.md); apply troupe-crds.yaml first" \
  >"$dist/troupe-namespaced.yaml"
{
  echo "# troupe $version: the CRDs. kubectl apply --server-side -f troupe-crds.yaml"
  for f in config/crds/*.yaml; do echo "---"; cat "$f"; done
} >"$dist/troupe-crds.yaml"
for f in troupe.yaml troupe-namespaced.yaml; do
  grep -q "image: $operator_image\$" "$dist/$f" || { log "$f does not run $operator_image"; exit 1; }
done

# The chart, at the release's version.
"$HELM" package charts/troupe --version "${version#v}" --app-version "$version" -d "$dist" >/dev/null

# The images: one manifest list per image, an entry per platform, pushed as an OCI archive.
for image in troupe-operator troupe-agent; do
  ids=()
  list=localhost/troupe-release/$image:$version
  buildah manifest rm "$list" >/dev/null 2>&1 || true
  buildah manifest create "$list" >/dev/null
  for platform in $IMAGE_PLATFORMS; do
    ctx=$work/$image-${platform//\//-}
    mkdir -p "$ctx"
    GOOS=${platform%/*} GOARCH=${platform#*/} go build -ldflags "$ldflags" -o "$ctx/$image" "./cmd/$image"
    cp images/passwd images/group "images/$image/Containerfile" "$ctx/"
    cp /etc/ssl/certs/ca-certificates.crt "$ctx/"
    ids+=("$(buildah bud -q --isolation chroot --pull-never --layers=false --platform "$platform" \
      --timestamp "$epoch" --manifest "$list" -f "$ctx/Containerfile" "$ctx" | tail -n 1)")
  done
  buildah manifest push -q --all "$list" "oci-archive:$dist/$image-$version.oci.tar:$IMAGE_REGISTRY/$image:$version" >/dev/null
  # The list and its images go: only the archive is the release's.
  buildah manifest rm "$list" >/dev/null
  buildah rmi "${ids[@]}" >/dev/null
  log "$image: $(du -h "$dist/$image-$version.oci.tar" | cut -f1) for $IMAGE_PLATFORMS"
done

# The kubectl plugin, and its krew manifest.
krew=$(cat hack/krew/troupe.yaml.tmpl)
krew=${krew//'{{VERSION}}'/$version}
for platform in $PLUGIN_PLATFORMS; do
  os=${platform%/*} arch=${platform#*/}
  dir=$work/kubectl-troupe-$os-$arch
  mkdir -p "$dir"
  GOOS=$os GOARCH=$arch go build -ldflags "$ldflags" -o "$dir/kubectl-troupe" ./cmd/kubectl-troupe
  cp LICENSE "$dir/"
  archive=kubectl-troupe-$version-$os-$arch.tar.gz
  tar -C "$dir" --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner -cf - kubectl-troupe LICENSE |
    gzip -n >"$dist/$archive"
  krew=${krew//"{{SHA256_${os}_${arch}}}"/$(sha256sum "$dist/$archive" | cut -d' ' -f1)}
done
if [[ $krew == *'{{'* ]]; then
  # A platform the manifest lists was not built (PLUGIN_PLATFORMS was narrowed): no manifest.
  log "krew manifest skipped: not every platform it lists was built ($PLUGIN_PLATFORMS)"
else
  echo "$krew" >"$dist/troupe.krew.yaml"
fi

(cd "$dist" && sha256sum -- * >SHA256SUMS)
log "troupe $version in $dist in $((SECONDS - start))s:"
(cd "$dist" && ls -l --time-style=+ | sed 1d) >&2
