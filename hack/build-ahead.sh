#!/usr/bin/env bash
# build-ahead.sh COMMAND...: run COMMAND (make test's suites) and, beside it at low priority,
# build what its later suites will need: the local clusters' binaries and the real node's
# images. On a fresh machine those builds are about half of a `make test`, and the suites before
# them mostly wait on API servers and simulated pods, so the builds use the CPU the suites leave.
#
# Only a head start: every suite still builds what it needs itself. The builders take a lock per
# binary and per image (hack/controlplane/build.sh, hack/images/build.sh), so a suite that needs
# one being built here waits for it, and one that failed here is built again by its suite.
# Niceness 10 gives the suites the CPU whenever both want it. When COMMAND ends, also by failure
# or a signal, the builds still running are stopped (their process group, recorded here).
# With nothing to build (the caches warm) the builds ahead end within seconds.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

say() { echo "[build-ahead] $*" >&2; }

# In the order make test's suites need them: the integration suites', e2e's simulated cluster
# (make cluster-assets and Prometheus), then the real node's.
binaries=(etcd kube-apiserver kubectl kube-controller-manager kube-scheduler kwok kwokctl
  coscheduler volcano-scheduler kueue prometheus kubelet kube-proxy coredns registry)
# The real node's images (hack/controlplane/realnode-up.sh's, troupe-train and kubeflow's pi
# examples, which its tests import).
images=(pause troupe-mpi troupe-operator troupe-agent troupe-train mpi-pi-openmpi mpi-pi-mpich)

if [[ ${1:-} == --builds ]]; then
  start=$SECONDS
  for b in "${binaries[@]}"; do
    "$here/controlplane/build.sh" "$b" || say "$b failed here; the suite that needs it builds it again"
  done
  # buildah comes with the data plane suite's packages (hack/container-deps.sh, run as root by
  # make test-dataplane); this script installs nothing: two apt runs at once would share one
  # policy-rc.d.
  if command -v buildah >/dev/null; then
    for i in "${images[@]}"; do
      # buildah's steps go to a log; its [images] lines (built, cached, failed) are shown.
      log=$(mktemp)
      if "$here/images/build.sh" "$i" >/dev/null 2>"$log"; then
        grep '^\[images\]' "$log" >&2 || true
      else
        tail -n 20 "$log" >&2
        say "image $i failed here; the suite that needs it builds it again"
      fi
      rm -f "$log"
    done
  else
    say "buildah not installed yet: the real node's images are left to its suite"
  fi
  say "done in $((SECONDS - start))s"
  exit 0
fi

(($#)) || { echo "usage: hack/build-ahead.sh COMMAND..." >&2; exit 2; }
# A session and process group of its own: the trap stops exactly these builds, nothing else.
setsid nice -n 10 "$0" --builds &
builds=$!
# The group, once the child made it; else the child, before it started any build.
trap 'kill -TERM -- -"$builds" 2>/dev/null || kill -TERM "$builds" 2>/dev/null || true' EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
"$@"
