#!/usr/bin/env bash
# webhooks-local.sh PORT: point the cluster in $KUBECONFIG at admission webhooks served by a
# troupe-operator running on this machine (https://localhost:PORT), as `make demo` and the e2e
# tests run it. It applies config/webhook with each Service reference turned into a URL, and
# creates the namespace and the (empty) Secret the operator's certificate rotator fills; the
# operator then writes the CA into the configurations' caBundle.
set -euo pipefail
cd "$(dirname "$0")/.."
port=${1:?usage: hack/webhooks-local.sh PORT}
ns=troupe-system
secret=troupe-webhook-cert

kubectl create namespace "$ns" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl -n "$ns" create secret generic "$secret" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
# clientConfig.service {name, namespace, path} -> clientConfig.url https://localhost:PORT<path>
awk -v base="https://localhost:$port" '
  /^ *service:$/ { indent = index($0, "s") - 1; inservice = 1; next }
  inservice && /^ *(name|namespace|port):/ { next }
  inservice && /^ *path:/ { sub(/^ *path: */, ""); printf "%*surl: %s%s\n", indent, "", base, $0; inservice = 0; next }
  { inservice = 0; print }
' config/webhook/manifests.yaml | kubectl apply --server-side --force-conflicts -f - >/dev/null
echo "webhooks: https://localhost:$port (certificate Secret $ns/$secret)"
