#!/usr/bin/env bash
# cluster-up.sh: start (or reuse) a local simulated cluster and print its kubeconfig path as the
# last line of stdout; everything else goes to stderr.
#   CLUSTER_NAME  (default troupe-demo)
#   NODES         the cluster's Node objects (default hack/controlplane/nodes.yaml; see
#                 nodes-gang.yaml for a cluster of exactly two 4-CPU nodes)
#   DISABLE_QPS_LIMITS=1  kube-controller-manager and kube-scheduler talk to the API server
#                 unthrottled (QPS 5000, burst 10000) and kube-apiserver runs without flow control
#                 (kwokctl --disable-qps-limits; kwok itself is never throttled): make bench's
#                 "unthrottled" profile. Without it the cluster runs at Kubernetes' defaults
#                 (kube-controller-manager QPS 20 burst 30, kube-scheduler 50 / 100)
#   CLUSTER_ADDONS  what runs beside the control plane: "gang" (the two gang schedulers),
#                 "kueue" (Kueue's manager) and "metrics" (metrics-server, the resource metrics
#                 API of HorizontalPodAutoscalers and kubectl top: real numbers only from a real
#                 node), space-separated; default "gang kueue", "" for a plain cluster (make
#                 demo's, for an example that needs neither: three fewer builds)
#   REAL_NODE=1   also join this machine to the cluster as a real node (realnode-up.sh): pods
#                 that tolerate troupe.dev/real-node run there in containers
# A real kube-apiserver, etcd, kube-controller-manager (Job, StatefulSet, garbage collector...)
# and kube-scheduler, all processes on this machine (kwokctl's binary runtime, no containers),
# with kwok faking the nodes of $NODES and the pods' lifecycle of pod-stages.yaml, and
# `kubectl exec` running commands locally (exec.yaml). Beside kube-scheduler run the two gang
# schedulers, scheduler-plugins' Coscheduling (`scheduler-plugins-scheduler`) and Volcano's
# (`volcano`), with their CRDs and Volcano's `default` Queue installed, and Kueue's manager with
# its CRDs and webhooks (kueue-config.yaml; docs/kueue.md). Binaries come from build.sh (cached).
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
NODES=${NODES:-$here/nodes.yaml}
# kwokctl.yaml, coscheduler.yaml and volcano-scheduler.conf are templates: render() fills them in
# for this cluster, into $troupe_dir (inside the cluster's directory, so it goes with it).
configs=("$here/kwokctl.yaml" "$here/pod-stages.yaml" "$here/exec.yaml")
templates=("$here/kwokctl.yaml" "$here/coscheduler.yaml" "$here/volcano-scheduler.conf" "$here/kueue-config.yaml" "$here/kueue-run.sh")
troupe_dir=$cluster_dir/troupe
CLUSTER_ADDONS=${CLUSTER_ADDONS-gang kueue}
addon() { [[ " $CLUSTER_ADDONS " == *" $1 "* ]]; }
for a in $CLUSTER_ADDONS; do
  [[ $a == gang || $a == kueue || $a == metrics ]] || { log "CLUSTER_ADDONS: unknown add-on $a (gang, kueue, metrics)"; exit 2; }
