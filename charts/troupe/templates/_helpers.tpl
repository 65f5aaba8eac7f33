{{/* The recommended labels of every object of the release (the name is the operator's). */}}
{{- define "troupe.labels" -}}
app.kubernetes.io/name: troupe-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: operator
app.kubernetes.io/part-of: troupe
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version | replace "+" "_" }}
{{- end }}

{{/* The operator pods' selector: fixed, as a Deployment's selector cannot change on upgrade. */}}
{{- define "troupe.selector" -}}
app.kubernetes.io/name: troupe-operator
{{- end }}
