#!/usr/bin/env bash
# realnode-images.sh [--push] IMAGE...: build (cached, make images) and import images into the
# running real node's containerd, after the node came up; an image the node already has under
# the same content is imported again cheaply but not rebuilt. For images too big to import on
# every start (troupe-train, 2.4 GB): the real-node tests import it only when a test needs it.
# --push puts them into the node's registry instead, under their names without the docker.io/
# host (the images named docker.io/...: the mpi-pi ones), so that pods whose imagePullPolicy is
# Always pull them from there.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=hack/controlplane/lib.sh
source "$here/lib.sh"
# shellcheck source=hack/controlplane/realnode/lib.sh
source "$here/realnode/lib.sh"

push=false
if [[ ${1:-} == --push ]]; then push=true; shift; fi
[[ $# -gt 0 ]] || { sed -n '2,9s/^# //p' "$0" >&2; exit 2; }
[[ $(id -u) == 0 ]] || { rlog "needs root (containerd's socket)"; exit 1; }
pid_of containerd >/dev/null || { rlog "the real node does not run: start it with REAL_NODE=1 cluster-up.sh"; exit 1; }
# A command substitution, not a process substitution: a build that fails (a full disk, say)
# must stop here, not leave nothing to import and look like success.
built=$("$REPO_ROOT/hack/images/build.sh" "$@")
mapfile -t archives <<<"$built"
if $push; then
  pid_of registry >/dev/null || { rlog "the real node's registry does not run"; exit 1; }
  for a in "${archives[@]}"; do
    start=$SECONDS
    # The archive names the image (a docker archive keeps its reference).
    ref=$(tar -xOf "${a#*=}" manifest.json | sed -n 's/.*"RepoTags":\["\([^"]*\)".*/\1/p')
    [[ $ref == docker.io/* ]] || { rlog "${a%%=*} is named $ref, not docker.io/...: nothing pulls it from the registry"; exit 1; }
    buildah push -q --tls-verify=false "$ref" "docker://$REGISTRY_ADDR/${ref#docker.io/}" >/dev/null
    rlog "pushed $ref to the node's registry in $((SECONDS - start))s"
  done
  exit 0
fi
for a in "${archives[@]}"; do
  start=$SECONDS
  ctr --address "$CONTAINERD_SOCK" -n k8s.io images import "${a#*=}" >/dev/null
  rlog "imported ${a%%=*} in $((SECONDS - start))s"
done
