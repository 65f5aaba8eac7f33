#!/usr/bin/env bash
# build.sh COMPONENT...: build control-plane binaries from Go modules, once, into a cache
# outside the checkout keyed by version, so every clone on this machine reuses them.
#   COMPONENT: etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok kwokctl
#              oldest-kube-apiserver oldest-kubectl
#              coscheduler volcano-scheduler kubelet kube-proxy coredns registry mpi-operator kueue
#              prometheus metrics-server
#   $TROUPE_CACHE/kube-$KUBE_VERSION/bin/{kube-apiserver,kube-controller-manager,kube-scheduler,kubectl,kubelet,kube-proxy}
#   $TROUPE_CACHE/kube-$KUBE_OLDEST_VERSION/bin/{kube-apiserver,kubectl}
#   $TROUPE_CACHE/etcd-$ETCD_VERSION/bin/etcd
#   $TROUPE_CACHE/kwok-$KWOK_VERSION/bin/{kwok,kwokctl}
#   $TROUPE_CACHE/scheduler-plugins-$SCHEDULER_PLUGINS_VERSION/bin/coscheduler
#   $TROUPE_CACHE/volcano-$VOLCANO_VERSION/bin/volcano-scheduler
#   $TROUPE_CACHE/coredns-$COREDNS_VERSION/bin/coredns
#   $TROUPE_CACHE/registry-$REGISTRY_VERSION/bin/registry
#   $TROUPE_CACHE/mpi-operator-$MPI_OPERATOR_VERSION/{bin/mpi-operator,crds/kubeflow.org_mpijobs.yaml}
#   $TROUPE_CACHE/kueue-$KUEUE_VERSION/{bin/kueue,crds/*.yaml,webhooks.yaml}
#   $TROUPE_CACHE/prometheus-$PROMETHEUS_VERSION/bin/prometheus
#   $TROUPE_CACHE/metrics-server-$METRICS_SERVER_VERSION/bin/metrics-server
# Versions come from hack/versions.mk (environment variables override it). Each binary is built
# from a small module under test/tools/ whose committed go.mod/go.sum pin every dependency;
# hack/controlplane/update-modules.sh rewrites those after a version bump.
set -euo pipefail
# shellcheck source=hack/controlplane/lib.sh
source "$(dirname "$0")/lib.sh"

# Build exactly what the committed go.mod/go.sum say, whatever the caller's Go settings, and
# never look for a go.work above the tool module. Static binaries (as Kubernetes releases are)
# don't depend on the host's C toolchain.
export GOFLAGS="-mod=readonly -trimpath" GOWORK=off CGO_ENABLED=0

# The half-written binary of a build that fails or is interrupted goes away with the script.
partial=
trap 'rm -f "$partial"' EXIT

# module_version DIR MODULE: the version of MODULE that DIR's go.mod requires.
module_version() {
  (cd "$1" && go list -m -f '{{.Version}}' "$2")
}

# module_dir DIR MODULE: where the module cache holds the version of MODULE that DIR requires
# (downloading it if it is missing).
module_dir() {
  (cd "$1" && go mod download -json "$2") | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p'
}

