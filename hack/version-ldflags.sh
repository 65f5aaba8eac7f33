#!/usr/bin/env bash
# version-ldflags.sh VERSION [REVISION]: the -ldflags that stamp troupe's binaries with VERSION and
# the git revision of the checkout (with -dirty when it has uncommitted changes; "unknown" outside
# git), or REVISION when given (the Dockerfile, whose build context has no .git), read by
# pkg/version. The Makefile's builds, make release, hack/images/build.sh and the Dockerfile use it.
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:?usage: version-ldflags.sh VERSION [REVISION]}
revision=${2:-}
if [[ -z $revision ]]; then
  revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
  if [[ $revision != unknown ]] && ! git diff --quiet HEAD -- 2>/dev/null; then
    revision+=-dirty
  fi
fi
pkg=github.com/troupe-dev/troupe/pkg/version
echo "-X $pkg.Version=$version -X $pkg.Revision=$revision"
