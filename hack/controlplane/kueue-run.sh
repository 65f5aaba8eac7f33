#!/usr/bin/env bash
# kueue-run.sh (cluster-up.sh fills in the ${...} values, as troupe/kueue): kwokctl starts Kueue's manager with the
# cluster, right after the API server, but the manager needs its CRDs and its certificate Secret,
# which cluster-up.sh installs after that. Wait for the Secret (installed last), then become the
# manager (exec: kwokctl stops the process it started).
set -euo pipefail
kubectl() { "${KUBE_BIN}/kubectl" --kubeconfig "${CLUSTER_DIR}/kubeconfig.yaml" "$@"; }
until kubectl -n kueue-system get secret kueue-webhook-server-cert >/dev/null 2>&1; do sleep 0.5; done
exec "${KUEUE_BIN}/kueue" --config="${CLUSTER_DIR}/troupe/kueue-config.yaml" \
  --kubeconfig="${CLUSTER_DIR}/kubeconfig.yaml" --zap-log-level=2
