#!/usr/bin/env bash
# realnode-images.sh IMAGE...: build (cached, make images) and import images into the running
# real node's containerd, after the node came up; an image the node already has under the same
# content is imported again cheaply but not rebuilt. For images too big to import on every
# start (troupe-train, 2.4 GB): the real-node tests import it only when a test needs it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=hack/controlplane/lib.sh
source "$here/lib.sh"
# shellcheck source=hack/controlplane/realnode/lib.sh
source "$here/realnode/lib.sh"

[[ $# -gt 0 ]] || { sed -n '2,5s/^# //p' "$0" >&2; exit 2; }
[[ $(id -u) == 0 ]] || { rlog "needs root (containerd's socket)"; exit 1; }
pid_of containerd >/dev/null || { rlog "the real node does not run: start it with REAL_NODE=1 cluster-up.sh"; exit 1; }
mapfile -t archives < <("$REPO_ROOT/hack/images/build.sh" "$@")
for a in "${archives[@]}"; do
  start=$SECONDS
  ctr --address "$CONTAINERD_SOCK" -n k8s.io images import "${a#*=}" >/dev/null
  rlog "imported ${a%%=*} in $((SECONDS - start))s"
done
