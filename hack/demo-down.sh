#!/usr/bin/env bash
# demo-down.sh: stop what make demo started: the operator process and the local cluster.
#   --operator-only   stop only the operator (used by demo.sh before it starts a new one)
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/controlplane/lib.sh

export CLUSTER_NAME=${CLUSTER_NAME:-troupe-demo}
DEMO_DIR=$TROUPE_CACHE/demo/$CLUSTER_NAME
pidfile=$DEMO_DIR/operator.pid
if [[ -f $pidfile ]]; then
  pid=$(cat "$pidfile")
  if kill "$pid" 2>/dev/null; then
    # Wait for it to let go of its ports before a new one starts.
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -f "$pidfile"
fi
[[ ${1:-} == --operator-only ]] && exit 0
hack/controlplane/cluster-down.sh
