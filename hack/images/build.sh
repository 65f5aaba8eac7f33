#!/usr/bin/env bash
# build.sh IMAGE...: build the images of images/ with buildah, offline (nothing is pulled: every
# image starts FROM scratch or from another image built here), and cache each one by the hash
# of what it is made from.
#   IMAGE: troupe-operator troupe-agent troupe-mpi troupe-train pause troupe-debian
#          troupe-debian-trixie mpi-pi-openmpi mpi-pi-mpich troupe-go
# Each image is named $IMAGE_REGISTRY/IMAGE:TAG (hack/versions.mk: troupe-operator and troupe-agent
# are tagged $IMAGE_TAG, the release; the others $DATAPLANE_IMAGE_TAG) in buildah's local
# storage, but for the mpi-pi images, named as kubeflow's examples name theirs
# (docker.io/mpioperator/mpi-pi:openmpi and :mpich), and saved as a docker archive, $TROUPE_CACHE/images/IMAGE-HASH.tar, which the local
# cluster's real node imports. HASH covers the image's directory under images/, the files the
# script adds to its build context (binaries, CA certificates), the recipe of the Debian root
# filesystem and the hash of the image it is built on; an image whose hash is cached is not
# rebuilt. Images a requested one is built on are built first.
set -euo pipefail
# shellcheck source=hack/controlplane/lib.sh
source "$(dirname "$0")/../controlplane/lib.sh"
: "${IMAGE_REGISTRY:?}" "${IMAGE_TAG:?}" "${DATAPLANE_IMAGE_TAG:?}" "${DEBIAN_SUITE:?}" "${VERSION:?}"

cache=$TROUPE_CACHE/images
# The machine's apt sources for Debian; the root filesystem is made from the same archive.
apt_sources=${APT_SOURCES:-/etc/apt/sources.list.d/debian.sources}
[[ -f $apt_sources ]] || apt_sources=/etc/apt/sources.list
# Static binaries: the scratch images have no libc.
export CGO_ENABLED=0 GOWORK=off GOFLAGS="-trimpath -buildvcs=false"

log() { echo "[images] $*" >&2; }
version_ldflags() { "$REPO_ROOT/hack/version-ldflags.sh" "$VERSION"; }

# parent IMAGE: the image IMAGE is built on, if it is one of ours.
parent() {
  case $1 in
    troupe-mpi | troupe-go) echo troupe-debian ;;
    troupe-train) echo troupe-mpi ;;
    mpi-pi-*) echo troupe-debian-trixie ;;
  esac
}

# dir IMAGE: the directory under images/ IMAGE is made from; the mpi-pi images share one.
dir() {
  case $1 in
    mpi-pi-*) echo mpi-pi ;;
    troupe-debian-trixie) echo troupe-debian ;;
    *) echo "$1" ;;
  esac
}

ref() {
  case $1 in
    mpi-pi-*) echo "docker.io/mpioperator/mpi-pi:${1#mpi-pi-}" ;;
    troupe-operator | troupe-agent) echo "$IMAGE_REGISTRY/$1:$IMAGE_TAG" ;;
    *) echo "$IMAGE_REGISTRY/$1:$DATAPLANE_IMAGE_TAG" ;;
  esac
}

# suite IMAGE: the Debian suite of a root filesystem image. kubeflow's images are Debian trixie
# (Open MPI 5 with PRRTE/PMIx, MPICH 4.2); troupe's are $DEBIAN_SUITE.
suite() {
  case $1 in
    troupe-debian-trixie) echo trixie ;;
    *) echo "$DEBIAN_SUITE" ;;
  esac
}

# The Debian root filesystem: minbase (dpkg, apt and what they need), without documentation,
# manual pages and translations (also for packages installed later, through dpkg.cfg.d), no
# recommended packages.
rootfs_recipe() {
  printf '%s\n' mmdebstrap --variant=minbase --format=tar \
    --aptopt='APT::Install-Recommends "false"' \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --include=ca-certificates \
    "$1"
}

# sources SUITE: the machine's apt sources for SUITE (its own suite's, renamed).
sources() {
  sed "s/\b$DEBIAN_SUITE\b/$1/g" "$apt_sources"
}

# context IMAGE DIR: fill the build context DIR with what IMAGE's Containerfile copies, except
# what only a cache miss needs (the root filesystem, made in build()).
context() {
  local name=$1 dir=$2
  cp -r "$REPO_ROOT/images/$(dir "$name")/." "$dir/"
  case $name in
    troupe-operator | troupe-agent)
      (cd "$REPO_ROOT" && go build -ldflags "-s -w $(version_ldflags)" -o "$dir/$name" "./cmd/$name")
      cp "$REPO_ROOT/images/passwd" "$REPO_ROOT/images/group" "$dir/"
      # Debian's ca-certificates bundle, as the machine has it.
      cp /etc/ssl/certs/ca-certificates.crt "$dir/"
      ;;
    pause) (cd "$REPO_ROOT" && go build -ldflags "-s -w" -o "$dir/pause" ./images/pause) ;;
    troupe-debian | troupe-debian-trixie) { rootfs_recipe "$(suite "$name")" && sources "$(suite "$name")"; } >"$dir/.recipe" ;;
    mpi-pi-*) echo "${name#mpi-pi-}" >"$dir/.mpi" ;; # the build argument, in the hash
    # The toolchain by its version (its 270 MB are copied in on a cache miss only).
    # The machine's CA bundle, as the operator's images have it: the Go module proxy may be
    # reached through a proxy of the machine's that signs with a CA of its own.
    troupe-go)
      { go version && cat "$(go env GOROOT)/VERSION"; } >"$dir/.go"
      cp /etc/ssl/certs/ca-certificates.crt "$dir/"
      ;;
  esac
}

