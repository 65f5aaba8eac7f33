#!/usr/bin/env bash
# realnode-up.sh: join this machine to the local cluster CLUSTER_NAME (cluster-up.sh) as a real
# node beside the kwok nodes, and print the cluster's kubeconfig path as the last line of stdout.
#   CLUSTER_NAME      (default troupe-demo)
#   REAL_NODE_IMAGES  images of make images to import into the node (default: pause troupe-mpi
#                     troupe-operator troupe-agent); pods use them with imagePullPolicy
#                     IfNotPresent or Never, nothing is pulled from outside: docker.io images
#                     come from the node's own registry (realnode-images.sh --push puts them
#                     there), for pods with imagePullPolicy Always
# The node runs Debian's containerd and runc, CNI bridge networking on $POD_CIDR, a kubelet and a
# kube-proxy (iptables) of the cluster's Kubernetes version, and CoreDNS for the cluster's names
# behind the kube-dns Service. It is labelled and tainted troupe.dev/real-node=true:NoSchedule,
# so only pods that tolerate the taint (and select the label) land on it. Running it again reuses
# a healthy node of the same cluster. realnode-down.sh stops it (cluster-down.sh does too).
# State: $TROUPE_CACHE/realnode (removed when the node stops); logs: $TROUPE_CACHE/realnode-logs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=hack/controlplane/lib.sh
source "$here/lib.sh"
# shellcheck source=hack/controlplane/realnode/lib.sh
source "$here/realnode/lib.sh"

CLUSTER_NAME=${CLUSTER_NAME:-troupe-demo}
REAL_NODE_IMAGES=${REAL_NODE_IMAGES:-pause troupe-mpi troupe-operator troupe-agent}
cluster_dir=$TROUPE_CACHE/kwok/clusters/$CLUSTER_NAME
kubeconfig=$cluster_dir/kubeconfig.yaml
kubectl() { "$KUBE_BIN/kubectl" --kubeconfig "$kubeconfig" "$@"; }
start_time=$SECONDS

[[ $(id -u) == 0 ]] || { rlog "needs root (containerd, mounts, iptables)"; exit 1; }
[[ -f $kubeconfig ]] || { rlog "no cluster $CLUSTER_NAME: run cluster-up.sh first"; exit 1; }
"$REPO_ROOT/hack/container-deps.sh"
"$here/build.sh" kubectl kubelet kube-proxy coredns registry

# The node is this machine, under its own host name: the API server dials the kubelet by the
# node's Hostname address, so that name must resolve here. Its InternalIP is the address of the
# interface of the default route (the kubelet refuses a loopback one).
NODE_NAME=$(hostname | tr '[:upper:]' '[:lower:]')
getent hosts "$NODE_NAME" >/dev/null || { rlog "host name $NODE_NAME does not resolve; add it to /etc/hosts"; exit 1; }
dev=$(ip -4 route show default | awk '{for (i = 1; i < NF; i++) if ($i == "dev") print $(i + 1); exit}')
NODE_IP=$(ip -4 -o addr show dev "${dev:-}" scope global 2>/dev/null | awk '{sub(/\/.*/, "", $4); print $4; exit}')
[[ -n $NODE_IP ]] || { rlog "no IPv4 address on the default route's interface ${dev:-(none)}"; exit 1; }

exec {lock}>"$TROUPE_CACHE/realnode.lock"
flock "$lock"

# healthy: the node runs for this cluster, every process is alive and the Node is Ready.
healthy() {
  [[ $(cat "$STATE/cluster" 2>/dev/null) == "$CLUSTER_NAME" ]] || return 1
  for c in registry containerd kubelet kube-proxy coredns; do pid_of "$c" >/dev/null || return 1; done
  kubectl wait --for=condition=Ready "node/$NODE_NAME" --timeout=5s >/dev/null 2>&1
}
if healthy; then
  rlog "reusing real node $NODE_NAME of cluster $CLUSTER_NAME"
  echo "$kubeconfig"
  exit 0
fi
if [[ -f $STATE/cluster && $(cat "$STATE/cluster") != "$CLUSTER_NAME" ]]; then
  other=$(cat "$STATE/cluster")
  if [[ -d $TROUPE_CACHE/kwok/clusters/$other ]] && pid_of kubelet >/dev/null; then
    rlog "the real node serves cluster $other; stop it first (CLUSTER_NAME=$other $here/realnode-down.sh)"
    exit 1
  fi
fi
# Whatever an earlier node left (stopped, crashed or interrupted) goes first.
teardown
mkdir -p "$STATE"/{pids,cni/net.d,kubelet} "$LOGS"
echo "$CLUSTER_NAME" >"$STATE/cluster"
cat /proc/sys/net/ipv4/ip_forward >"$STATE/ip_forward"
# If anything below fails, leave nothing running.
trap 'rc=$?; if ((rc)); then rlog "failed; logs in $LOGS"; teardown; fi' EXIT

