#!/usr/bin/env bash
# demo.sh: the newcomer's first command (make demo). Builds the control plane from Go modules
# (once, cached), starts a local simulated cluster, runs troupe-operator against it and runs
# the ChainerMN example to Succeeded. The cluster and the operator keep running afterwards;
# hack/demo-down.sh (make demo-down) stops them. Running it again reuses the cluster and
# restarts the operator and the example.
#
# REAL=1 (make demo REAL=1): the cluster gets this machine as a real node (containerd, images of
# make images), troupe is installed from config/ as a user installs it (kubectl apply -k: the
# operator image, two replicas, webhooks behind their Service), the example's namespace is opted
# in (labelled troupe.dev/jobs=enabled) and the training example
# (examples/chainerjob-mn-realnode.yaml, troupe-train) really runs, to Succeeded from mpiexec's
# exit code. The kwok nodes are tainted for the demo so that troupe's pods run on the real node.
#
# EXAMPLE=examples/<file>.yaml (make demo EXAMPLE=...): run that manifest instead, one job of any
# troupe kind; its kind, name and namespace are read from the file with kubectl. The demo waits
# for its Succeeded condition and prints `kubectl get`, its children and the end of its master's
# (launcher's) log, or says that the simulated cluster's pods have none.
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/controlplane/lib.sh

export CLUSTER_NAME=${CLUSTER_NAME:-troupe-demo}
DEMO_DIR=$TROUPE_CACHE/demo/$CLUSTER_NAME
if [[ -z ${EXAMPLE:-} ]]; then
  EXAMPLE=examples/chainerjob-mn.yaml
  if [[ ${REAL:-} == 1 ]]; then EXAMPLE=examples/chainerjob-mn-realnode.yaml; fi
fi
[[ -f $EXAMPLE ]] || { echo "EXAMPLE=$EXAMPLE: no such file" >&2; exit 1; }
start=$SECONDS
mkdir -p "$DEMO_DIR"

step() { printf '\n==> %s\n' "$*"; }

# stage WHAT USUALLY: the next of the demo's $STAGES stages, numbered, with how long it usually
# takes on a 2-core machine (docs/testing.md), and how long the one before took.
stage_number=0
stage_start=$SECONDS
stage() {
  if ((stage_number > 0)); then printf '    (took %ss)\n' "$((SECONDS - stage_start))"; fi
  stage_number=$((stage_number + 1))
  stage_start=$SECONDS
  printf '\n==> [%s/%s] %s (usually %s)\n' "$stage_number" "$STAGES" "$1" "$2"
}

# example_addons prints what the example needs beside the control plane (cluster-up.sh's
# CLUSTER_ADDONS): "gang" for a job that names a gang scheduler, "kueue" for one that names a
# Kueue queue. The others run on a plain cluster, whose three add-ons are then not built.
example_addons() {
  local addons=()
  if grep -Eq '^[^#]*(gang: *(Volcano|Coscheduling)|schedulerName: *(volcano|scheduler-plugins-scheduler)|t9kScheduler)' "$EXAMPLE"; then
    addons+=(gang)
  fi
  if grep -Eq '^[^#]*kueue\.x-k8s\.io/queue-name' "$EXAMPLE"; then addons+=(kueue); fi
  echo "${addons[*]}"
}

