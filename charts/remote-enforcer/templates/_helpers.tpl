{{- define "remote-enforcer.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "remote-enforcer.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "remote-enforcer.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The ClusterRole of the consumers' rights in their twin namespaces. */}}
{{- define "remote-enforcer.consumerClusterRole" -}}
{{- printf "%s-consumer" (include "remote-enforcer.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "remote-enforcer.webhookService" -}}
{{- printf "%s-webhook" (include "remote-enforcer.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "remote-enforcer.certSecret" -}}
{{- printf "%s-webhook-tls" (include "remote-enforcer.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The tenant namespace of a consumer entry: its own, or annex-tenant-<clusterId>. */}}
{{- define "remote-enforcer.tenantNamespace" -}}
{{- .namespace | default (printf "annex-tenant-%s" .clusterId) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
