#!/usr/bin/env bash
# run-local.sh (make run): troupe-operator as a process of this machine against the cluster of
# $KUBECONFIG (or kubectl's default), in the foreground; Ctrl-C stops it.
#
# Its admission webhooks need the API server to reach this machine. When the cluster's API server
# is on this machine (its address is localhost or 127.x, as kind's port mapping, minikube's
# docker driver or the local simulated cluster give), the webhooks are served here: the
# configurations point at https://localhost:$WEBHOOK_PORT (hack/webhooks-local.sh) and the
# operator makes their certificate. Otherwise the operator runs with --disable-webhooks: the CRDs'
# own rules still refuse bad specs, and the engine applies the defaults and name checks the
# webhooks would (docs/admission.md). WEBHOOKS=1 or WEBHOOKS=0 decides instead of the address.
#   WEBHOOK_PORT (9443), METRICS_PORT (8080), HEALTH_PORT (8081): ports on 127.0.0.1
#   ARGS: more flags for the operator (troupe-operator --help)
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/controlplane/lib.sh

WEBHOOK_PORT=${WEBHOOK_PORT:-9443}
METRICS_PORT=${METRICS_PORT:-8080}
HEALTH_PORT=${HEALTH_PORT:-8081}
server=$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}') ||
  { echo "make run: no cluster in \$KUBECONFIG (kubectl config view found none)" >&2; exit 1; }
host=${server#*://}
host=${host%%/*}
host=${host%:*}
if [[ -z ${WEBHOOKS:-} ]]; then
  case $host in
    localhost | 127.* | \[::1\]) WEBHOOKS=1 ;;
    *) WEBHOOKS=0 ;;
  esac
fi

flags=(--metrics-bind-address "127.0.0.1:$METRICS_PORT" --metrics-secure=false
  --health-probe-bind-address "127.0.0.1:$HEALTH_PORT")
if [[ $WEBHOOKS == 1 ]]; then
  # The certificate of one cluster is not another's: a directory per API server.
  certs=$TROUPE_CACHE/run/$(printf '%s' "$server" | sha256sum | cut -c1-12)/certs
  hack/webhooks-local.sh "$WEBHOOK_PORT" >&2
  # The progress endpoint is served beside them, at the URL a process of this machine reaches.
  flags+=(--webhook-bind-address "127.0.0.1:$WEBHOOK_PORT" --webhook-dns-name localhost
    --webhook-cert-dir "$certs" --webhook-write-certs --progress-url "https://localhost:$WEBHOOK_PORT")
else
  echo "make run: the API server ($server) is not on this machine and could not call webhooks here;" \
    "running with --disable-webhooks (WEBHOOKS=1 serves them anyway)" >&2
  flags+=(--disable-webhooks)
fi
# shellcheck disable=SC2086 # ARGS is a list of flags
exec ./bin/troupe-operator "${flags[@]}" ${ARGS:-}