# read_example sets KIND (lower case), NAME, JOB (kind.group/name, for kubectl), LABEL (the
# job's selector), NS (kubectl's namespace flag, empty for the default namespace) and JOB_NS (the
# job's namespace) from $EXAMPLE, which must hold exactly one troupe job. It needs the CRDs
# installed.
read_example() {
  local objs api kind namespace current
  objs=$(kubectl create --dry-run=client -f "$EXAMPLE" \
    -o jsonpath='{.apiVersion}{" "}{.kind}{" "}{.metadata.name}{" "}{.metadata.namespace}{"\n"}')
  if [[ $(grep -c . <<<"$objs") != 1 ]]; then
    printf 'EXAMPLE=%s: want one job in the file, found:\n%s\n' "$EXAMPLE" "$objs" >&2
    exit 1
  fi
  read -r api kind NAME namespace <<<"$objs"
  if [[ $api != troupe.dev/* ]]; then
    echo "EXAMPLE=$EXAMPLE: $kind of $api is not a troupe job (apiVersion troupe.dev/v1alpha1)" >&2
    exit 1
  fi
  KIND=${kind,,}
  JOB=$KIND.troupe.dev/$NAME
  LABEL=$KIND.troupe.dev/name=$NAME
  # kubectl fills in the context's namespace where the file names none: name only another one.
  current=$(kubectl config view --minify -o jsonpath='{..namespace}')
  JOB_NS=${namespace:-${current:-default}}
  NS=()
  if [[ $namespace != "${current:-default}" ]]; then
    NS=(-n "$namespace")
    kubectl get namespace "$namespace" >/dev/null 2>&1 || kubectl create namespace "$namespace"
  fi
}

# run_example creates the example afresh and waits up to $1 for its Succeeded condition.
run_example() {
  step "running $EXAMPLE ($JOB)"
  # Foreground deletion returns once the previous run's children are gone too, so the new job
  # does not meet them as name conflicts.
  kubectl delete "${NS[@]}" -f "$EXAMPLE" --ignore-not-found --cascade=foreground --wait=true
  kubectl create "${NS[@]}" -f "$EXAMPLE"
  local watcher=
  if [[ ${REAL:-} == 1 ]]; then
    # The training reports its progress (docs/progress.md): a row per status write, with its
    # PROGRESS and ETA, while it runs.
    kubectl get "${NS[@]}" "$JOB" --watch &
    watcher=$!
  fi
  if ! kubectl wait "${NS[@]}" --for=condition=Succeeded --timeout="$1" "$JOB"; then
    [[ -z $watcher ]] || kill "$watcher" 2>/dev/null || true
    kubectl get "${NS[@]}" "$JOB" -o yaml >&2
    show_log >&2 || true
    exit 1
  fi
  if [[ -n $watcher ]]; then
    sleep 1 # the last row, Succeeded at 100%
    kill "$watcher" 2>/dev/null || true
    wait "$watcher" 2>/dev/null || true
  fi
}

# show_log prints the end of the log of the job's newest master (launcher) pod, or of its newest
# worker pod for a job without one (a PyTorchJob of workers alone).
show_log() {
  local pod role
  for role in master worker; do
    pod=$(kubectl get pods "${NS[@]}" -l "$LABEL,troupe.dev/role=$role" --sort-by=.metadata.creationTimestamp \
      -o name 2>/dev/null | tail -n 1)
    [[ -n $pod ]] && break
  done
  if [[ -z $pod ]]; then
    echo "(no pod of $JOB is left)"
    return
  fi
  step "the log of $pod (kubectl logs ${NS[*]}${NS:+ }$pod --tail=12)"
  if ! kubectl logs "${NS[@]}" "$pod" --tail=12 2>/dev/null; then
    if [[ ${REAL:-} == 1 ]]; then
      echo "(no log from $pod)"
    else
      echo "(no log: the simulated cluster's pods run no program; make demo REAL=1 runs real ones)"
    fi
  fi
}

if [[ ${REAL:-} == 1 ]]; then
  step "building the control plane and the images (cached in $TROUPE_CACHE)"
  hack/controlplane/build.sh etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok kwokctl \
    coscheduler volcano-scheduler kueue
  export PATH=$KUBE_BIN:$PATH
  step "starting the local cluster $CLUSTER_NAME with this machine as a real node"
  if ! KUBECONFIG=$(REAL_NODE=1 REAL_NODE_IMAGES="pause troupe-operator troupe-agent troupe-mpi troupe-train" \
    hack/controlplane/cluster-up.sh 2>"$DEMO_DIR/cluster-up.log" | tail -n 1) || [[ -z $KUBECONFIG ]]; then
    cat "$DEMO_DIR/cluster-up.log" >&2
    exit 1
  fi
  export KUBECONFIG
  # An operator process of a simulated demo on this cluster would fight the installed one.
  hack/demo-down.sh --operator-only
  real=$(kubectl get nodes -l troupe.dev/real-node=true -o jsonpath='{.items[0].metadata.name}')
  kubectl taint nodes -l 'troupe.dev/real-node!=true' troupe.dev/demo=simulated:NoSchedule --overwrite >/dev/null
  kubectl taint node "$real" troupe.dev/real-node=true:NoSchedule- >/dev/null 2>&1 || true
  kubectl get nodes -o wide

  step "installing troupe: kubectl apply --server-side -k config/"
  kubectl apply --server-side --force-conflicts -k config/ | grep -v unchanged || true
  kubectl -n troupe-system rollout status deployment/troupe-operator --timeout=300s
  kubectl -n troupe-system get pods -o wide

  read_example
  # The install runs jobs only in namespaces opted in (docs/operations.md).
  step "opting in the namespace $JOB_NS: kubectl label namespace $JOB_NS troupe.dev/jobs=enabled"
  kubectl label namespace "$JOB_NS" troupe.dev/jobs=enabled --overwrite
  run_example 300s
  show_log
  step "kubectl get all ${NS[*]}${NS:+ }-l $LABEL"
  kubectl get all "${NS[@]}" -l "$LABEL"
  printf '\nDemo finished in %ss. The cluster, its real node and troupe keep running; stop them with make demo-down.\n' "$((SECONDS - start))"
  echo "KUBECONFIG=$KUBECONFIG"
  exit 0
fi

STAGES=5
# DEMO_CLUSTER_ONLY=1 (hack/demo-multi.sh): the cluster of CLUSTER_ADDONS and its operator only,
# no example.
[[ ${DEMO_CLUSTER_ONLY:-} == 1 ]] && STAGES=4
export CLUSTER_ADDONS
CLUSTER_ADDONS=${CLUSTER_ADDONS-$(example_addons)}
components=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok kwokctl)
[[ " $CLUSTER_ADDONS " != *" gang "* ]] || components+=(coscheduler volcano-scheduler)
[[ " $CLUSTER_ADDONS " != *" kueue "* ]] || components+=(kueue)
# One build after another: they are bound by two cores, and side by side they took longer
# (850 s against 569 s, docs/testing.md).
stage "building the control plane: ${components[*]} (cached in $TROUPE_CACHE)" \
  "about 10 min the first time on a 2-core machine, a second once cached"
hack/controlplane/build.sh "${components[@]}"
# The kubectl of the cluster's version, whatever kubectl the machine has.
export PATH=$KUBE_BIN:$PATH
stage "building troupe-operator" "2 to 3 min the first time, seconds after"
go build -o "$DEMO_DIR/troupe-operator" ./cmd/troupe-operator

stage "starting the local cluster $CLUSTER_NAME${CLUSTER_ADDONS:+ with $CLUSTER_ADDONS}" \
  "20 to 40 s, a few seconds when it is already up"
# kwokctl's own log goes to a file; it is shown only if the cluster does not come up.
if ! KUBECONFIG=$(hack/controlplane/cluster-up.sh 2>"$DEMO_DIR/cluster-up.log" | tail -n 1) || [[ -z $KUBECONFIG ]]; then
  cat "$DEMO_DIR/cluster-up.log" >&2
  exit 1
fi
export KUBECONFIG
kubectl get nodes -L nvidia.com/gpu.present

stage "installing the CRDs and starting troupe-operator" "5 to 15 s"
kubectl apply --server-side -f config/crds/
kubectl wait --for=condition=Established --timeout=60s crd/chainerjobs.troupe.dev

step "starting troupe-operator (log: $DEMO_DIR/operator.log)"
hack/demo-down.sh --operator-only
# Free ports of this machine for each run, so that the demos of two clusters (CLUSTER_NAME) run
# side by side; $DEMO_DIR/ports says which.
free_port METRICS_PORT
free_port HEALTH_PORT
free_port WEBHOOK_PORT
printf 'METRICS_PORT=%s\nHEALTH_PORT=%s\nWEBHOOK_PORT=%s\n' "$METRICS_PORT" "$HEALTH_PORT" "$WEBHOOK_PORT" >"$DEMO_DIR/ports"
# Its admission webhooks are served on this machine; the cluster reaches them by URL.
hack/webhooks-local.sh "$WEBHOOK_PORT"
# The real node's pods reach its progress endpoint at the node's IP (docs/progress.md); on the
# simulated cluster, a process of this machine reaches it at the webhooks' port.
hook_bind=127.0.0.1
progress_flags=(--progress-url "https://localhost:$WEBHOOK_PORT")
if [[ ${REAL:-} == 1 ]]; then
  node_ip=$(kubectl get nodes -l troupe.dev/real-node=true -o jsonpath='{.items[0].status.addresses[?(@.type=="InternalIP")].address}')
  hack/progress-local.sh "$node_ip" "$WEBHOOK_PORT"
  hook_bind=0.0.0.0
  progress_flags=(--webhook-extra-dns-names troupe-progress.troupe-system.svc --progress-url https://troupe-progress.troupe-system.svc)
fi
# In its own session, so it outlives this script and the terminal that ran it.
setsid "$DEMO_DIR/troupe-operator" --metrics-bind-address "127.0.0.1:$METRICS_PORT" --metrics-secure=false \
  --health-probe-bind-address "127.0.0.1:$HEALTH_PORT" \
  --webhook-bind-address "$hook_bind:$WEBHOOK_PORT" --webhook-dns-name localhost "${progress_flags[@]}" \
  --webhook-cert-dir "$DEMO_DIR/certs" --webhook-write-certs >"$DEMO_DIR/operator.log" 2>&1 </dev/null &
echo $! >"$DEMO_DIR/operator.pid"
for _ in $(seq 100); do
  curl -fsS "http://127.0.0.1:$HEALTH_PORT/readyz" >/dev/null 2>&1 && break
  sleep 0.2
done
curl -fsS "http://127.0.0.1:$HEALTH_PORT/readyz" >/dev/null || { echo "operator not ready; see $DEMO_DIR/operator.log" >&2; exit 1; }

if [[ ${DEMO_CLUSTER_ONLY:-} == 1 ]]; then
  printf '    (took %ss)\n' "$((SECONDS - stage_start))"
  echo "KUBECONFIG=$KUBECONFIG"
  exit 0
fi

read_example
stage "running $EXAMPLE to Succeeded" "$([[ ${REAL:-} == 1 ]] && echo "40 to 70 s" || echo "10 to 30 s")"
run_example 180s
printf '    (took %ss)\n' "$((SECONDS - stage_start))"

step "kubectl get ${NS[*]}${NS:+ }${KIND}s"
kubectl get "${NS[@]}" "$KIND"s -o wide
step "kubectl get all ${NS[*]}${NS:+ }-l $LABEL"
kubectl get all "${NS[@]}" -l "$LABEL"
# Jobs of the MPI backend have a hostfile; a PyTorchJob's pods get torch's environment instead.
if kubectl get "${NS[@]}" configmap "$NAME-mpi" >/dev/null 2>&1; then
  step "hostfile (kubectl get configmap $NAME-mpi)"
  kubectl get "${NS[@]}" configmap "$NAME-mpi" -o jsonpath='{.data.hostfile}'
fi
show_log

step "a bad spec is refused at admission (test/testdata/admission/bad/chainer-gpu-fraction.yaml)"
if kubectl create -f test/testdata/admission/bad/chainer-gpu-fraction.yaml --dry-run=server 2>&1; then
  echo "the bad spec was admitted: are the webhooks running?" >&2
  exit 1
fi

printf '\nDemo finished in %ss. The cluster and the operator keep running; stop them with make demo-down.\n' "$((SECONDS - start))"
echo "KUBECONFIG=$KUBECONFIG"
