#!/usr/bin/env bash
# demo-multi.sh (make demo MULTI=1): troupe beyond one cluster. Starts a manager cluster
# ($CLUSTER_NAME, default troupe-mk) and a worker cluster ($CLUSTER_NAME-worker1), each a local
# simulated cluster with its own API server, Kueue and troupe-operator (hack/demo.sh's), makes the
# manager's Kueue dispatch to the worker with MultiKueue (hack/controlplane/multikueue-up.sh), and
# creates the ChainerMN example in the manager, queued in LocalQueue team-a with spec.managedBy
# kueue.x-k8s.io/multikueue: Kueue copies it into the worker, the worker's troupe runs it there
# under the Workload MultiKueue made, and its status comes back to the manager's object, to
# Succeeded. Everything keeps running afterwards; make demo-down MULTI=1 stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/controlplane/lib.sh

manager=${CLUSTER_NAME:-troupe-mk}
worker=$manager-worker1
EXAMPLE=${EXAMPLE:-examples/chainerjob-mn.yaml}
start=$SECONDS
step() { printf '\n==> %s\n' "$*"; }

for c in "$worker" "$manager"; do
  step "cluster $c with Kueue and troupe-operator (hack/demo.sh)"
  CLUSTER_NAME=$c CLUSTER_ADDONS=kueue DEMO_CLUSTER_ONLY=1 EXAMPLE=$EXAMPLE hack/demo.sh | sed 's/^/    /'
done
export PATH=$KUBE_BIN:$PATH
mkc=$TROUPE_CACHE/kwok/clusters/$manager/kubeconfig.yaml
wkc=$TROUPE_CACHE/kwok/clusters/$worker/kubeconfig.yaml

step "MultiKueue: $manager dispatches LocalQueue team-a to $worker (hack/controlplane/multikueue-up.sh)"
hack/controlplane/multikueue-up.sh "$mkc" "$worker=$wkc"

read -r kind name < <(kubectl --kubeconfig "$mkc" create --dry-run=client -f "$EXAMPLE" -o jsonpath='{.kind}{" "}{.metadata.name}{"\n"}')
job=${kind,,}.troupe.dev/$name
step "creating $EXAMPLE in $manager, with the label kueue.x-k8s.io/queue-name: team-a and spec.managedBy: kueue.x-k8s.io/multikueue"
for kc in "$mkc" "$wkc"; do
  kubectl --kubeconfig "$kc" delete -f "$EXAMPLE" --ignore-not-found --cascade=foreground --wait=true
done
# A simulated master pod ends after 3 s; the demo's runs 20 s (troupe.dev/sim-duration), time to
# look at the worker cluster while it runs there.
kubectl --kubeconfig "$mkc" patch --local -f "$EXAMPLE" --type merge -o yaml \
  -p '{"metadata":{"labels":{"kueue.x-k8s.io/queue-name":"team-a"}},"spec":{"managedBy":"kueue.x-k8s.io/multikueue"}}' |
  kubectl --kubeconfig "$mkc" patch --local -f - --type json -o yaml \
    -p '[{"op":"add","path":"/spec/'"$( [[ $kind == ChainerJob ]] && echo master || echo launcher)"'/template/metadata","value":{"annotations":{"troupe.dev/sim-duration":"20s"}}}]' |
  kubectl --kubeconfig "$mkc" create -f -
fail() {
  kubectl --kubeconfig "$mkc" get "$job" -o yaml >&2
  kubectl --kubeconfig "$mkc" get workloads -o yaml >&2
  exit 1
}
kubectl --kubeconfig "$mkc" wait --for=jsonpath='{.status.phase}'=Running --timeout=120s "$job" || fail

step "in the manager ($manager): the job, Running with the worker's status, no pod of its own; its Workload, admitted on $worker"
kubectl --kubeconfig "$mkc" get "$job"
kubectl --kubeconfig "$mkc" get pods -l "${kind,,}.troupe.dev/name=$name" 2>&1
kubectl --kubeconfig "$mkc" get workloads -o custom-columns='WORKLOAD:.metadata.name,QUEUE:.spec.queueName,ADMITTED:.status.conditions[?(@.type=="Admitted")].status,CLUSTER:.status.clusterName'
step "in the worker ($worker): MultiKueue's copy, its pods, and one Workload, MultiKueue's, which troupe runs it under"
kubectl --kubeconfig "$wkc" get "$job" -o custom-columns='NAME:.metadata.name,PHASE:.status.phase,PREBUILT-WORKLOAD:.metadata.labels.kueue\.x-k8s\.io/prebuilt-workload-name,ORIGIN:.metadata.labels.kueue\.x-k8s\.io/multikueue-origin'
kubectl --kubeconfig "$wkc" get pods -l "${kind,,}.troupe.dev/name=$name"
kubectl --kubeconfig "$wkc" get workloads -o custom-columns='WORKLOAD:.metadata.name,OWNER:.metadata.ownerReferences[0].kind,ADMITTED:.status.conditions[?(@.type=="Admitted")].status'

kubectl --kubeconfig "$mkc" wait --for=condition=Succeeded --timeout=120s "$job" || fail
step "Succeeded: the manager's job has the worker's status; its Workload is Finished, and Kueue deleted the copy and its pods in the worker"
kubectl --kubeconfig "$mkc" get "$job"
kubectl --kubeconfig "$mkc" get workloads -o custom-columns='WORKLOAD:.metadata.name,CLUSTER:.status.clusterName,FINISHED:.status.conditions[?(@.type=="Finished")].reason'
for _ in $(seq 50); do
  [[ -z $(kubectl --kubeconfig "$wkc" get "$job" -o name --ignore-not-found) ]] && break
  sleep 0.2
done
kubectl --kubeconfig "$wkc" get "$job" --ignore-not-found
kubectl --kubeconfig "$wkc" get pods,workloads -l "${kind,,}.troupe.dev/name=$name"
printf '\nDemo finished in %ss. Both clusters and their operators keep running; stop them with make demo-down MULTI=1.\n' "$((SECONDS - start))"
echo "manager KUBECONFIG=$mkc"
echo "worker  KUBECONFIG=$wkc"
