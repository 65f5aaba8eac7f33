{{/* Labels of every object of the release. */}}
{{- define "troupe.labels" -}}
app.kubernetes.io/part-of: troupe
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end }}

{{/* The operator pods' selector. */}}
{{- define "troupe.selector" -}}
app.kubernetes.io/name: troupe-operator
{{- end }}
