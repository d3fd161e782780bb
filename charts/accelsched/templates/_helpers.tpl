{{/* Names, labels and the image every template uses. */}}

{{- define "accelsched.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* A component's object name: fullname-component, within the 63 characters of a label value. */}}
{{- define "accelsched.component.name" -}}
{{- $root := index . 0 -}}{{- $component := index . 1 -}}
{{- printf "%s-%s" (include "accelsched.fullname" $root | trunc 50 | trimSuffix "-") $component | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "accelsched.labels" -}}
{{- $root := index . 0 -}}{{- $component := index . 1 -}}
helm.sh/chart: {{ printf "%s-%s" $root.Chart.Name $root.Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ $root.Chart.Name }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/version: {{ $root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ $root.Release.Service }}
app.kubernetes.io/component: {{ $component }}
app.kubernetes.io/part-of: accelsched
{{- with $root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The selector: stable across upgrades (no version, no chart). */}}
{{- define "accelsched.selectorLabels" -}}
{{- $root := index . 0 -}}{{- $component := index . 1 -}}
app.kubernetes.io/name: {{ $root.Chart.Name }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/component: {{ $component }}
{{- end -}}

{{- define "accelsched.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The restricted container security context every component runs with. */}}
{{- define "accelsched.securityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}
