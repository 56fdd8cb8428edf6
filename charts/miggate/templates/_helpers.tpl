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

{{/* A CIDR of networkPolicy.apiServerCIDRs, held to the form the API server keeps: the
schema takes only lower-case IPv4 or IPv6 text with a prefix length; this refuses host bits
set (10.0.0.7/24 would admit the whole /24 where one address was meant), an IPv4-mapped IPv6
range, and IPv6 not in canonical form (RFC 5952), naming what to write instead. Renders
nothing. */}}
{{- define "miggate.checkCIDR" -}}
{{- $cidr := . -}}
{{- $where := printf "networkPolicy.apiServerCIDRs: %s" $cidr -}}
{{- $parts := splitList "/" $cidr -}}
{{- $addr := index $parts 0 -}}
{{- $len := atoi (index $parts 1) -}}
{{- $pow := list 1 2 4 8 16 32 64 128 256 512 1024 2048 4096 8192 16384 32768 65536 -}}
{{- if contains "." $addr -}}
{{- $net := list -}}
{{- $host := false -}}
{{- range $i, $o := splitList "." $addr -}}
{{- $bits := min 8 (max 0 (sub $len (mul 8 $i))) -}}
{{- $unit := index $pow (int (sub 8 $bits)) -}}
{{- $v := atoi $o -}}
{{- if ne (mod $v $unit) 0 }}{{ $host = true }}{{ end -}}
{{- $net = append $net (toString (sub $v (mod $v $unit))) -}}
{{- end -}}
{{- if $host -}}
{{- fail (printf "%s has host bits set: its network is %s/%d; for the one address write %s/32" $where (join "." $net) $len $addr) -}}
{{- end -}}
{{- else -}}
{{- $halves := splitList "::" $addr -}}
{{- if gt (len $halves) 2 -}}
{{- fail (printf "%s is not a CIDR: an address and a prefix length, such as 10.0.0.0/24, 10.0.0.7/32 or fd00::/64" $where) -}}
{{- end -}}
{{- $head := list -}}
{{- if ne (index $halves 0) "" }}{{ $head = splitList ":" (index $halves 0) }}{{ end -}}
{{- $tail := list -}}
{{- if and (eq (len $halves) 2) (ne (index $halves 1) "") }}{{ $tail = splitList ":" (index $halves 1) }}{{ end -}}
{{- $missing := sub 8 (add (len $head) (len $tail)) -}}
{{- if or (and (eq (len $halves) 1) (ne $missing 0)) (and (eq (len $halves) 2) (lt $missing 1)) -}}
{{- fail (printf "%s is not a CIDR: an address and a prefix length, such as 10.0.0.0/24, 10.0.0.7/32 or fd00::/64" $where) -}}
{{- end -}}
{{- $groups := $head -}}
{{- range until (int $missing) }}{{ $groups = append $groups "0" }}{{ end -}}
{{- $groups = concat $groups $tail -}}
{{- $hex := dict "0" 0 "1" 1 "2" 2 "3" 3 "4" 4 "5" 5 "6" 6 "7" 7 "8" 8 "9" 9 "a" 10 "b" 11 "c" 12 "d" 13 "e" 14 "f" 15 -}}
{{- $values := list -}}
{{- $net := list -}}
{{- $host := false -}}
{{- range $i, $g := $groups -}}
{{- if eq $g "" -}}
{{- fail (printf "%s is not a CIDR: an address and a prefix length, such as 10.0.0.0/24, 10.0.0.7/32 or fd00::/64" $where) -}}
{{- end -}}
{{- $v := 0 -}}
{{- range splitList "" $g }}{{ $v = add (mul $v 16) (get $hex .) }}{{ end -}}
{{- $values = append $values $v -}}
{{- $bits := min 16 (max 0 (sub $len (mul 16 $i))) -}}
{{- $unit := index $pow (int (sub 16 $bits)) -}}
{{- if ne (mod $v $unit) 0 }}{{ $host = true }}{{ end -}}
{{- $net = append $net (sub $v (mod $v $unit)) -}}
{{- end -}}
{{- if and (eq (add (index $values 0) (index $values 1) (index $values 2) (index $values 3) (index $values 4)) 0) (eq (index $values 5) 65535) -}}
{{- fail (printf "%s is an IPv4-mapped IPv6 range, which Kubernetes does not take: write the IPv4 range" $where) -}}
{{- end -}}
{{- /* The canonical text of the network: groups in lower-case hex without leading zeros,
the first longest run of two or more zero groups written "::". */ -}}
{{- $best := -1 }}{{ $bestLen := 1 }}{{ $run := 0 -}}
{{- range $i, $v := $net -}}
{{- if eq $v 0 }}{{ $run = add $run 1 }}{{ else }}{{ $run = 0 }}{{ end -}}
{{- if gt $run $bestLen }}{{ $bestLen = $run }}{{ $best = sub (add $i 1) $run }}{{ end -}}
{{- end -}}
{{- $text := "" -}}
{{- $i := 0 -}}
{{- range $k, $v := $net -}}
{{- if and (ge $best 0) (ge $k $best) (lt $k (add $best $bestLen)) -}}
{{- if eq $k (int $best) }}{{ $text = printf "%s::" $text }}{{ end -}}
{{- else -}}
{{- if and (gt (len $text) 0) (not (hasSuffix ":" $text)) }}{{ $text = printf "%s:" $text }}{{ end -}}
{{- $text = printf "%s%x" $text $v -}}
{{- end -}}
{{- end -}}
{{- $network := printf "%s/%d" $text $len -}}
{{- if $host -}}
{{- fail (printf "%s has host bits set: its network is %s; for the one address write %s/128" $where $network $addr) -}}
{{- end -}}
{{- if ne $network $cidr -}}
{{- fail (printf "%s is not in canonical form: write %s" $where $network) -}}
{{- end -}}
{{- end -}}
{{- end }}
