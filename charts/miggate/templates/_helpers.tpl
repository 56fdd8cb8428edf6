{{/* Labels: miggate's (name, part-of), then Helm's own. */}}
{{- define "miggate.labels" -}}
app.kubernetes.io/name: {{ .name }}
app.kubernetes.io/part-of: miggate
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end }}

{{- define "miggate.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* A CEL list of single-quoted strings; values.schema.json keeps quotes and backslashes out. */}}
{{- define "miggate.celList" -}}
[{{ range $i, $s := . }}{{ if $i }}, {{ end }}'{{ $s }}'{{ end }}]
{{- end }}

{{/* The namespaces no webhook is sent: the configured ones, the release's, the publisher's. */}}
{{- define "miggate.namespaceSelector" -}}
matchExpressions:
- key: kubernetes.io/metadata.name
  operator: NotIn
  values:
  {{- range .Values.admission.exemptNamespaces }}
  - {{ . }}
  {{- end }}
  - {{ .Release.Namespace }}
  - {{ .Values.publisher.namespace }}
{{- with .Values.admission.exemptNamespaceLabel }}
- key: {{ . }}
  operator: DoesNotExist
{{- end }}
{{- end }}

{{/* A webhook's client: the Service at .path, with the CA of certificates.mode secret. */}}
{{- define "miggate.clientConfig" -}}
{{- if eq .root.Values.certificates.mode "secret" }}
{{- with .root.Values.certificates.caBundle }}
caBundle: {{ . | b64enc }}
{{- end }}
{{- end }}
service:
  name: miggate-webhook
  namespace: {{ .root.Release.Namespace }}
  path: {{ .path }}
  port: 443
{{- end }}

{{- define "miggate.configurationMeta" -}}
labels:
  {{- include "miggate.labels" (dict "root" .root "name" "miggate-webhook") | nindent 2 }}
name: {{ .name }}
{{- if eq .root.Values.certificates.mode "cert-manager" }}
annotations:
  cert-manager.io/inject-ca-from: {{ .root.Release.Namespace }}/miggate-webhook
{{- end }}
{{- end }}

{{/* The mutating configurations the webhook injects its CA into. */}}
{{- define "miggate.mutatingConfigurations" -}}
{{- $names := list "miggate-summary" -}}
{{- if .Values.steering.enabled }}{{ $names = append $names "miggate-steer" }}{{ end -}}
{{- $names = append $names "miggate-device-map" -}}
{{- toJson $names -}}
{{- end }}

{{/* The restricted Pod Security profile's container settings. */}}
{{- define "miggate.containerSecurity" -}}
allowPrivilegeEscalation: false
capabilities:
  drop:
  - ALL
readOnlyRootFilesystem: true
runAsNonRoot: true
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "miggate.podSecurity" -}}
runAsGroup: 65532
runAsNonRoot: true
runAsUser: 65532
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* matchLabels as selector text, keys sorted: a=1,b=2. */}}
{{- define "miggate.matchLabels" -}}
{{- $labels := . -}}
{{- range $i, $k := keys $labels | sortAlpha }}{{ if $i }},{{ end }}{{ $k }}={{ get $labels $k }}{{ end }}
{{- end }}
