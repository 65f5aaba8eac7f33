#!/usr/bin/env bash
# apt-ensure.sh NAME PACKAGE...: install (once) the Debian packages that are missing, for the
# script NAME (the prefix of its messages). Idempotent: when every package is installed it only
# says so. Installing needs root; another apt run of a parallel make may hold dpkg's lock, which
# it waits for. A policy-rc.d keeps the packages' scripts from starting services (sshd,
# containerd): the tests and the real node start their own, with their own configuration.
set -euo pipefail
name=${1:?usage: hack/apt-ensure.sh NAME PACKAGE...}
shift
packages=("$@")

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "$name: all ${#packages[@]} packages installed" >&2
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "$name: missing packages ${missing[*]}; run as root to install them" >&2
  exit 1
fi

echo "$name: installing ${missing[*]}" >&2
apt-get -o DPkg::Lock::Timeout=600 update >&2
policy=/usr/sbin/policy-rc.d
created_policy=
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy"
  chmod 755 "$policy"
  created_policy=1
fi
trap 'if [ -n "$created_policy" ]; then rm -f "$policy"; fi' EXIT
DEBIAN_FRONTEND=noninteractive apt-get install -y -o DPkg::Lock::Timeout=600 --no-install-recommends "${missing[@]}" >&2
echo "$name: installed ${missing[*]}" >&2