# hash_dir DIR: one hash of every file's path and content under DIR.
hash_dir() {
  (cd "$1" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
}

# stored_hash REF: the content hash label of REF in buildah's storage (empty if not there).
stored_hash() {
  buildah inspect --type image --format '{{index .OCIv1.Config.Labels "dev.troupe.content-hash"}}' "$1" 2>/dev/null || true
}

declare -A built # IMAGE -> hash, for images built or found in this run

# build IMAGE: build (or find cached) IMAGE after the image it is built on; sets built[IMAGE].
build() {
  local name=$1 base ctx hash archive start
  [[ -n ${built[$name]:-} ]] && return 0
  [[ -f $REPO_ROOT/images/$(dir "$name")/Containerfile ]] || { log "no images/$(dir "$name")/Containerfile"; exit 2; }
  base=$(parent "$name")
  [[ -z $base ]] || build "$base"
  ctx=$(mktemp -d "$cache/.ctx-$name.XXXXXX")
  contexts+=("$ctx")
  context "$name" "$ctx"
  # The name is in the hash too: an archive holds its image under the name it was saved with.
  hash=$({ hash_dir "$ctx"; ref "$name"; [[ -z $base ]] || echo "${built[$base]}"; } | sha256sum | cut -c1-16)
  archive=$cache/$name-$hash.tar
  if [[ -f $archive ]]; then
    # Cached; put it back in buildah's storage if it went (images built on it need it there).
    if [[ $(stored_hash "$(ref "$name")") != "$hash" ]]; then
      log "$name: loading cached $archive"
      buildah pull -q "docker-archive:$archive" >/dev/null
    fi
    log "$name: cached ($(ref "$name"), $archive)"
    built[$name]=$hash
    return 0
  fi
  start=$SECONDS
  log "$name: building $(ref "$name") (hash $hash)"
  if [[ $name == troupe-debian* ]]; then
    local recipe
    mapfile -t recipe < <(rootfs_recipe "$(suite "$name")")
    sources "$(suite "$name")" >"$ctx/.sources"
    "${recipe[@]}" "$ctx/rootfs.tar" "$ctx/.sources" >&2
  fi
  [[ $name != troupe-go ]] || cp -a "$(go env GOROOT)" "$ctx/go"
  # chroot isolation: RUN steps need no container runtime, cgroups or network namespace.
  local args=() old
  old=$(buildah inspect --type image --format '{{.FromImageID}}' "$(ref "$name")" 2>/dev/null || true)
  [[ -z $base ]] || args+=(--build-arg "BASE=$(ref "$base")")
  [[ ! -f $ctx/.mpi ]] || args+=(--build-arg "MPI=$(cat "$ctx/.mpi")")
  buildah bud --isolation chroot --pull-never --layers=false \
    --label "dev.troupe.content-hash=$hash" "${args[@]}" \
    -t "$(ref "$name")" -f "$ctx/Containerfile" "$ctx" >&2
  # The image this one replaces, now untagged, goes.
  [[ -z $old || $old == "$(buildah inspect --type image --format '{{.FromImageID}}' "$(ref "$name")")" ]] ||
    buildah rmi "$old" >/dev/null 2>&1 || true
  # Written under a temporary name and renamed: an interrupted save leaves no archive that
  # looks finished. Older archives of this image go.
  rm -f "$archive.partial"
  buildah push -q "$(ref "$name")" "docker-archive:$archive.partial:$(ref "$name")" >/dev/null
  find "$cache" -maxdepth 1 -name "$name-*.tar" ! -name "${archive##*/}" -delete
  mv "$archive.partial" "$archive"
  log "$name: built in $((SECONDS - start))s, $(du -m "$archive" | cut -f1) MB archive"
  built[$name]=$hash
}

[[ $# -gt 0 ]] || { sed -n '2,12s/^# //p' "$0" >&2; exit 2; }
command -v buildah >/dev/null || { log "buildah is missing: run hack/container-deps.sh"; exit 1; }
mkdir -p "$cache"
# One build at a time on this machine: the worktrees share the cache and buildah's storage.
exec {lock}>"$cache/.lock"
flock "$lock"
contexts=()
trap 'rm -rf "${contexts[@]}" "$cache"/*.tar.partial' EXIT
for image in "$@"; do build "$image"; done
# IMAGE=ARCHIVE lines on stdout, for scripts that import the images somewhere.
for image in "$@"; do echo "$image=$cache/$image-${built[$image]}.tar"; done
