#!/usr/bin/env bash
# dataplane-deps.sh: install (once) the Debian packages the data-plane test and the e2e suite's
# KubeExec test need on this machine: Open MPI, MPICH, OpenSSH and the tools that build network
# and mount namespaces. Idempotent; installing needs root (hack/apt-ensure.sh).
set -euo pipefail
packages=(
  openmpi-bin libopenmpi-dev # mpirun.openmpi, mpicc.openmpi
  mpich libmpich-dev         # mpiexec.hydra, mpicc.mpich
  openssh-server openssh-client
  git        # git-upload-pack: the git server of the git-sync test
  iproute2   # ip netns, veth, bridge
  util-linux # unshare, mount
  passwd     # useradd
  gcc libc6-dev
)
exec "$(dirname "$0")/apt-ensure.sh" dataplane-deps "${packages[@]}"
