# Sourced by realnode-up.sh and realnode-down.sh: where the real node keeps its state, and how
# its processes are started and stopped. There is one real node per machine at most (it owns
# host ports, iptables rules and a bridge), joined to one local cluster at a time.
# shellcheck shell=bash disable=SC2034 # the variables are for the scripts that source this

# Everything the node writes (containerd's images and containers, runc's state, the kubelet's
# pod directories and mounts, CNI address leases, pod logs, PIDs) is under STATE, which
# realnode-down.sh removes. Process logs are in LOGS, kept after the node stops, for diagnosis.
STATE=$TROUPE_CACHE/realnode
LOGS=$TROUPE_CACHE/realnode-logs
CONTAINERD_SOCK=$STATE/containerd/containerd.sock
# The pods' bridge and addresses: beside the kwok nodes' fake 10.244.0-5.0/24.
BRIDGE=trp-cni0
POD_CIDR=10.244.100.0/24
# kube-dns's cluster IP, in the API server's default Service range (10.0.0.0/24).
DNS_IP=10.0.0.10
KUBELET_PORT=10250
KUBELET_HEALTHZ_PORT=10248
PROXY_HEALTHZ_PORT=10256
PROXY_METRICS_PORT=10249
DNS_READY_PORT=8181
# The node's registry (test/tools/registry), containerd's mirror for docker.io, on loopback.
REGISTRY_ADDR=127.0.0.1:5115
NODE_LABEL=troupe.dev/real-node

rlog() { echo "[realnode] $*" >&2; }

# pid_of NAME: the recorded PID of NAME if that process still runs the recorded binary.
pid_of() {
  local pid bin
  read -r pid bin 2>/dev/null <"$STATE/pids/$1" || return 1
  [[ $(readlink "/proc/$pid/exe" 2>/dev/null) == "$bin" ]] || return 1
  echo "$pid"
}

# start NAME BINARY ARGS...: start BINARY in a session of its own (it outlives the script),
# its output in $LOGS/NAME.log, its PID and binary recorded for pid_of and stop.
start() {
  local name=$1 bin
  bin=$(readlink -f "$2")
  shift 2
  mkdir -p "$STATE/pids" "$LOGS"
  # Without the caller's lock file (realnode-up.sh's $lock): the process must not hold it.
  setsid "$bin" "$@" >"$LOGS/$name.log" 2>&1 </dev/null {lock}>&- &
  echo "$! $bin" >"$STATE/pids/$name"
}

# stop NAME: SIGTERM the recorded process, SIGKILL it after 10 s.
stop() {
  local pid i
  pid=$(pid_of "$1") || return 0
  kill "$pid" 2>/dev/null || return 0
  for ((i = 0; i < 100; i++)); do
    [[ -d /proc/$pid ]] || return 0
    sleep 0.1
  done
  rlog "$1 (pid $pid) did not stop on SIGTERM; killing it"
  kill -9 "$pid" 2>/dev/null || true
}

# teardown: stop the node and undo everything it did to the machine, whether it stopped cleanly
# or a run was interrupted: processes (by recorded PIDs), containers (runc's state under ours),
# mounts under STATE, iptables rules, the bridge, CNI caches, ip_forward.
teardown() {
  local id f
  for c in coredns kube-proxy kubelet registry; do stop "$c"; done
  # Every container runc started for this node, pods' sandboxes included.
  if [[ -d $STATE/runc/k8s.io ]]; then
    for id in $(runc --root "$STATE/runc/k8s.io" list -q 2>/dev/null); do
      runc --root "$STATE/runc/k8s.io" kill --all "$id" KILL 2>/dev/null || true
      runc --root "$STATE/runc/k8s.io" delete --force "$id" 2>/dev/null || true
    done
  fi
  stop containerd
  # containerd's shims outlive it; each one's PID is in its task's bundle directory.
  for f in "$STATE"/containerd/state/io.containerd.runtime.v2.task/*/*/shim.pid; do
    [[ -f $f ]] && kill -9 "$(cat "$f")" 2>/dev/null || true
  done
  # A shim whose task containerd had already deleted has no shim.pid left but lives on (seen
  # after interrupted runs); it is ours when it serves our containerd's socket.
  local pid
  for pid in $(pgrep -f -- "^/usr/bin/containerd-shim-runc-v2 .*-address $STATE/containerd/containerd.sock" || true); do
    kill -9 "$pid" 2>/dev/null || true
  done
  # Pods' volumes, network namespaces, overlay root filesystems: deepest first.
  findmnt -rn -o TARGET | { grep "^$STATE/" || true; } | sort -r | while read -r m; do
    umount "$m" 2>/dev/null || umount -l "$m" || true
  done
  # kube-proxy removes every rule and chain it made (and needs no cluster for it).
  if [[ -f $STATE/kube-proxy.yaml && -x $KUBE_BIN/kube-proxy ]]; then
    "$KUBE_BIN/kube-proxy" --cleanup >>"$LOGS/kube-proxy-cleanup.log" 2>&1 || true
  fi
  # The kubelet's own chains, which kube-proxy leaves: KUBE-FIREWALL (jumped to from INPUT and
  # OUTPUT) and its canaries.
  local ipt table chain rule
  for ipt in iptables ip6tables; do
    for table in filter nat mangle; do
      for chain in KUBE-FIREWALL KUBE-KUBELET-CANARY KUBE-IPTABLES-HINT; do
        "$ipt" -t "$table" -S "$chain" >/dev/null 2>&1 || continue
        "$ipt" -t "$table" -S | { grep -- "-j $chain\$" || true; } | sed 's/^-A/-D/' | while read -r rule; do
          # shellcheck disable=SC2086 # a rule is a list of words
          "$ipt" -t "$table" $rule || true
        done
        "$ipt" -t "$table" -F "$chain" || true
        "$ipt" -t "$table" -X "$chain" || true
      done
    done
  done
  ip link del "$BRIDGE" 2>/dev/null || true
  # The empty cgroups runc made as the containers' parent.
  rmdir /sys/fs/cgroup/*/k8s.io 2>/dev/null || true
  rm -f /var/lib/cni/results/troupe-realnode-* 2>/dev/null || true
  # The CNI bridge plugin turns on IPv4 forwarding for its gateway; put back what was there.
  if [[ -f $STATE/ip_forward ]]; then
    cat "$STATE/ip_forward" >/proc/sys/net/ipv4/ip_forward || true
  fi
  rm -rf "$STATE"
}