# children_cpu sets CHILDREN_CPU to the CPU seconds (user + system) the script's ended child
# processes have used so far, from the shell's `times` (its second line: the children's). Not
# in a subshell ($(...)), whose `times` would count its own children only.
children_cpu() {
  local f user sys
  f=$(mktemp)
  times >"$f"
  read -r user sys < <(tail -n 1 "$f")
  rm -f "$f"
  CHILDREN_CPU=$(awk -v u="$user" -v s="$sys" 'function sec(t,  m) { m = t; sub(/m.*/, "", m); sub(/^[0-9]+m/, "", t); sub(/s$/, "", t); return m * 60 + t }
    BEGIN { printf "%d", sec(u) + sec(s) }')
}

# build NAME DEST_DIR MODULE_DIR PACKAGE [go build flags...]
build() {
  local name=$1 dest=$2 moddir=$3 pkg=$4
  shift 4
  [[ -x $dest/$name ]] && return 0
  mkdir -p "$dest"
  # One builder per binary: a second caller waits here, then finds the binary and returns.
  exec {lock}>"$dest/.$name.lock"
  flock "$lock"
  if [[ ! -x $dest/$name ]]; then
    log "building $name ($pkg) into $dest"
    local start=$SECONDS cpu
    children_cpu
    cpu=$CHILDREN_CPU
    # Build under a temporary name and rename: an interrupted build never leaves a binary that
    # looks finished.
    partial=$(mktemp "$dest/.$name.XXXXXX")
    (cd "$moddir" && go build "$@" -o "$partial" "$pkg")
    chmod 0755 "$partial"
    mv -f "$partial" "$dest/$name"
    partial=
    # The CPU time says what a build costs whatever else the machine does (two cores: at best
    # half of it in wall time).
    children_cpu
    log "built $name in $((SECONDS - start))s (CPU $((CHILDREN_CPU - cpu))s)"
  fi
  exec {lock}>&-
}

# check_pin DIR MODULE WANT VAR: the tool module must pin the version versions.mk asks for, or
# the cache (keyed by that version) would hold a binary of another version.
check_pin() {
  local have
  have=$(module_version "$1" "$2")
  if [[ $have != "$3" ]]; then
    log "$1/go.mod has $2 $have but $4=$3; run hack/controlplane/update-modules.sh"
    exit 1
  fi
}

# build_kube NAME [oldest]: a Kubernetes command of KUBE_VERSION from test/tools/kube, or with
# "oldest" of KUBE_OLDEST_VERSION from test/tools/kube-oldest (make test-integration-oldest).
build_kube() {
  local dir=$TOOLS_MODULES/kube version=$KUBE_VERSION var=KUBE_VERSION bin=$KUBE_BIN major minor
  if [[ ${2:-} == oldest ]]; then
    dir=$TOOLS_MODULES/kube-oldest version=$KUBE_OLDEST_VERSION var=KUBE_OLDEST_VERSION bin=$KUBE_OLDEST_BIN
  fi
  [[ -x $bin/$1 ]] && return 0
  check_pin "$dir" k8s.io/kubernetes "$version" "$var"
  # Stamp the version, or the server reports v0.0.0-master and version checks in clients fail.
  # The major and minor are bare numbers, as in a release: kube-apiserver 1.30 parses the major
  # and refuses to start on "v1".
  major=${version#v}
  minor=${major#*.}
  major=${major%%.*}
  minor=${minor%%.*}
  local v=k8s.io/component-base/version
  build "$1" "$bin" "$dir" "k8s.io/kubernetes/cmd/$1" -ldflags "-s -w \
    -X $v.gitVersion=$version -X $v.gitMajor=$major -X $v.gitMinor=$minor \
    -X $v.gitTreeState=clean"
}

# kueue_webhooks MANIFESTS: Kueue's webhook configurations as the local cluster uses them. Only the
# webhooks of Kueue's own objects (kueue.x-k8s.io) and of batch Jobs (the one job integration the
# cluster enables) are kept: the others (pods, Deployments, StatefulSets, ...) would send every
# such object of every test to Kueue, for integrations that are off. The configurations take the
# names Kueue's certificate rotator fills in (kueue-{mutating,validating}-webhook-configuration)
# and call Kueue on this machine by URL: https://localhost:${KUEUE_WEBHOOK_PORT}<path>, the
# port filled in per cluster by cluster-up.sh.
kueue_webhooks() {
  awk '
    function flush() { if (entry != "" && keep) printf "%s", entry; entry = ""; keep = 0 }
    /^---/ || /^kind:/ || /^apiVersion:/ || /^metadata:/ || /^webhooks:/ { flush(); print; next }
    /^  name: (mutating|validating)-webhook-configuration$/ { flush(); sub(/name: /, "name: kueue-"); print; next }
    /^- / { flush() }
    /^    - (kueue\.x-k8s\.io|batch)$/ { keep = 1 }
    /^ *service:$/ { insvc = 1; next }
    insvc && /^ *(name|namespace):/ { next }
    insvc && /^ *path:/ { sub(/path: */, "url: https://localhost:${KUEUE_WEBHOOK_PORT}"); sub(/^  /, ""); insvc = 0 }
    { entry = entry $0 "\n" }
    END { flush() }
  ' "$1"
}

# once_locked DIR DONE COMMAND...: run COMMAND in DIR unless DIR/DONE exists, holding DIR's lock:
# of two callers at once (make test's builds ahead, hack/build-ahead.sh, and a suite) one writes
# the files and the other then finds them. COMMAND writes DONE last, by a rename, so a caller
# that finds DONE without the lock finds every file whole.
once_locked() {
  local dir=$1 done=$2 lock
  shift 2
  mkdir -p "$dir"
  exec {lock}>"$dir/.files.lock"
  flock "$lock"
  [[ -e $dir/$done ]] || "$@"
  exec {lock}>&-
}

# mpi_operator_crds: kubeflow's MPIJob CRD, from mpi-operator's module, into MPI_OPERATOR_CRDS.
mpi_operator_crds() {
  local moddir
  moddir=$(module_dir "$TOOLS_MODULES/mpi-operator" github.com/kubeflow/mpi-operator)
  install -m 0644 "$moddir/manifests/base/kubeflow.org_mpijobs.yaml" "$MPI_OPERATOR_CRDS/.kubeflow.org_mpijobs.yaml"
  mv -f "$MPI_OPERATOR_CRDS/.kubeflow.org_mpijobs.yaml" "$MPI_OPERATOR_CRDS/kubeflow.org_mpijobs.yaml"
}

# kueue_manifests: Kueue's CRDs and webhook configurations (kueue_webhooks), from its module,
# into KUEUE_MANIFESTS; webhooks.yaml last.
kueue_manifests() {
  local moddir
  moddir=$(module_dir "$TOOLS_MODULES/kueue" sigs.k8s.io/kueue)
  mkdir -p "$KUEUE_MANIFESTS/crds"
  install -m 0644 "$moddir"/config/components/crd/bases/*.yaml "$KUEUE_MANIFESTS/crds/"
  kueue_webhooks "$moddir/config/components/webhook/manifests.yaml" >"$KUEUE_MANIFESTS/.webhooks.yaml"
  mv -f "$KUEUE_MANIFESTS/.webhooks.yaml" "$KUEUE_MANIFESTS/webhooks.yaml"
}

[[ $# -gt 0 ]] || { sed -n '2,12s/^# //p' "$0" >&2; exit 2; }
for c in "$@"; do
  case $c in
    # kubectl too: a client of the server's own version, on machines that have none.
    # kubelet and kube-proxy: the local cluster's real node (realnode-up.sh).
    kube-apiserver | kube-controller-manager | kube-scheduler | kubectl | kubelet | kube-proxy) build_kube "$c" ;;
    # The oldest supported Kubernetes' API server and kubectl (make test-integration-oldest).
    oldest-kube-apiserver | oldest-kubectl) build_kube "${c#oldest-}" oldest ;;
    coredns)
      # Our own main package (test/tools/coredns): CoreDNS with the Corefile's plugins only.
      [[ -x $COREDNS_BIN/$c ]] && continue
      check_pin "$TOOLS_MODULES/coredns" github.com/coredns/coredns "$COREDNS_VERSION" COREDNS_VERSION
      build "$c" "$COREDNS_BIN" "$TOOLS_MODULES/coredns" . -ldflags "-s -w"
      ;;
    registry)
      # Our own main package (test/tools/registry) on go-containerregistry's registry.
      [[ -x $REGISTRY_BIN/$c ]] && continue
      check_pin "$TOOLS_MODULES/registry" github.com/google/go-containerregistry "$REGISTRY_VERSION" REGISTRY_VERSION
      build "$c" "$REGISTRY_BIN" "$TOOLS_MODULES/registry" . -ldflags "-s -w"
      ;;
    etcd)
      [[ -x $ETCD_BIN/etcd ]] && continue
      check_pin "$TOOLS_MODULES/etcd" go.etcd.io/etcd/server/v3 "$ETCD_VERSION" ETCD_VERSION
      # The root package of go.etcd.io/etcd/server/v3 is etcd's main package.
      build etcd "$ETCD_BIN" "$TOOLS_MODULES/etcd" go.etcd.io/etcd/server/v3 -ldflags "-s -w"
      ;;
    kwok | kwokctl)
      [[ -x $KWOK_BIN/$c ]] && continue
      check_pin "$TOOLS_MODULES/kwok" sigs.k8s.io/kwok "$KWOK_VERSION" KWOK_VERSION
      build "$c" "$KWOK_BIN" "$TOOLS_MODULES/kwok" "sigs.k8s.io/kwok/cmd/$c" -ldflags "-s -w"
      ;;
    # The gang schedulers, beside kube-scheduler. scheduler-plugins' kube-scheduler with the
    # Coscheduling plugin: stamped with the Kubernetes version it is built from, which its
    # compatibility check requires (stamped v0.34.7, its own version, it refuses to start).
    coscheduler)
      [[ -x $SCHEDULER_PLUGINS_BIN/$c ]] && continue
      check_pin "$TOOLS_MODULES/scheduler-plugins" sigs.k8s.io/scheduler-plugins "$SCHEDULER_PLUGINS_VERSION" SCHEDULER_PLUGINS_VERSION
      major=${SCHEDULER_PLUGINS_KUBE_VERSION#v}
      minor=${major#*.}
      major=${major%%.*}
      minor=${minor%%.*}
      v=k8s.io/component-base/version
      build "$c" "$SCHEDULER_PLUGINS_BIN" "$TOOLS_MODULES/scheduler-plugins" sigs.k8s.io/scheduler-plugins/cmd/scheduler \
        -ldflags "-s -w -X $v.gitVersion=$SCHEDULER_PLUGINS_KUBE_VERSION \
        -X $v.gitMajor=$major -X $v.gitMinor=$minor -X $v.gitTreeState=clean"
      ;;
    volcano-scheduler)
      [[ -x $VOLCANO_BIN/$c ]] && continue
      check_pin "$TOOLS_MODULES/volcano" volcano.sh/volcano "$VOLCANO_VERSION" VOLCANO_VERSION
      build "$c" "$VOLCANO_BIN" "$TOOLS_MODULES/volcano" volcano.sh/volcano/cmd/scheduler \
        -ldflags "-s -w -X volcano.sh/volcano/pkg/version.Version=$VOLCANO_VERSION"
      ;;
    # kubeflow's MPI operator for `make bench`, and its MPIJob CRD from the same module.
    mpi-operator)
      [[ -x $MPI_OPERATOR_BIN/$c && -f $MPI_OPERATOR_CRDS/kubeflow.org_mpijobs.yaml ]] && continue
      check_pin "$TOOLS_MODULES/mpi-operator" github.com/kubeflow/mpi-operator "$MPI_OPERATOR_VERSION" MPI_OPERATOR_VERSION
      build "$c" "$MPI_OPERATOR_BIN" "$TOOLS_MODULES/mpi-operator" github.com/kubeflow/mpi-operator/cmd/mpi-operator -ldflags "-s -w"
      once_locked "$MPI_OPERATOR_CRDS" kubeflow.org_mpijobs.yaml mpi_operator_crds
      ;;
    # Kueue's manager, its CRDs and the webhook configurations the local cluster uses
    # (kueue_webhooks below).
    kueue)
      [[ -x $KUEUE_BIN/$c && -f $KUEUE_MANIFESTS/webhooks.yaml ]] && continue
      check_pin "$TOOLS_MODULES/kueue" sigs.k8s.io/kueue "$KUEUE_VERSION" KUEUE_VERSION
      build "$c" "$KUEUE_BIN" "$TOOLS_MODULES/kueue" sigs.k8s.io/kueue/cmd/kueue \
        -ldflags "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$KUEUE_VERSION"
      once_locked "$KUEUE_MANIFESTS" webhooks.yaml kueue_manifests
      ;;
    # Prometheus's server, for the e2e suite's scrape of the operator (test/e2e/prometheus_test.go).
    # Its web UI's assets are not built in (they are, with the builtinassets tag, from a
    # JavaScript build the module does not ship): the API the test queries needs none. Nor does
    # its static target need the service discoveries (remove_all_sd keeps static and file
    # configs): without the clouds' SDKs the build compiles far less.
    prometheus)
      [[ -x $PROMETHEUS_BIN/$c ]] && continue
      check_pin "$TOOLS_MODULES/prometheus" github.com/prometheus/prometheus "$PROMETHEUS_VERSION" PROMETHEUS_VERSION
      build "$c" "$PROMETHEUS_BIN" "$TOOLS_MODULES/prometheus" github.com/prometheus/prometheus/cmd/prometheus \
        -tags remove_all_sd -ldflags "-s -w"
      ;;
    # metrics-server, the resource metrics API of the local cluster's metrics add-on (HPA, kubectl
    # top). Stamped as its release is (client-go's version package): kwokctl reads the version
    # from --version.
    metrics-server)
      [[ -x $METRICS_SERVER_BIN/$c ]] && continue
      check_pin "$TOOLS_MODULES/metrics-server" sigs.k8s.io/metrics-server "$METRICS_SERVER_VERSION" METRICS_SERVER_VERSION
      build "$c" "$METRICS_SERVER_BIN" "$TOOLS_MODULES/metrics-server" sigs.k8s.io/metrics-server/cmd/metrics-server \
        -ldflags "-s -w -X k8s.io/client-go/pkg/version.gitVersion=$METRICS_SERVER_VERSION"
      ;;
    *) log "unknown component $c"; exit 2 ;;
  esac
done
