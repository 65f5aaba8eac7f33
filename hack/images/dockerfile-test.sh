#!/usr/bin/env bash
# dockerfile-test.sh: build troupe-operator and troupe-agent with the repository's Dockerfile, as
# `docker build --target` would, with buildah (no registry is reachable here: GO_IMAGE is
# troupe-go, this machine's Go toolchain on the offline Debian root filesystem, built and cached
# by hack/images/build.sh; RUNTIME_IMAGE stays the default, scratch), and check what a user of the
# images would notice: each binary runs in its image and prints the version and revision it was
# built with, is static (the image has no libc), runs as 65532 and not as root, and the image has
# the same files, user and entrypoint as hack/images/build.sh's image of the same name, so the
# chart and config/ run either. The modules come from the Go module proxy through the
# Dockerfile's RUN steps (chroot isolation shares the machine's network); its cache mounts keep
# the modules and the Go build cache in buildah's cache directory, outside the checkout, between
# runs. Removes the images it tagged, its containers and mounts, also when a check fails.
set -euo pipefail
# shellcheck source=hack/controlplane/lib.sh
source "$(dirname "$0")/../controlplane/lib.sh"
: "${IMAGE_REGISTRY:?}" "${IMAGE_TAG:?}" "${DATAPLANE_IMAGE_TAG:?}" "${VERSION:?}"

log() { echo "[dockerfile-test] $*" >&2; }
fail() { log "FAIL: $*"; exit 1; }

command -v buildah >/dev/null || { log "buildah is missing: run hack/container-deps.sh"; exit 1; }
start=$SECONDS

# What this run makes, removed on exit: containers (unmounted first), images it tagged, a
# scratch directory.
containers=()
tagged=()
tmp=$(mktemp -d)
cleanup() {
  local c
  for c in "${containers[@]}"; do
    buildah umount "$c" >/dev/null 2>&1 || true
    buildah rm "$c" >/dev/null 2>&1 || true
  done
  [[ ${#tagged[@]} -eq 0 ]] || buildah rmi "${tagged[@]}" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP # so that an interrupted run cleans up too

# The Go image, and the build script's own images to compare with (all cached by content).
"$REPO_ROOT/hack/images/build.sh" troupe-go troupe-operator troupe-agent >/dev/null
go_image=$IMAGE_REGISTRY/troupe-go:$DATAPLANE_IMAGE_TAG

revision=$(git -C "$REPO_ROOT" rev-parse HEAD 2>/dev/null || echo no-git)
test_tag=localhost/troupe-dockerfile-test-$$
for image in troupe-operator troupe-agent; do
  ref=$test_tag/$image:$VERSION
  tagged+=("$ref")
  log "$image: buildah bud --target $image (GO_IMAGE=$go_image)"
  buildah bud --isolation chroot --pull-never --layers=false --quiet \
    --build-arg "GO_IMAGE=$go_image" --build-arg "REVISION=$revision" \
    --target "$image" -t "$ref" -f "$REPO_ROOT/Dockerfile" "$REPO_ROOT" >/dev/null
done
log "built both in $((SECONDS - start))s"

# config REF: the image's user and entrypoint.
config() { buildah inspect --type image --format '{{.OCIv1.Config.User}} {{.OCIv1.Config.Entrypoint}}' "$1"; }
# files REF: every path in the image with its type and mode, sorted.
files() {
  local c root
  c=$(buildah from --pull-never "$1")
  containers+=("$c")
  root=$(buildah mount "$c")
  (cd "$root" && find . -mindepth 1 -printf '%y %m %p\n' | LC_ALL=C sort)
}

declare -A run_container # IMAGE -> a container of the Dockerfile's image
for image in troupe-operator troupe-agent; do
  ref=$test_tag/$image:$VERSION
  reference=$IMAGE_REGISTRY/$image:$IMAGE_TAG

  [[ $(config "$ref") == "65532:65532 [/$image]" ]] ||
    fail "$image: user and entrypoint are '$(config "$ref")', want '65532:65532 [/$image]'"
  [[ $(config "$ref") == "$(config "$reference")" ]] ||
    fail "$image: user and entrypoint '$(config "$ref")' differ from build.sh's '$(config "$reference")'"
  files "$ref" >"$tmp/$image.files"
  files "$reference" >"$tmp/$image.reference-files"
  diff -u "$tmp/$image.reference-files" "$tmp/$image.files" >&2 ||
    fail "$image: its files differ from build.sh's image (-build.sh +Dockerfile)"

  # Static: file(1) says so of the binary as it lies in the image (the run below could not start
  # a dynamic one either: the image has no dynamic loader).
  c=$(buildah from --pull-never "$ref")
  containers+=("$c")
  run_container[$image]=$c
  root=$(buildah mount "$c")
  file -L "$root/$image" | grep -q 'statically linked' || fail "$image: not static: $(file -L "$root/$image")"

  # It runs, as the image's user, and says what it was built as.
  out=$(buildah run --isolation chroot "$c" -- "/$image" --version 2>&1) || fail "$image --version: $out"
  want="$image $VERSION (revision $revision, "
  [[ $out == "$want"* ]] || fail "$image --version printed '$out', want '$want...'"
  log "$image: $out"
done

# Not root: the operator cannot read a kubeconfig that only root may read (it reads it as its
# first step; root would read it and fail on its content instead).
mkdir "$tmp/probe"
echo 'not a kubeconfig' >"$tmp/probe/kubeconfig"
chmod 0600 "$tmp/probe/kubeconfig"
out=$(buildah run --isolation chroot -v "$tmp/probe:/probe:ro" --env KUBECONFIG=/probe/kubeconfig \
  "${run_container[troupe-operator]}" -- /troupe-operator 2>&1) && fail "troupe-operator ran without a cluster: $out"
[[ $out == *"/probe/kubeconfig: permission denied"* ]] ||
  fail "troupe-operator read a root-only file (it runs as root?): $out"
log "troupe-operator runs as non-root: the root-only kubeconfig is 'permission denied'"
log "passed in $((SECONDS - start))s"
