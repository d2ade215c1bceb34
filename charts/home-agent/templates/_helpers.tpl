{{- define "home-agent.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "home-agent.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "home-agent.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "home-agent.webhookService" -}}
{{- printf "%s-webhook" (include "home-agent.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "home-agent.certSecret" -}}
{{- printf "%s-webhook-tls" (include "home-agent.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Per remote (call with dict "root" $ "remote" .): the agent's name. */}}
{{- define "home-agent.remoteName" -}}
{{- printf "%s-%s" (include "home-agent.fullname" .root) .remote.clusterId | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "home-agent.kubeconfigSecret" -}}
{{- if .remote.kubeconfigSecret -}}
{{- .remote.kubeconfigSecret -}}
{{- else -}}
{{- printf "%s-kubeconfig" (include "home-agent.remoteName" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
