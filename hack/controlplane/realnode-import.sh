#!/usr/bin/env bash
# realnode-import.sh ARCHIVE...: import image archives (OCI layout or docker archives, as a
# release's are: make release) into the running real node's containerd, under the names they
# carry, for the node's own platform; what an administrator of an air-gapped node does with a
# release's images.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=hack/controlplane/lib.sh
source "$here/lib.sh"
# shellcheck source=hack/controlplane/realnode/lib.sh
source "$here/realnode/lib.sh"
[[ $# -gt 0 ]] || { sed -n '2,5s/^# //p' "$0" >&2; exit 2; }
[[ $(id -u) == 0 ]] || { rlog "needs root (containerd's socket)"; exit 1; }
pid_of containerd >/dev/null || { rlog "the real node does not run: start it with REAL_NODE=1 cluster-up.sh"; exit 1; }
for a in "$@"; do
  ctr --address "$CONTAINERD_SOCK" -n k8s.io images import "$a"
done
