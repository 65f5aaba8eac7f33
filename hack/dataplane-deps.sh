#!/usr/bin/env bash
# dataplane-deps.sh: install (once) the Debian packages that tests run on this machine itself
# (not in an image) need. The data-plane test's MPI hosts are containers of troupe-mpi
# (hack/container-deps.sh, make images); what still runs here: the git-sync test's git server
# (sshd and git-upload-pack) and the e2e suite's TestKubeExecRunsMPI (Open MPI's mpirun and
# mpicc, and unshare, on this machine: kwok's exec runs the ranks here). Idempotent; installing
# needs root (hack/apt-ensure.sh).
set -euo pipefail
packages=(
  openmpi-bin libopenmpi-dev gcc libc6-dev # TestKubeExecRunsMPI: mpirun.openmpi, mpicc.openmpi
  util-linux                               # TestKubeExecRunsMPI: unshare, mount
  openssh-server openssh-client git        # TestGitSyncOverSSH: sshd, git-upload-pack
  iproute2                                 # the data-plane test: ip netns, veth, bridge
)
exec "$(dirname "$0")/apt-ensure.sh" dataplane-deps "${packages[@]}"
