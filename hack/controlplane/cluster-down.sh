#!/usr/bin/env bash
# cluster-down.sh: stop and delete the local simulated cluster that cluster-up.sh made.
#   CLUSTER_NAME  (default troupe-demo)
# Deleting a cluster that does not exist is not an error.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=hack/controlplane/lib.sh
source "$here/lib.sh"

CLUSTER_NAME=${CLUSTER_NAME:-troupe-demo}
export KWOK_WORKDIR=$TROUPE_CACHE/kwok
cluster_dir=$KWOK_WORKDIR/clusters/$CLUSTER_NAME

[[ -d $cluster_dir ]] || exit 0
exec {lock}>"$KWOK_WORKDIR/.lock"
flock "$lock"
# The real node first (if it serves this cluster): its processes are not kwokctl's.
CLUSTER_NAME=$CLUSTER_NAME "$here/realnode-down.sh"
# kwokctl stops the processes it started and removes the cluster's directory, and its context
# from the kubeconfig cluster-up.sh gave it instead of ~/.kube/config.
"$KWOK_BIN/kwokctl" delete cluster --name "$CLUSTER_NAME" --kubeconfig "$KWOK_WORKDIR/contexts.yaml" >&2
rm -rf "$cluster_dir"
log "cluster $CLUSTER_NAME deleted"
