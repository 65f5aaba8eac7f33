#!/usr/bin/env bash
# cluster-up.sh: start (or reuse) a local simulated cluster and print its kubeconfig path as the
# last line of stdout; everything else goes to stderr.
#   CLUSTER_NAME  (default troupe-demo)
# A real kube-apiserver, etcd, kube-controller-manager (Job, StatefulSet, garbage collector...)
# and kube-scheduler, all processes on this machine (kwokctl's binary runtime, no containers),
# with kwok faking the nodes of nodes.yaml and the pods' lifecycle of pod-stages.yaml, and
# `kubectl exec` running commands locally (exec.yaml). Binaries come from build.sh (cached).
# Running it again reuses a healthy cluster made from the same files and versions, and
# otherwise deletes and recreates it (a few seconds).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=hack/controlplane/lib.sh
source "$here/lib.sh"

CLUSTER_NAME=${CLUSTER_NAME:-troupe-demo}
# kwokctl keeps each cluster's state (pki, logs, kubeconfig, pids) under $KWOK_WORKDIR.
export KWOK_WORKDIR=$TROUPE_CACHE/kwok
cluster_dir=$KWOK_WORKDIR/clusters/$CLUSTER_NAME
kubeconfig=$cluster_dir/kubeconfig.yaml
# kwokctl adds each cluster to a kubeconfig, ~/.kube/config by default; keep it out of that one
# and in its own file (v0.7.0's delete cannot be told to skip this step).
contexts=$KWOK_WORKDIR/contexts.yaml
configs=("$here/kwokctl.yaml" "$here/pod-stages.yaml" "$here/exec.yaml")
start=$SECONDS

"$here/build.sh" etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok kwokctl
kwokctl=$KWOK_BIN/kwokctl
kubectl() { "$KUBE_BIN/kubectl" --kubeconfig "$kubeconfig" "$@"; }

# What the cluster is made from; a cluster made from anything else is recreated.
fingerprint=$(cat "${configs[@]}" "$here/nodes.yaml" | sha256sum | cut -c1-16)-$KUBE_VERSION-$ETCD_VERSION-$KWOK_VERSION

# One cluster-up or cluster-down at a time on this machine: the e2e tests and the demo may race
# for the same cluster, and kwokctl picks free ports without reserving them.
mkdir -p "$KWOK_WORKDIR"
exec {lock}>"$KWOK_WORKDIR/.lock"
flock "$lock"

if [[ -d $cluster_dir ]]; then
  if [[ $(cat "$cluster_dir/troupe-fingerprint" 2>/dev/null) == "$fingerprint" ]] &&
    kubectl get --raw /readyz >/dev/null 2>&1 &&
    kubectl wait --for=condition=Ready nodes --all --timeout=10s >/dev/null 2>&1; then
    log "reusing cluster $CLUSTER_NAME"
    echo "$kubeconfig"
    exit 0
  fi
  log "cluster $CLUSTER_NAME is stale or unhealthy; recreating it"
  "$kwokctl" delete cluster --name "$CLUSTER_NAME" --kubeconfig "$contexts" >&2
  rm -rf "$cluster_dir"
fi

config_flags=()
for c in "${configs[@]}"; do config_flags+=(--config "$c"); done
"$kwokctl" create cluster --name "$CLUSTER_NAME" --runtime binary --kubeconfig "$contexts" \
  "${config_flags[@]}" \
  --etcd-binary "$ETCD_BIN/etcd" \
  --kube-apiserver-binary "$KUBE_BIN/kube-apiserver" \
  --kube-controller-manager-binary "$KUBE_BIN/kube-controller-manager" \
  --kube-scheduler-binary "$KUBE_BIN/kube-scheduler" \
  --kwok-controller-binary "$KWOK_BIN/kwok" \
  --wait 2m >&2 {lock}>&- # the cluster's processes outlive this script: they must not hold the lock

kubectl apply -f "$here/nodes.yaml" >&2
kubectl wait --for=condition=Ready nodes --all --timeout=60s >&2
# Pods are refused until the service account controller has made the namespace's default
# ServiceAccount; wait for it so the first kubectl create after this script works.
until kubectl get serviceaccount default >/dev/null 2>&1; do sleep 0.2; done

echo "$fingerprint" >"$cluster_dir/troupe-fingerprint"
log "cluster $CLUSTER_NAME up in $((SECONDS - start))s (kubectl: $KUBE_BIN/kubectl)"
echo "$kubeconfig"
