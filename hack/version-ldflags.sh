#!/usr/bin/env bash
# version-ldflags.sh VERSION: the -ldflags that stamp troupe's binaries with VERSION and the git
# revision of the checkout (with -dirty when it has uncommitted changes; "unknown" outside git),
# read by pkg/version. The Makefile's builds, make release and hack/images/build.sh use it.
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:?usage: version-ldflags.sh VERSION}
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
if [[ $revision != unknown ]] && ! git diff --quiet HEAD -- 2>/dev/null; then
  revision+=-dirty
fi
pkg=github.com/troupe-dev/troupe/pkg/version
echo "-X $pkg.Version=$version -X $pkg.Revision=$revision"
