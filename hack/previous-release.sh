#!/usr/bin/env bash
# previous-release.sh DIR: the previous release (PREVIOUS_RELEASE, built from this repository at
# PREVIOUS_RELEASE_REVISION: hack/versions.mk) for the upgrade test. Its source tree goes to
# DIR/src (a git archive of the revision: its deploy/ and charts/ are that release's install),
# and its operator and agent images are built by that tree's own hack/images/build.sh, with its
# own versions, into DIR/cache (so the two releases' image archives do not evict each other).
# Prints SRC=<dir> and IMAGE=ARCHIVE lines.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=hack/controlplane/lib.sh
source hack/controlplane/lib.sh
dir=${1:?usage: previous-release.sh DIR}
: "${PREVIOUS_RELEASE:?}" "${PREVIOUS_RELEASE_REVISION:?}"
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
src=$dir/src-$PREVIOUS_RELEASE-${PREVIOUS_RELEASE_REVISION:0:12}
if [[ ! -f $src/.complete ]]; then
  rm -rf "$src"
  mkdir -p "$src"
  git archive "$PREVIOUS_RELEASE_REVISION" | tar -x -C "$src"
  touch "$src/.complete"
fi
echo "SRC=$src"
# A clean environment: this tree's versions (exported by lib.sh) must not name its images.
env -i PATH="$PATH" HOME="$HOME" TROUPE_CACHE="$dir/cache" "$src/hack/images/build.sh" troupe-operator troupe-agent
