#!/usr/bin/env bash
# dataplane-deps.sh: install (once) the Debian packages the data-plane test needs: Open MPI,
# MPICH, OpenSSH and the tools that build network and mount namespaces. Idempotent: when every
# package is installed it only says so. Needs root (apt-get).
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

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "dataplane-deps: all ${#packages[@]} packages installed (${packages[*]})"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "dataplane-deps: missing packages ${missing[*]}; run as root to install them" >&2
  exit 1
fi

echo "dataplane-deps: installing ${missing[*]}"
apt-get update
# policy-rc.d keeps the package scripts from starting a system sshd on port 22: the test
# starts its own sshd processes, and nothing else should listen.
policy=/usr/sbin/policy-rc.d
created_policy=
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy"
  chmod 755 "$policy"
  created_policy=1
fi
trap 'if [ -n "$created_policy" ]; then rm -f "$policy"; fi' EXIT
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
echo "dataplane-deps: installed ${missing[*]}"
