#!/usr/bin/env bash
# multikueue-up.sh MANAGER_KUBECONFIG WORKER=KUBECONFIG...: make the cluster of MANAGER_KUBECONFIG
# a Kueue MultiKueue manager dispatching to the worker clusters named (docs/kueue.md), each a
# local cluster of cluster-up.sh with Kueue and its own troupe-operator. Idempotent.
#   QUEUE       the LocalQueue jobs name (label kueue.x-k8s.io/queue-name), default team-a
#   NAMESPACES  the namespaces it is made in, in every cluster, default "default"
#   WORKER_CPU  each worker's ClusterQueue quota of CPUs, default 16 (memory: 4Gi a CPU)
# In the manager: per worker a Secret in kueue-system holding its kubeconfig, flattened (Kueue
# takes only certificates inline, no file paths) and a MultiKueueCluster; one MultiKueueConfig
# of them all, an AdmissionCheck of controller kueue.x-k8s.io/multikueue, a ClusterQueue
# troupe-multikueue that requires it, and LocalQueue $QUEUE. In each worker: a ClusterQueue
# troupe-worker and LocalQueue $QUEUE, where MultiKueue's copies of the Workloads queue (by the
# same name). Returns once the AdmissionCheck and every MultiKueueCluster are Active.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=hack/controlplane/lib.sh
source "$here/lib.sh"

(($# >= 2)) || { echo "usage: $0 MANAGER_KUBECONFIG WORKER=KUBECONFIG..." >&2; exit 2; }
manager=$1
shift
QUEUE=${QUEUE:-team-a}
NAMESPACES=${NAMESPACES:-default}
WORKER_CPU=${WORKER_CPU:-16}
k() { "$KUBE_BIN/kubectl" --kubeconfig "$1" "${@:2}"; }

# queues KUBECONFIG CLUSTERQUEUE CPU [CHECK]: a ResourceFlavor, the ClusterQueue (requiring the
# admission check CHECK, if given) and the LocalQueue $QUEUE in every namespace.
queues() {
  local kc=$1 cq=$2 cpu=$3 check=${4:-} strategy='' ns
  [[ -z $check ]] || strategy="admissionChecksStrategy: {admissionChecks: [{name: $check}]}"
  k "$kc" apply --server-side -f - >&2 <<EOF
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: $cq}
spec:
  namespaceSelector: {}
  $strategy
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors: [{name: default, resources: [{name: cpu, nominalQuota: $cpu}, {name: memory, nominalQuota: $((cpu * 4))Gi}]}]
EOF
  for ns in $NAMESPACES; do
    k "$kc" get namespace "$ns" >/dev/null 2>&1 || k "$kc" create namespace "$ns" >&2
    k "$kc" apply --server-side -f - >&2 <<EOF
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: $QUEUE, namespace: $ns}
spec: {clusterQueue: $cq}
EOF
  done
}

workers=()
for w in "$@"; do
  name=${w%%=*} kc=${w#*=}
  [[ $name != "$w" && -f $kc ]] || { echo "$w: want WORKER=KUBECONFIG" >&2; exit 2; }
  workers+=("$name")
  queues "$kc" troupe-worker "$WORKER_CPU"
  k "$manager" -n kueue-system create secret generic "$name-kubeconfig" \
    --from-literal=kubeconfig="$(k "$kc" config view --flatten --minify)" --dry-run=client -o yaml |
    k "$manager" apply --server-side --force-conflicts -f - >&2
  k "$manager" apply --server-side -f - >&2 <<EOF
apiVersion: kueue.x-k8s.io/v1beta2
kind: MultiKueueCluster
metadata: {name: $name}
spec:
  clusterSource:
    kubeConfig: {locationType: Secret, location: $name-kubeconfig}
EOF
done
clusters=$(printf '%s, ' "${workers[@]}")
k "$manager" apply --server-side -f - >&2 <<EOF
apiVersion: kueue.x-k8s.io/v1beta2
kind: MultiKueueConfig
metadata: {name: troupe-multikueue}
spec: {clusters: [${clusters%, }]}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {name: troupe-multikueue}
spec:
  controllerName: kueue.x-k8s.io/multikueue
  parameters: {apiGroup: kueue.x-k8s.io, kind: MultiKueueConfig, name: troupe-multikueue}
EOF
# The manager's quota is a first gate only: the workers' decide where a job runs.
queues "$manager" troupe-multikueue $((WORKER_CPU * ${#workers[@]})) troupe-multikueue
for name in "${workers[@]}"; do
  k "$manager" wait --for=condition=Active --timeout=60s "multikueuecluster/$name" >&2
done
k "$manager" wait --for=condition=Active --timeout=60s admissioncheck/troupe-multikueue >&2
k "$manager" wait --for=condition=Active --timeout=60s clusterqueue/troupe-multikueue >&2
log "MultiKueue: ${workers[*]} dispatched to from LocalQueue $QUEUE ($NAMESPACES)"
