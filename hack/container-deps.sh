#!/usr/bin/env bash
# container-deps.sh: install (once) the Debian packages that build the images (buildah,
# mmdebstrap, podman) and run the local cluster's real node (containerd, runc, the CNI plugins,
# iptables, conntrack). Idempotent; installing needs root (hack/apt-ensure.sh).
set -euo pipefail
packages=(
  buildah mmdebstrap  # make images: Containerfiles, Debian root filesystems
  podman uidmap       # running an image by hand (podman run --runtime runc)
  containerd runc     # the real node's container runtime (crun fails on this cgroup v1 machine)
  containernetworking-plugins # /usr/lib/cni: bridge, host-local, loopback
  iptables conntrack  # kube-proxy's Service rules
  iproute2 util-linux # ip, findmnt, umount
)
exec "$(dirname "$0")/apt-ensure.sh" container-deps "${packages[@]}"
