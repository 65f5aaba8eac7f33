#!/usr/bin/env bash
# realnode-down.sh: stop the real node that realnode-up.sh joined to CLUSTER_NAME, delete its Node
# object and undo everything it did to the machine (also after a crash or an interrupted run).
#   CLUSTER_NAME  (default troupe-demo); a node of another cluster that still exists is left alone
# Stopping a node that does not run is not an error.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=hack/controlplane/lib.sh
source "$here/lib.sh"
# shellcheck source=hack/controlplane/realnode/lib.sh
source "$here/realnode/lib.sh"

CLUSTER_NAME=${CLUSTER_NAME:-troupe-demo}
[[ -d $STATE ]] || exit 0
exec {lock}>"$TROUPE_CACHE/realnode.lock"
flock "$lock"
owner=$(cat "$STATE/cluster" 2>/dev/null || true)
if [[ -n $owner && $owner != "$CLUSTER_NAME" && -d $TROUPE_CACHE/kwok/clusters/$owner ]]; then
  rlog "the real node belongs to cluster $owner, not $CLUSTER_NAME; leaving it"
  exit 0
fi
teardown
kubeconfig=$TROUPE_CACHE/kwok/clusters/$CLUSTER_NAME/kubeconfig.yaml
node=$(hostname | tr '[:upper:]' '[:lower:]')
if [[ -f $kubeconfig ]]; then
  "$KUBE_BIN/kubectl" --kubeconfig "$kubeconfig" delete node "$node" --ignore-not-found --timeout=20s >&2 || true
fi
rlog "real node $node stopped"
