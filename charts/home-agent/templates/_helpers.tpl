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

{{/* "true" when the agents reflect service-account tokens (API server support and the token
reflection on): only then may they request tokens. */}}
{{- define "home-agent.reflectsTokens" -}}
{{- if and .Values.enableApiserverSupport (ne (int (dig "serviceaccount" "workers" 1 .Values.reflection)) 0) -}}
true
{{- end -}}
{{- end -}}

{{/* The ClusterRole of what the agents do in an offloaded namespace, which the home controller
binds in the offloaded namespaces only. */}}
{{- define "home-agent.namespaceRole" -}}
{{- printf "%s-offloaded-namespaces" (include "home-agent.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The subject of the rights every agent of the release shares (clusterrole.yaml). */}}
{{- define "home-agent.agentsSubject" -}}
apiGroup: rbac.authorization.k8s.io
kind: Group
name: {{ printf "system:serviceaccounts:%s" .Release.Namespace | quote }}
{{- end -}}

{{/* Why a remote's cluster id may not name an agent, "" when it may (call with dict "root" $
"remote" .): the rule of shared/forge/agent.py agent_name_refusal, which a chart test holds this
to. The agent's names must never be the release's own objects' (an agent running as the
controller's account) nor another agent's. */}}
{{- define "home-agent.clusterIdRefusal" -}}
{{- $id := .remote.clusterId -}}
{{- $name := printf "%s-%s" (include "home-agent.fullname" .root) $id -}}
{{- $reserved := list "agent-template" "agents" "apiserver-address" "controller" "controller-metrics" "controller-metrics-auth" "controller-webhook" "controller-webhook-tls" "dashboard" "leader-election" "metrics" "namespace-grants" "node-lease" "offloaded-namespaces" "uninstall" "webhook" "webhook-tls" -}}
{{- if has $id $reserved -}}
remotes[].clusterId {{ $id }} would name its agent {{ $name }}, a name of the release's own objects
{{- else if hasSuffix "-kubeconfig" $id -}}
remotes[].clusterId {{ $id }} ends with -kubeconfig: its agent {{ $name }} would bear the name of the kubeconfig Role and Secret of the agent of cluster {{ trimSuffix "-kubeconfig" $id }}
{{- else if ge (len $name) 63 -}}
remotes[].clusterId {{ $id }} would name its agent {{ $name }}, {{ len $name }} characters: at most 62, so that no name of it is truncated into another agent's
{{- end -}}
{{- end -}}

{{- define "home-agent.kubeconfigSecret" -}}
{{- if .remote.kubeconfigSecret -}}
{{- .remote.kubeconfigSecret -}}
{{- else -}}
{{- printf "%s-kubeconfig" (include "home-agent.remoteName" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The agent's flags that are the release's, not a remote's: the same for every agent, the
chart's (remotes.yaml) and the controller's (its agent template, home_controller/). */}}
{{- define "home-agent.agentArgs" -}}
- --cluster-id={{ .Values.clusterId }}
- --agent-ip=$(POD_IP)
- --leader-elect=true
- --leader-elect-resource-namespace={{ .Release.Namespace }}
- --leader-elect-lease-duration={{ .Values.leaderElection.leaseDurationSeconds }}
- --leader-elect-renew-deadline={{ .Values.leaderElection.renewDeadlineSeconds }}
- --leader-elect-retry-period={{ .Values.leaderElection.retryPeriodSeconds }}
- --lease-renew-interval={{ .Values.lease.renewIntervalSeconds }}
- --lease-duration={{ .Values.lease.durationSeconds }}
- --health-check-interval={{ .Values.healthCheck.intervalSeconds }}
- --health-check-timeout={{ .Values.healthCheck.timeoutSeconds }}
- --failure-threshold={{ .Values.healthCheck.failureThreshold }}
{{- with .Values.homePodCidr }}
- --home-pod-cidr={{ . }}
{{- end }}
{{- with .Values.homeApiServer.host }}
- --home-apiserver-host={{ . }}
- --home-apiserver-port={{ $.Values.homeApiServer.port }}
{{- end }}
- --enable-apiserver-support={{ .Values.enableApiserverSupport }}
{{- with .Values.storageClass.homeStorageClass }}
- --home-storage-class={{ . }}
{{- end }}
- --token-refresh-fraction={{ .Values.tokenRefreshFraction }}
{{- range $kind, $reflection := .Values.reflection }}
{{- if ne $kind "skip" }}
{{- if hasKey $reflection "workers" }}
- --{{ $kind }}-reflection-workers={{ $reflection.workers }}
{{- end }}
{{- with $reflection.type }}
- --{{ $kind }}-reflection-type={{ . }}
{{- end }}
{{- end }}
{{- end }}
{{- with .Values.reflection.skip.labels }}
- --labels-not-reflected={{ join "," . }}
{{- end }}
{{- with .Values.reflection.skip.annotations }}
- --annotations-not-reflected={{ join "," . }}
{{- end }}
{{- with .Values.redisUrl }}
- --redis-url={{ . }}
{{- end }}
- --home-qps={{ .Values.client.home.qps }}
- --home-burst={{ .Values.client.home.burst }}
- --remote-qps={{ .Values.client.remote.qps }}
- --remote-burst={{ .Values.client.remote.burst }}
- --workers={{ .Values.workers }}
- --metrics-address=0.0.0.0:{{ .Values.metrics.port }}
{{- if .Values.metrics.secure }}
- --metrics-secure
{{- end }}
- --kubelet-port={{ .Values.kubelet.port }}
{{- with .Values.kubelet.clientCaFile }}
- --kubelet-client-ca={{ . }}
{{- end }}
{{- if .Values.kubelet.servingCertSecret }}
- --kubelet-cert=/etc/annex/kubelet/tls.crt
- --kubelet-key=/etc/annex/kubelet/tls.key
{{- end }}
{{- if .Values.kubelet.servingCertFromCsr }}
- --kubelet-serving-cert-from-csr
{{- end }}
- --webhook-address=0.0.0.0:{{ .Values.webhook.port }}
- --webhook-cert=/etc/annex/webhook/tls.crt
- --webhook-key=/etc/annex/webhook/tls.key
- --log-format={{ .Values.logFormat }}
- --log-level={{ .Values.logLevel }}
{{- with .Values.tracing.otlpEndpoint }}
- --otlp-endpoint={{ . }}
{{- end }}
{{- end -}}

{{/* A webhook server's TLS (call with dict "root" $ "service" <Service name> "secret" <Secret
name>): YAML of caBundle, crt and key, each base64, generated at install for the Service's DNS
names and reused from the Secret on upgrades, so the caBundle and the pods' cert agree. */}}
{{- define "home-agent.servingTls" -}}
{{- $namespace := .root.Release.Namespace -}}
{{- $existing := lookup "v1" "Secret" $namespace .secret -}}
{{- if and $existing $existing.data (index $existing.data "ca.crt") -}}
caBundle: {{ index $existing.data "ca.crt" }}
crt: {{ index $existing.data "tls.crt" }}
key: {{ index $existing.data "tls.key" }}
{{- else -}}
{{- $ca := genCA (printf "%s-ca" .service) 3650 -}}
{{- $dns := list .service (printf "%s.%s" .service $namespace) (printf "%s.%s.svc" .service $namespace) (printf "%s.%s.svc.cluster.local" .service $namespace) -}}
{{- $cert := genSignedCert (printf "%s.%s.svc" .service $namespace) nil $dns 3650 $ca -}}
caBundle: {{ $ca.Cert | b64enc }}
crt: {{ $cert.Cert | b64enc }}
key: {{ $cert.Key | b64enc }}
{{- end -}}
{{- end -}}
