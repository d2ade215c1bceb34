{{- /* The metrics pieces both charts render the same way (this file is linked into the
remote-enforcer chart). Called with a dict: root (the chart's context), fullname, labels (the
chart's labels, YAML), and per template what it needs. */}}

{{- /* ServiceMonitor and PodMonitor (prometheus-operator's monitoring.coreos.com/v1), each when
enabled. The ServiceMonitor picks the release's metrics Services (component metrics); the
PodMonitor the pods named podNames, on their ports podPorts. With metrics.secure, the scraper
sends its ServiceAccount token (ServiceMonitor) or the Secret's (PodMonitor:
podMonitor.bearerTokenSecret); either needs the metrics-reader ClusterRole (metrics.readers). */}}
{{- define "annex.metricsMonitors" -}}
{{- $root := .root }}
{{- $metrics := $root.Values.metrics }}
{{- with $metrics.serviceMonitor }}
{{- if .enabled }}
---
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: {{ $.fullname }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- $.labels | nindent 4 }}
    {{- with .labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  namespaceSelector:
    matchNames: [{{ $root.Release.Namespace }}]
  selector:
    matchLabels:
      app.kubernetes.io/instance: {{ $root.Release.Name }}
      app.kubernetes.io/component: metrics
  endpoints:
    - port: metrics
      path: /metrics
      interval: {{ .interval }}
      scrapeTimeout: {{ .scrapeTimeout }}
      {{- if $metrics.secure }}
      bearerTokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token
      {{- end }}
{{- end }}
{{- end }}
{{- with $metrics.podMonitor }}
{{- if .enabled }}
---
apiVersion: monitoring.coreos.com/v1
kind: PodMonitor
metadata:
  name: {{ $.fullname }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- $.labels | nindent 4 }}
    {{- with .labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  namespaceSelector:
    matchNames: [{{ $root.Release.Namespace }}]
  selector:
    matchLabels:
      app.kubernetes.io/instance: {{ $root.Release.Name }}
    matchExpressions:
      - key: app.kubernetes.io/name
        operator: In
        values: {{ toJson $.podNames }}
  podMetricsEndpoints:
    {{- range $.podPorts }}
    - port: {{ . }}
      path: /metrics
      interval: {{ $metrics.podMonitor.interval }}
      scrapeTimeout: {{ $metrics.podMonitor.scrapeTimeout }}
      {{- if and $metrics.secure $metrics.podMonitor.bearerTokenSecret.name }}
      bearerTokenSecret:
        name: {{ $metrics.podMonitor.bearerTokenSecret.name }}
        key: {{ $metrics.podMonitor.bearerTokenSecret.key }}
      {{- end }}
    {{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{- /* <release>-metrics-reader: get on the non-resource URL /metrics, what a scraper needs when
metrics.secure (kubebuilder's metrics-reader), bound to metrics.readers. */}}
{{- define "annex.metricsReader" -}}
{{- $root := .root }}
{{- $name := printf "%s-metrics-reader" $root.Release.Name | trunc 63 | trimSuffix "-" }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ $name }}
  labels:
    {{- .labels | nindent 4 }}
rules:
  - nonResourceURLs: [/metrics]
    verbs: [get]
{{- with $root.Values.metrics.readers }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ $name }}
  labels:
    {{- $.labels | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ $name }}
subjects:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- /* The review rights of the component whose ServiceAccount is serviceAccount, to check its
scrapers' tokens and rights (metrics.secure). */}}
{{- define "annex.metricsAuth" -}}
{{- $root := .root }}
{{- $name := printf "%s-metrics-auth" .serviceAccount | trunc 63 | trimSuffix "-" }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ $name }}
  labels:
    {{- .labels | nindent 4 }}
rules:
  - apiGroups: [authentication.k8s.io]
    resources: [tokenreviews]
    verbs: [create]
  - apiGroups: [authorization.k8s.io]
    resources: [subjectaccessreviews]
    verbs: [create]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ $name }}
  labels:
    {{- .labels | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ $name }}
subjects:
  - kind: ServiceAccount
    name: {{ .serviceAccount }}
    namespace: {{ $root.Release.Namespace }}
{{- end -}}

{{- /* The chart's Grafana dashboard (file) as a ConfigMap Grafana's sidecar loads (label
grafana_dashboard: "1", metrics.dashboard.labels), in metrics.dashboard.namespace or the
release's. */}}
{{- define "annex.metricsDashboard" -}}
{{- $root := .root }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ printf "%s-dashboard" .fullname | trunc 63 | trimSuffix "-" }}
  namespace: {{ $root.Values.metrics.dashboard.namespace | default $root.Release.Namespace }}
  labels:
    {{- .labels | nindent 4 }}
    {{- toYaml $root.Values.metrics.dashboard.labels | nindent 4 }}
data:
  {{ base .file }}: |-
    {{- $root.Files.Get .file | nindent 4 }}
{{- end -}}
