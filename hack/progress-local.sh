#!/usr/bin/env bash
# progress-local.sh HOST PORT: let the pods of the cluster in $KUBECONFIG reach the progress
# endpoint of a troupe-operator running on this machine (docs/progress.md): a Service
# troupe-progress in troupe-system without a selector, whose EndpointSlice is HOST:PORT (an
# address of this machine the pods reach: the real node's IP). Run the operator with
# --webhook-bind-address 0.0.0.0:PORT (or HOST:PORT), --webhook-extra-dns-names
# troupe-progress.troupe-system.svc and --progress-url https://troupe-progress.troupe-system.svc.
set -euo pipefail
host=${1:?usage: hack/progress-local.sh HOST PORT}
port=${2:?usage: hack/progress-local.sh HOST PORT}
kubectl create namespace troupe-system --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl apply --server-side --force-conflicts -f - >/dev/null <<YAML
apiVersion: v1
kind: Service
metadata: {name: troupe-progress, namespace: troupe-system}
spec:
  ports: [{name: https, port: 443, targetPort: $port, protocol: TCP}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: troupe-progress-local
  namespace: troupe-system
  labels: {kubernetes.io/service-name: troupe-progress, endpointslice.kubernetes.io/managed-by: troupe-progress-local}
addressType: IPv4
ports: [{name: https, port: $port, protocol: TCP}]
endpoints: [{addresses: ["$host"], conditions: {ready: true}}]
YAML
echo "progress endpoint: https://troupe-progress.troupe-system.svc -> $host:$port"
