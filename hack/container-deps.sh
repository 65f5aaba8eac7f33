#!/usr/bin/env bash
# container-deps.sh: install (once) the Debian packages that build the images (buildah,
# mmdebstrap, podman) and run the local cluster's real node (containerd, runc, the CNI plugins,
# iptables, conntrack). Idempotent: when every package is installed it only says so. Needs root.
set -euo pipefail

packages=(
  buildah mmdebstrap  # make images: Containerfiles, Debian root filesystems
  podman uidmap       # running an image by hand (podman run --runtime runc)
  containerd runc     # the real node's container runtime (crun fails on this cgroup v1 machine)
  containernetworking-plugins # /usr/lib/cni: bridge, host-local, loopback
  iptables conntrack  # kube-proxy's Service rules
  iproute2 util-linux # ip, findmnt, umount
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "container-deps: all ${#packages[@]} packages installed" >&2
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "container-deps: missing packages ${missing[*]}; run as root to install them" >&2
  exit 1
fi

echo "container-deps: installing ${missing[*]}" >&2
# Another apt run (hack/dataplane-deps.sh of a parallel make) may hold the lock: wait for it.
apt-get -o DPkg::Lock::Timeout=600 update >&2
# policy-rc.d keeps the package scripts from starting a system containerd: the real node runs
# its own, with its own configuration, root and socket.
policy=/usr/sbin/policy-rc.d
created_policy=
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy"
  chmod 755 "$policy"
  created_policy=1
fi
trap 'if [ -n "$created_policy" ]; then rm -f "$policy"; fi' EXIT
DEBIAN_FRONTEND=noninteractive apt-get install -y -o DPkg::Lock::Timeout=600 --no-install-recommends "${missing[@]}" >&2
echo "container-deps: installed ${missing[*]}" >&2