done
# What the cluster's add-ons are made from (the fingerprint's files): the gang schedulers' CRDs and
# Volcano's default Queue, Kueue's CRDs and webhooks; the CRDs (files under crds/) are installed.
crds=()
components=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok kwokctl)
if addon gang; then
  crds+=("$here"/crds/volcano/*.yaml "$here"/crds/scheduler-plugins/*.yaml "$here/volcano-queue.yaml")
  components+=(coscheduler volcano-scheduler)
fi
addon kueue && components+=(kueue)
addon metrics && components+=(metrics-server)
# Kueue's CRDs whose versions (v1beta2 stored since Kueue v0.16, v1beta1 still served) Kueue's webhook
# converts (the CRDs its own kustomization patches with the conversion webhook).
kueue_converted=(localqueues clusterqueues cohorts workloads multikueueclusters)
start=$SECONDS

"$here/build.sh" "${components[@]}"
! addon kueue || crds+=("$KUEUE_MANIFESTS"/crds/*.yaml "$KUEUE_MANIFESTS/webhooks.yaml")
kwokctl=$KWOK_BIN/kwokctl
kubectl() { "$KUBE_BIN/kubectl" --kubeconfig "$kubeconfig" "$@"; }

# The API server listens on loopback only, unless the cluster has a real node: its pods reach the
# API server through the kubernetes Service, whose endpoint is this machine's address.
APISERVER_BIND_ADDRESS=127.0.0.1
[[ ${REAL_NODE:-} != 1 ]] || APISERVER_BIND_ADDRESS=0.0.0.0

# What the cluster is made from; a cluster made from anything else is recreated.
fingerprint=$(cat "${configs[@]}" "${templates[@]:1}" "$NODES" "${crds[@]}" | sha256sum | cut -c1-16)-${CLUSTER_ADDONS// /+}-$KUBE_VERSION-$ETCD_VERSION-$KWOK_VERSION-$SCHEDULER_PLUGINS_VERSION-$VOLCANO_VERSION-$KUEUE_VERSION-$APISERVER_BIND_ADDRESS
! addon metrics || fingerprint+=-metrics-server-$METRICS_SERVER_VERSION
# A cluster started without the client limits (DISABLE_QPS_LIMITS=1, make bench's unthrottled
# profile) is not the same cluster as one at Kubernetes' defaults: neither is reused for the other.
[[ ${DISABLE_QPS_LIMITS:-} != 1 ]] || fingerprint+=-unthrottled

# schedulers_ready: the add-ons answer on their ports (written down by the run that made the
# cluster): both gang schedulers, Volcano's with its caches synced (it serves /healthz before
# that), and Kueue once its webhooks serve with the certificate its rotator accepted.
schedulers_ready() {
  local COSCHEDULER_PORT VOLCANO_PORT KUEUE_HEALTH_PORT
  # shellcheck source=/dev/null
  source "$troupe_dir/ports" 2>/dev/null || return 1
  if addon gang; then
    [[ $(curl -ksS --max-time 2 "https://127.0.0.1:$COSCHEDULER_PORT/readyz" 2>/dev/null) == ok ]] &&
      [[ $(curl -sS --max-time 2 "http://127.0.0.1:$VOLCANO_PORT/healthz" 2>/dev/null) == ok ]] &&
      grep -q "Scheduler completes Initialization" "$cluster_dir/logs/volcano-scheduler.log" 2>/dev/null || return 1
  fi
  if addon kueue; then
    [[ $(curl -sS --max-time 2 "http://127.0.0.1:$KUEUE_HEALTH_PORT/readyz" 2>/dev/null) == ok ]] || return 1
  fi
}

# without_absent_addons: the rendered kwokctl.yaml on stdin without the components of the add-ons
# this cluster does not run (each a "- name: X" entry of its components list).
without_absent_addons() {
  local skip=" "
  addon gang || skip+="coscheduler volcano-scheduler "
  addon kueue || skip+="kueue "
  # The "components:" line is written with the first entry kept: none kept, none written.
  awk -v skip="$skip" '
    /^components:/ { inComponents = 1; next }
    inComponents && /^- name: / {
      dropping = index(skip, " " $3 " ") > 0
      if (!dropping && !headed) { print "components:"; headed = 1 }
    }
    !inComponents || (headed && !dropping) { print }
  '
}

# component_exited PID_FILE: the component of PID_FILE is not running (gone, or a zombie: this
# machine's init may not reap kwokctl's orphans, and kwokctl takes a zombie for running).
component_exited() {
  local state
  state=$(ps -o stat= -p "$(<"$1")" 2>/dev/null) || return 0
  [[ $state == Z* ]]
}

# components_running: every process kwokctl started for the cluster is alive. The controller
# manager exits if the API server is not healthy 10 s after it starts (its RBAC bootstrap can take
# longer on a loaded machine) and kwokctl does not restart it: a cluster without it makes no pods.
components_running() {
  local pid_file
  for pid_file in "$cluster_dir"/pids/*.pid; do
    ! component_exited "$pid_file" || return 1
  done
}

# restart_exited_components: start again the components that exited (kwokctl's start starts the
# components without a live pid file).
restart_exited_components() {
  local pid_file exited=()
  for pid_file in "$cluster_dir"/pids/*.pid; do
    component_exited "$pid_file" || continue
    exited+=("$(basename "$pid_file" .pid)")
    rm -f "$pid_file"
  done
  ((${#exited[@]})) || return 0
  log "${exited[*]} of cluster $CLUSTER_NAME exited; starting again (see $cluster_dir/logs)"
  # The restarted processes outlive this script: they must not hold its lock.
  "$kwokctl" start cluster --name "$CLUSTER_NAME" >&2 {lock}>&-
}

# render FILE: FILE with ${CLUSTER_DIR}, ${SCHEDULER_PLUGINS_BIN}, ${VOLCANO_BIN},
# ${COSCHEDULER_PORT}, ${VOLCANO_PORT}, ${APISERVER_BIND_ADDRESS}, ${KUBE_BIN}, ${KUEUE_BIN} and
# ${KUEUE_*_PORT} filled in (nothing else, so other $ stays as is).
render() {
  sed -e "s|\${CLUSTER_DIR}|$cluster_dir|g" \
    -e "s|\${KUBE_BIN}|$KUBE_BIN|g" -e "s|\${KUEUE_BIN}|$KUEUE_BIN|g" \
    -e "s|\${KUEUE_WEBHOOK_PORT}|$KUEUE_WEBHOOK_PORT|g" -e "s|\${KUEUE_HEALTH_PORT}|$KUEUE_HEALTH_PORT|g" \
    -e "s|\${KUEUE_METRICS_PORT}|$KUEUE_METRICS_PORT|g" \
    -e "s|\${SCHEDULER_PLUGINS_BIN}|$SCHEDULER_PLUGINS_BIN|g" -e "s|\${VOLCANO_BIN}|$VOLCANO_BIN|g" \
    -e "s|\${COSCHEDULER_PORT}|$COSCHEDULER_PORT|g" -e "s|\${VOLCANO_PORT}|$VOLCANO_PORT|g" \
    -e "s|\${APISERVER_BIND_ADDRESS}|$APISERVER_BIND_ADDRESS|g" "$1"
}

# install_kueue: what Kueue's manager (kueue-run.sh) waits for, its certificate Secret last.
# Its CRDs are in already; their conversion webhook, like the admission webhooks, is Kueue on
# this machine, by URL.
install_kueue() {
  # Kueue's webhook server reads the certificate from this directory, where a pod would have the
  # Secret mounted; its rotator waits for the files there.
  local c certs=$troupe_dir/kueue-certs
  for c in "${kueue_converted[@]}"; do
    kubectl patch crd "$c.kueue.x-k8s.io" --type merge -p '{"spec":{"conversion":{"strategy":"Webhook",
      "webhook":{"conversionReviewVersions":["v1"],"clientConfig":{"url":"https://localhost:'"$KUEUE_WEBHOOK_PORT"'/convert"}}}}}' >&2
  done
  render "$KUEUE_MANIFESTS/webhooks.yaml" | kubectl apply --server-side -f - >&2
  kubectl create namespace kueue-system >&2
  # A CA and a serving certificate Kueue's rotator accepts (its CA is named kueue-ca; the
  # certificate is valid for kueue-webhook-service.kueue-system.svc) that the API server accepts
  # for https://localhost (PKCS#1 keys, as the rotator writes them).
  mkdir -p "$certs"
  openssl genrsa -traditional -out "$certs/ca.key" 2048 2>/dev/null
  openssl req -x509 -new -key "$certs/ca.key" -out "$certs/ca.crt" -days 3650 -subj /O=kueue/CN=kueue-ca \
    -addext subjectAltName=DNS:kueue-ca -addext basicConstraints=critical,CA:TRUE \
    -addext keyUsage=critical,keyCertSign,digitalSignature,keyEncipherment
  openssl genrsa -traditional -out "$certs/tls.key" 2048 2>/dev/null
  openssl req -new -key "$certs/tls.key" -subj /CN=kueue-webhook-service.kueue-system.svc |
    openssl x509 -req -CA "$certs/ca.crt" -CAkey "$certs/ca.key" -CAcreateserial -days 3650 -out "$certs/tls.crt" \
      -extfile <(printf '%s\n' "subjectAltName=DNS:kueue-webhook-service.kueue-system.svc,DNS:localhost,IP:127.0.0.1" \
        "extendedKeyUsage=serverAuth" "keyUsage=critical,digitalSignature,keyEncipherment") 2>/dev/null
  kubectl -n kueue-system create secret generic kueue-webhook-server-cert --from-file="$certs/ca.crt" \
    --from-file="$certs/ca.key" --from-file="$certs/tls.crt" --from-file="$certs/tls.key" >&2
}

# One cluster-up or cluster-down at a time on this machine: the e2e tests and the demo may race
# for the same cluster, and kwokctl picks free ports without reserving them.
mkdir -p "$KWOK_WORKDIR"
exec {lock}>"$KWOK_WORKDIR/.lock"
flock "$lock"

if [[ -d $cluster_dir ]]; then
  if [[ $(cat "$cluster_dir/troupe-fingerprint" 2>/dev/null) == "$fingerprint" ]] &&
    components_running && kubectl get --raw /readyz >/dev/null 2>&1 &&
    kubectl wait --for=condition=Ready nodes -l '!troupe.dev/real-node' --timeout=10s >/dev/null 2>&1 &&
    schedulers_ready; then
    log "reusing cluster $CLUSTER_NAME"
    exec {lock}>&-
    if [[ ${REAL_NODE:-} == 1 ]]; then CLUSTER_NAME=$CLUSTER_NAME "$here/realnode-up.sh" >/dev/null; fi
    echo "$kubeconfig"
    exit 0
  fi
  log "cluster $CLUSTER_NAME is stale or unhealthy; recreating it"
  CLUSTER_NAME=$CLUSTER_NAME "$here/realnode-down.sh"
  "$kwokctl" delete cluster --name "$CLUSTER_NAME" --kubeconfig "$contexts" >&2
  rm -rf "$cluster_dir"
fi

free_port COSCHEDULER_PORT
free_port VOLCANO_PORT
free_port KUEUE_WEBHOOK_PORT
free_port KUEUE_HEALTH_PORT
free_port KUEUE_METRICS_PORT
mkdir -p "$troupe_dir"
for t in "${templates[@]}"; do render "$t" >"$troupe_dir/${t##*/}"; done
without_absent_addons <"$troupe_dir/kwokctl.yaml" >"$troupe_dir/kwokctl.yaml.new"
mv "$troupe_dir/kwokctl.yaml.new" "$troupe_dir/kwokctl.yaml"
# kwokctl names a component's log after its binary: logs/kueue.log.
mv "$troupe_dir/kueue-run.sh" "$troupe_dir/kueue"
chmod +x "$troupe_dir/kueue"
printf 'COSCHEDULER_PORT=%s\nVOLCANO_PORT=%s\nKUEUE_WEBHOOK_PORT=%s\nKUEUE_HEALTH_PORT=%s\nKUEUE_METRICS_PORT=%s\n' \
  "$COSCHEDULER_PORT" "$VOLCANO_PORT" "$KUEUE_WEBHOOK_PORT" "$KUEUE_HEALTH_PORT" "$KUEUE_METRICS_PORT" >"$troupe_dir/ports"

