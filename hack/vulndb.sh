#!/usr/bin/env bash
# vulndb.sh DEST VERSION
# Builds the Go vulnerability database govulncheck reads (-db file://DEST) from the OSV files of
# the golang.org/x/vulndb module at VERSION, fetched from the Go module proxy, with that
# module's own indexdb command.
set -euo pipefail
dest=$1 version=$2
dir=$(GOFLAGS=-mod=mod go mod download -json "golang.org/x/vulndb@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
test -d "$dir/data/osv" || { echo "vulndb.sh: no data/osv in golang.org/x/vulndb@$version ($dir)" >&2; exit 1; }
mkdir -p "$(dirname "$dest")"
tmp=$(mktemp -d "$(dirname "$dest")/vulndb.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "building the Go vulnerability database from golang.org/x/vulndb@$version into $dest" >&2
(cd "$tmp" && GOFLAGS=-mod=mod go run "golang.org/x/vulndb/cmd/indexdb@$version" -vulns "$dir/data/osv" -out "$tmp/db")
mv "$tmp/db" "$dest"
