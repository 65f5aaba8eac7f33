#!/usr/bin/env bash
# install-tool.sh DEST MODULE/PATH@VERSION
# Builds one pinned Go tool into DEST (a versioned path in the cache outside the checkout), so
# every clone on this machine shares it and a version bump builds a new binary beside the old.
set -euo pipefail
dest=$1 pkg=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "building $pkg into $dest" >&2
GOBIN=$tmp GOFLAGS= go install "$pkg"
mkdir -p "$(dirname "$dest")"
mv "$tmp/$(basename "${pkg%@*}")" "$dest"
