#!/usr/bin/env bash
# Keeps config/kustomization.yaml listing exactly the CRDs of config/crds (make manifests runs it
# after controller-gen): a new kind's CRD is installed without editing the file, a removed one
# is dropped, and the lines already there keep their order.
set -euo pipefail
cd "$(dirname "$0")/.."
k=config/kustomization.yaml
present=$(cd config && ls crds/*.yaml | sort)
# Write the kept lines and, after the last CRD line, the CRDs not yet listed.
awk -v present="$present" '
BEGIN { n = split(present, files, "\n"); for (i = 1; i <= n; i++) have[files[i]] = 1 }
FNR == NR { if ($0 ~ /^- crds\/[^ ]+\.yaml$/) { listed[substr($0, 3)] = 1; last = FNR }; next }
{
	if (!($0 ~ /^- crds\/[^ ]+\.yaml$/ && !(substr($0, 3) in have))) print
	if (FNR == last) for (i = 1; i <= n; i++) if (!(files[i] in listed)) print "- " files[i]
}
' "$k" "$k" > "$k.tmp"
mv "$k.tmp" "$k"
