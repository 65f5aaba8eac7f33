#!/usr/bin/env bash
# update-modules.sh: (re)write the tool modules under test/tools/ from hack/versions.mk.
# Run it after changing a version there (every module, or only those named: kube kube-oldest etcd kwok coredns registry
# scheduler-plugins volcano mpi-operator kueue prometheus metrics-server), then commit test/tools/*/go.mod and go.sum. build.sh only ever
# builds from those committed files (-mod=readonly), so a build is reproducible and never edits
# them.
set -euo pipefail
# shellcheck source=hack/controlplane/lib.sh
source "$(dirname "$0")/lib.sh"
export GOWORK=off GOFLAGS=-mod=mod

# new_module DIR MODULE: start DIR over with an empty go.mod, on the same go line as the root.
new_module() {
  local dir=$1 goline
  goline=$(sed -n 's/^go //p' "$REPO_ROOT/go.mod")
  mkdir -p "$dir"
  rm -f "$dir/go.mod" "$dir/go.sum"
  printf 'module %s\n\ngo %s\n' "$2" "$goline" >"$dir/go.mod"
}

# served_version MODULE: the newest release of MODULE, in KUBE_STAGING_VERSION's minor and no newer
# than it, that the module proxy serves. Probe patch by patch: the proxy refuses some versions,
# and its version list both names refused ones and leaves out served ones.
served_version() {
  local m=$1 minor=${KUBE_STAGING_VERSION%.*} p=${KUBE_STAGING_VERSION##*.}
  for ((; p >= 0; p--)); do
    if go mod download "$m@$minor.$p" >/dev/null 2>&1; then echo "$minor.$p"; return; fi
  done
}

# kube DIR VERSION STAGING_VERSION COMMAND...: k8s.io/kubernetes is not meant to be a dependency;
# its go.mod points every k8s.io staging module at ./staging/..., which does not exist in the
# published module. Replace each one with its published release. A module with no served release
# is left out: that is fine for the sample-* examples, which nothing imports, and `go mod tidy`
# below fails loudly otherwise. COMMANDs are the cmd/ packages of k8s.io/kubernetes to build.
kube_module() {
  local dir=$1 version=$2 staging=$3 gomod m v c
  shift 3
  new_module "$dir" "github.com/troupe-dev/troupe/test/tools/${dir##*/}"
  gomod=$(go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/^\t"GoMod": "\(.*\)",$/\1/p')
  {
    echo
    echo "// k8s.io/kubernetes's staging modules at their published releases (hack/controlplane/update-modules.sh)."
    echo "replace ("
    for m in $(sed -n 's#^\t\(k8s\.io/[^ ]*\) => \./staging/.*#\1#p' "$gomod"); do
      v=$(KUBE_STAGING_VERSION=$staging served_version "$m")
      if [[ -z $v ]]; then log "skipping $m: no ${staging%.*}.x release is served"; continue; fi
      [[ $v == "$staging" ]] || log "$m@$staging is not served; using $v"
      printf '\t%s => %s %s\n' "$m" "$m" "$v"
    done
    echo ")"
  } >>"$dir/go.mod"
  (cd "$dir" && go get -tool "${@/%/@$version}" && go mod tidy)
}

update_kube() {
  kube_module "$TOOLS_MODULES/kube" "$KUBE_VERSION" "$KUBE_STAGING_VERSION" \
    k8s.io/kubernetes/cmd/{kube-apiserver,kube-controller-manager,kube-scheduler,kubectl,kubelet,kube-proxy}
}

# kube-oldest: the API server (and a kubectl of its version) of the oldest Kubernetes troupe
# supports, for `make test-integration-oldest` (docs/operations.md, "Supported Kubernetes versions").
update_kube_oldest() {
  kube_module "$TOOLS_MODULES/kube-oldest" "$KUBE_OLDEST_VERSION" "$KUBE_OLDEST_STAGING_VERSION" \
    k8s.io/kubernetes/cmd/{kube-apiserver,kubectl}
}

update_etcd() {
  local dir=$TOOLS_MODULES/etcd
  new_module "$dir" github.com/troupe-dev/troupe/test/tools/etcd
  # The root package of go.etcd.io/etcd/server/v3 is etcd's main package.
  (cd "$dir" && go get -tool "go.etcd.io/etcd/server/v3@$ETCD_VERSION" && go mod tidy)
}

update_kwok() {
  local dir=$TOOLS_MODULES/kwok
  new_module "$dir" github.com/troupe-dev/troupe/test/tools/kwok
  (cd "$dir" && go get -tool "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" "sigs.k8s.io/kwok/cmd/kwokctl@$KWOK_VERSION" && go mod tidy)
}

update_coredns() {
  # main.go is ours (only the plugins the real node's Corefile names): only the dependency moves.
  (cd "$TOOLS_MODULES/coredns" && go get "github.com/coredns/coredns@$COREDNS_VERSION" && go mod tidy)
}

update_registry() {
  # main.go is ours: only the dependency moves.
  (cd "$TOOLS_MODULES/registry" && go get "github.com/google/go-containerregistry@$REGISTRY_VERSION" && go mod tidy)
}

# replace_lines GOMOD: every replace directive of GOMOD (block or single line) as "OLD => NEW V".
replace_lines() {
  sed -n -e '/^replace (/,/^)/{/=>/s/^[[:space:]]*//p}' -e 's/^replace \([^(].* => .*\)/\1/p' "$1"
}

# scheduler_plugins: the scheduler of sigs.k8s.io/scheduler-plugins (coscheduling). Like
# k8s.io/kubernetes, it only builds with its own replace list, which a dependent module must
# copy. That list names k8s.io/*@v0.34.7 releases the proxy refuses; point k8s.io/kubernetes at
# SCHEDULER_PLUGINS_KUBE_VERSION and every staging module of that minor at
# SCHEDULER_PLUGINS_KUBE_STAGING_VERSION (others, such as legacy-cloud-providers, stay as listed).
update_scheduler_plugins() {
  local dir=$TOOLS_MODULES/scheduler-plugins gomod m v
  local mod=sigs.k8s.io/scheduler-plugins staging=$SCHEDULER_PLUGINS_KUBE_STAGING_VERSION
  new_module "$dir" github.com/troupe-dev/troupe/test/tools/scheduler-plugins
  gomod=$(go mod download -json "$mod@$SCHEDULER_PLUGINS_VERSION" | sed -n 's/^\t"GoMod": "\(.*\)",$/\1/p')
  {
    echo
    echo "// $mod's own replace list, at versions the proxy serves (hack/controlplane/update-modules.sh)."
    echo "replace ("
    replace_lines "$gomod" | while read -r m _ _ v; do
      if [[ $m == k8s.io/kubernetes ]]; then
        v=$SCHEDULER_PLUGINS_KUBE_VERSION
      elif [[ $m == k8s.io/* && ${v%.*} == "${staging%.*}" ]]; then
        v=$staging
      fi
      printf '\t%s => %s %s\n' "$m" "$m" "$v"
    done
    echo ")"
  } >>"$dir/go.mod"
  (cd "$dir" && go get -tool "$mod/cmd/scheduler@$SCHEDULER_PLUGINS_VERSION" && go mod tidy)
}

# volcano: volcano.sh/volcano's scheduler, with volcano's own replace list copied as it is.
update_volcano() {
  local dir=$TOOLS_MODULES/volcano gomod m v
  new_module "$dir" github.com/troupe-dev/troupe/test/tools/volcano
  gomod=$(go mod download -json "volcano.sh/volcano@$VOLCANO_VERSION" | sed -n 's/^\t"GoMod": "\(.*\)",$/\1/p')
  {
    echo
    echo "// volcano.sh/volcano's own replace list (hack/controlplane/update-modules.sh)."
    echo "replace ("
    replace_lines "$gomod" | while read -r m _ _ v; do printf '\t%s => %s %s\n' "$m" "$m" "$v"; done
    echo ")"
  } >>"$dir/go.mod"
  (cd "$dir" && go get -tool "volcano.sh/volcano/cmd/scheduler@$VOLCANO_VERSION" && go mod tidy)
}

# mpi-operator: kubeflow's MPI operator (`make bench`), with its own replace list copied as it is
# (v0.8.2 has none, but a later release may).
update_mpi_operator() {
  local dir=$TOOLS_MODULES/mpi-operator gomod m v mod=github.com/kubeflow/mpi-operator
  new_module "$dir" github.com/troupe-dev/troupe/test/tools/mpi-operator
  gomod=$(go mod download -json "$mod@$MPI_OPERATOR_VERSION" | sed -n 's/^\t"GoMod": "\(.*\)",$/\1/p')
  {
    echo
    echo "// $mod's own replace list (hack/controlplane/update-modules.sh)."
    echo "replace ("
    replace_lines "$gomod" | while read -r m _ _ v; do printf '\t%s => %s %s\n' "$m" "$m" "$v"; done
    echo ")"
  } >>"$dir/go.mod"
  (cd "$dir" && go get -tool "$mod/cmd/mpi-operator@$MPI_OPERATOR_VERSION" && go mod tidy)
}

# kueue: Kueue's manager (cmd/kueue), whose module builds with its own requirements (v0.17.0 has
# no replace list); the local cluster runs it beside the gang schedulers (docs/kueue.md).
update_kueue() {
  local dir=$TOOLS_MODULES/kueue
  new_module "$dir" github.com/troupe-dev/troupe/test/tools/kueue
  (cd "$dir" && go get -tool "sigs.k8s.io/kueue/cmd/kueue@$KUEUE_VERSION" && go mod tidy)
}

# prometheus: Prometheus's server (cmd/prometheus), built with its own requirements (no replace
# list), for the e2e suite's scrape of the operator.
update_prometheus() {
  local dir=$TOOLS_MODULES/prometheus
  new_module "$dir" github.com/troupe-dev/troupe/test/tools/prometheus
  (cd "$dir" && go get -tool "github.com/prometheus/prometheus/cmd/prometheus@$PROMETHEUS_VERSION" && go mod tidy)
}

# metrics-server: the resource metrics API (cmd/metrics-server), built with its own requirements
# (v0.8.0 has no replace list), for the local cluster's metrics add-on.
update_metrics_server() {
  local dir=$TOOLS_MODULES/metrics-server
  new_module "$dir" github.com/troupe-dev/troupe/test/tools/metrics-server
  (cd "$dir" && go get -tool "sigs.k8s.io/metrics-server/cmd/metrics-server@$METRICS_SERVER_VERSION" && go mod tidy)
}

all=(kube kube-oldest etcd kwok scheduler-plugins volcano coredns registry mpi-operator kueue prometheus metrics-server)
(($#)) || set -- "${all[@]}"
for t in "$@"; do
  case $t in
    kube | etcd | kwok | volcano | coredns | registry | kueue | prometheus) "update_$t" ;;
    kube-oldest) update_kube_oldest ;;
    scheduler-plugins) update_scheduler_plugins ;;
    mpi-operator) update_mpi_operator ;;
    metrics-server) update_metrics_server ;;
    *) log "unknown module $t (want one of ${all[*]})"; exit 2 ;;
  esac
done