# Images: built (cached) by make images, imported into containerd below.
read -ra images <<<"$REAL_NODE_IMAGES"
built=$("$REPO_ROOT/hack/images/build.sh" "${images[@]}") # fails the script when a build fails
mapfile -t archives <<<"$built"
PAUSE_IMAGE=$IMAGE_REGISTRY/pause:$DATAPLANE_IMAGE_TAG
KUBECONFIG_PATH=$kubeconfig

# render FILE: FILE with the ${...} names below filled in.
render() {
  local v args=()
  for v in STATE PAUSE_IMAGE BRIDGE POD_CIDR DNS_IP NODE_IP NODE_NAME KUBECONFIG_PATH KUBELET_PORT \
    KUBELET_HEALTHZ_PORT PROXY_HEALTHZ_PORT PROXY_METRICS_PORT DNS_READY_PORT; do
    args+=(-e "s|\${$v}|${!v}|g")
  done
  sed "${args[@]}" "$here/realnode/$1"
}
render containerd.toml >"$STATE/containerd.toml"
render cni.conflist >"$STATE/cni/net.d/10-troupe-realnode.conflist"
render kubelet.yaml >"$STATE/kubelet.yaml"
render kube-proxy.yaml >"$STATE/kube-proxy.yaml"
render Corefile >"$STATE/Corefile"
# containerd's mirror for docker.io: the node's registry (plain HTTP on loopback).
mkdir -p "$STATE/containerd/certs.d/docker.io"
printf 'server = "https://registry-1.docker.io"\n[host."http://%s"]\n  capabilities = ["pull", "resolve"]\n' \
  "$REGISTRY_ADDR" >"$STATE/containerd/certs.d/docker.io/hosts.toml"

# wait_for WHAT SECONDS CMD...: run CMD until it succeeds, for at most SECONDS.
wait_for() {
  local what=$1 deadline=$((SECONDS + $2))
  shift 2
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS > deadline)); then rlog "$what not ready after ${deadline}s"; return 1; fi
    sleep 0.5
  done
}
ctr() { command ctr --address "$CONTAINERD_SOCK" "$@"; }

rlog "starting the node's registry on $REGISTRY_ADDR"
mkdir -p "$STATE/registry"
start registry "$REGISTRY_BIN/registry" -addr "$REGISTRY_ADDR" -dir "$STATE/registry"
wait_for "registry (log: $LOGS/registry.log)" 30 curl -fsS "http://$REGISTRY_ADDR/v2/"

rlog "starting containerd"
start containerd "$(command -v containerd)" --config "$STATE/containerd.toml"
wait_for "containerd (log: $LOGS/containerd.log)" 30 ctr version
for a in "${archives[@]}"; do
  rlog "importing ${a%%=*}"
  ctr -n k8s.io images import "${a#*=}" >/dev/null
done

rlog "starting kubelet $KUBE_VERSION as node $NODE_NAME ($NODE_IP)"
start kubelet "$KUBE_BIN/kubelet" --config "$STATE/kubelet.yaml" --kubeconfig "$kubeconfig" \
  --root-dir "$STATE/kubelet" --cert-dir "$STATE/kubelet/pki" --hostname-override "$NODE_NAME" \
  --node-ip "$NODE_IP" --node-labels "$NODE_LABEL=true"
wait_for "node $NODE_NAME registration (log: $LOGS/kubelet.log)" 120 kubectl get node "$NODE_NAME"
# The Node's pod CIDR, for kube-proxy and for users to read (the CNI configuration has it too).
if [[ -z $(kubectl get node "$NODE_NAME" -o jsonpath='{.spec.podCIDR}') ]]; then
  kubectl patch node "$NODE_NAME" -p "{\"spec\":{\"podCIDR\":\"$POD_CIDR\",\"podCIDRs\":[\"$POD_CIDR\"]}}" >/dev/null
fi

rlog "starting kube-proxy and CoreDNS $COREDNS_VERSION"
start kube-proxy "$KUBE_BIN/kube-proxy" --config "$STATE/kube-proxy.yaml"
start coredns "$COREDNS_BIN/coredns" -conf "$STATE/Corefile"
render kube-dns.yaml | kubectl apply -f - >&2
wait_for "node $NODE_NAME Ready (log: $LOGS/kubelet.log)" 120 \
  kubectl wait --for=condition=Ready "node/$NODE_NAME" --timeout=5s
wait_for "kube-proxy (log: $LOGS/kube-proxy.log)" 60 curl -fsS "http://127.0.0.1:$PROXY_HEALTHZ_PORT/healthz"
wait_for "CoreDNS (log: $LOGS/coredns.log)" 60 curl -fsS "http://127.0.0.1:$DNS_READY_PORT/ready"

trap - EXIT
rlog "real node $NODE_NAME of cluster $CLUSTER_NAME up in $((SECONDS - start_time))s (state $STATE, logs $LOGS)"
echo "$kubeconfig"