config_flags=()
[[ ${DISABLE_QPS_LIMITS:-} != 1 ]] || config_flags+=(--disable-qps-limits)
# metrics-server is kwokctl's own component: kwokctl runs it (its flags, and ours from the
# componentsPatches of kwokctl.yaml) and registers the APIService v1beta1.metrics.k8s.io.
! addon metrics || config_flags+=(--enable metrics-server --metrics-server-binary "$METRICS_SERVER_BIN/metrics-server")
for c in "$troupe_dir/kwokctl.yaml" "${configs[@]:1}"; do config_flags+=(--config "$c"); done
"$kwokctl" create cluster --name "$CLUSTER_NAME" --runtime binary --kubeconfig "$contexts" \
  "${config_flags[@]}" \
  --etcd-binary "$ETCD_BIN/etcd" \
  --kube-apiserver-binary "$KUBE_BIN/kube-apiserver" \
  --kube-controller-manager-binary "$KUBE_BIN/kube-controller-manager" \
  --kube-scheduler-binary "$KUBE_BIN/kube-scheduler" \
  --kwok-controller-binary "$KWOK_BIN/kwok" \
  --wait 2m >&2 {lock}>&- # the cluster's processes outlive this script: they must not hold the lock

# The gang schedulers started with the cluster and wait for their CRDs: install them first.
crd_flags=()
for c in "${crds[@]}"; do
  if [[ $c == */crds/* ]]; then crd_flags+=(-f "$c"); fi
done
((${#crd_flags[@]} == 0)) || kubectl apply --server-side "${crd_flags[@]}" >&2
kubectl apply -f "$NODES" >&2
((${#crd_flags[@]} == 0)) || kubectl wait --for=condition=Established crd --all --timeout=60s >&2
# Volcano's scheduler makes this Queue too as it starts, with the same spec; a server-side apply
# creates or updates it in one request, whichever comes first (and needs no OpenAPI schema of
# the new CRD, which a client-side apply waits for).
! addon gang || kubectl apply --server-side --force-conflicts -f "$here/volcano-queue.yaml" >&2
! addon kueue || install_kueue
kubectl wait --for=condition=Ready nodes --all --timeout=60s >&2
# Pods are refused until the service account controller has made the namespace's default
# ServiceAccount; wait for it so the first kubectl create after this script works (bounded, and
# starting again a controller manager that gave up on a slow API server).
for ((i = 0; i < 300; i++)); do
  kubectl get serviceaccount default >/dev/null 2>&1 && break
  restart_exited_components
  sleep 0.2
done
if ! kubectl get serviceaccount default >/dev/null 2>&1; then
  log "no default ServiceAccount after 60s; see $cluster_dir/logs/kube-controller-manager.log"
  exit 1
fi
# Both gang schedulers ready (bounded: their logs say why not).
for ((i = 0; i < 300; i++)); do
  schedulers_ready && break
  restart_exited_components
  sleep 0.2
done
if ! schedulers_ready; then
  log "the add-ons ($CLUSTER_ADDONS) are not ready after 60s; see $cluster_dir/logs/{coscheduler,volcano-scheduler,kueue}.log"
  exit 1
fi
# Every component still running: a controller manager that gave up after the checks above would
# leave the cluster without Jobs' and StatefulSets' pods.
restart_exited_components

echo "$fingerprint" >"$cluster_dir/troupe-fingerprint"
log "cluster $CLUSTER_NAME up in $((SECONDS - start))s (kubectl: $KUBE_BIN/kubectl)"
exec {lock}>&-
if [[ ${REAL_NODE:-} == 1 ]]; then CLUSTER_NAME=$CLUSTER_NAME "$here/realnode-up.sh" >/dev/null; fi
echo "$kubeconfig"
