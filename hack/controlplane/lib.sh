# Sourced by the scripts in hack/controlplane: repository paths and pinned versions.
# shellcheck shell=bash disable=SC2034 # the variables are for the scripts that source this

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TOOLS_MODULES=$REPO_ROOT/test/tools

# hack/versions.mk is the only place versions are written down. Let make evaluate it (so
# `?=` keeps any value already in the environment, and $(HOME) expands), and print every
# variable it assigns as NAME=value for the shell.
load_versions() {
  local mk=$REPO_ROOT/hack/versions.mk names
  names=$(sed -n 's/^\([A-Z][A-Z0-9_]*\)[[:space:]]*?=.*/\1/p' "$mk" | tr '\n' ' ')
  eval "$(make --no-print-directory -s -f "$mk" -f - print-versions <<EOF
print-versions: ; @\$(foreach v,$names,echo "export \$(v)='\$(\$(v))'";)
EOF
)"
}
load_versions

# Fail early with the variable's name rather than half way through a build.
: "${KUBE_VERSION:?}" "${KUBE_STAGING_VERSION:?}" "${KUBE_OLDEST_VERSION:?}" "${KUBE_OLDEST_STAGING_VERSION:?}" "${ETCD_VERSION:?}" "${KWOK_VERSION:?}" "${TROUPE_CACHE:?}"
: "${SCHEDULER_PLUGINS_VERSION:?}" "${SCHEDULER_PLUGINS_KUBE_VERSION:?}" "${VOLCANO_VERSION:?}"

KUBE_BIN=$TROUPE_CACHE/kube-$KUBE_VERSION/bin
KUBE_OLDEST_BIN=$TROUPE_CACHE/kube-$KUBE_OLDEST_VERSION/bin
ETCD_BIN=$TROUPE_CACHE/etcd-$ETCD_VERSION/bin
KWOK_BIN=$TROUPE_CACHE/kwok-$KWOK_VERSION/bin
SCHEDULER_PLUGINS_BIN=$TROUPE_CACHE/scheduler-plugins-$SCHEDULER_PLUGINS_VERSION/bin
VOLCANO_BIN=$TROUPE_CACHE/volcano-$VOLCANO_VERSION/bin
COREDNS_BIN=$TROUPE_CACHE/coredns-${COREDNS_VERSION:?}/bin
REGISTRY_BIN=$TROUPE_CACHE/registry-${REGISTRY_VERSION:?}/bin
MPI_OPERATOR_BIN=$TROUPE_CACHE/mpi-operator-${MPI_OPERATOR_VERSION:?}/bin
MPI_OPERATOR_CRDS=$TROUPE_CACHE/mpi-operator-$MPI_OPERATOR_VERSION/crds
KUEUE_BIN=$TROUPE_CACHE/kueue-${KUEUE_VERSION:?}/bin
# Kueue's CRDs (crds/) and the local cluster's webhook configurations for it (webhooks.yaml).
KUEUE_MANIFESTS=$TROUPE_CACHE/kueue-$KUEUE_VERSION
PROMETHEUS_BIN=$TROUPE_CACHE/prometheus-${PROMETHEUS_VERSION:?}/bin
METRICS_SERVER_BIN=$TROUPE_CACHE/metrics-server-${METRICS_SERVER_VERSION:?}/bin

log() { echo "[controlplane] $*" >&2; }

# free_port VAR: set VAR to a port nothing listens on (the gang schedulers' and Kueue's of
# cluster-up.sh, the demo operator's). kwokctl hands out ports counting down from 32767, so take
# them below that, from a random start (so that two scripts running at once rarely meet), and
# never one an earlier call of this shell gave.
free_port() {
  local p
  for ((p = 20000 + RANDOM % 10000; p < 30000; p++)); do
    [[ " ${given_ports:-} " == *" $p "* ]] && continue
    # A refused connection: nothing listens there.
    if ! (: <"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      printf -v "$1" %s "$p"
      given_ports+=" $p"
      return
    fi
  done
  log "no free port"
  exit 1
}
