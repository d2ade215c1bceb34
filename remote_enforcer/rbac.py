"""The permissions the enforcer grants consumers in their twin namespaces, and the permissions
it needs itself. The chart's ClusterRole is checked against `ENFORCER_RULES` by a test."""

from __future__ import annotations

from typing import Any

from shared.wellknown import OFFLOADING_GROUP, SHARING_GROUP, VIRTUALKUBELET_GROUP

ALL_VERBS = ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]
READ_VERBS = ["get", "list", "watch"]

KUBELET_API_RULES: list[dict[str, Any]] = [
    # The virtual node's kubelet API serves the home pods from their twins: logs, exec, attach
    # and port-forward (create for SPDY's POST; get for WebSocket's GET, which is what
    # kube-apiserver checks for it before v1.35), `kubectl top` from metrics.k8s.io.
    {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["pods/exec", "pods/attach", "pods/portforward"],
     "verbs": ["get", "create"]},
    {"apiGroups": ["metrics.k8s.io"], "resources": ["pods"], "verbs": ["get", "list"]},
]

# What the consumer's identity may do in each twin namespace (DESIGN.md section 6).
TWIN_NAMESPACE_RULES: list[dict[str, Any]] = [
    {"apiGroups": [OFFLOADING_GROUP], "resources": ["shadowpods"], "verbs": ALL_VERBS},
    {"apiGroups": [""], "resources": ["configmaps", "secrets", "services",
                                      "persistentvolumeclaims"], "verbs": ALL_VERBS},
    {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ALL_VERBS},
    {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses"], "verbs": ALL_VERBS},
    {"apiGroups": [""], "resources": ["events", "pods"], "verbs": READ_VERBS},
    *KUBELET_API_RULES,
]

# What the enforcer itself does, cluster-wide. Rules for kinds it only grants (ShadowPod writes,
# ConfigMaps, Secrets, Services, EndpointSlices, Ingresses) are there because RBAC only lets it
# grant permissions it holds (no `escalate`).
ENFORCER_RULES: list[dict[str, Any]] = [
    {"apiGroups": [OFFLOADING_GROUP], "resources": ["shadowpods"], "verbs": ALL_VERBS},
    {"apiGroups": [OFFLOADING_GROUP], "resources": ["shadowpods/status"], "verbs": ["patch"]},
    {"apiGroups": [OFFLOADING_GROUP], "resources": ["quotas"], "verbs": READ_VERBS},
    {"apiGroups": [OFFLOADING_GROUP], "resources": ["quotas/status"], "verbs": ["patch"]},
    # patch: metadata only, kopf's finalizer and its enforcer.annex.io/ annotations
    {"apiGroups": [VIRTUALKUBELET_GROUP], "resources": ["namespacemaps"],
     "verbs": [*READ_VERBS, "patch"]},
    {"apiGroups": [VIRTUALKUBELET_GROUP], "resources": ["namespacemaps/status"],
     "verbs": ["patch"]},
    {"apiGroups": [SHARING_GROUP], "resources": ["resourceoffers"],
     "verbs": ["get", "list", "watch", "create", "patch"]},
    # patch: the Pod Security labels of twin namespaces follow the consumer's pod policy
    {"apiGroups": [""], "resources": ["namespaces"],
     "verbs": ["get", "list", "watch", "create", "patch", "delete"]},
    {"apiGroups": [""], "resources": ["nodes"], "verbs": READ_VERBS},
    {"apiGroups": [""], "resources": ["pods"],
     "verbs": ["get", "list", "watch", "create", "patch"]},
    # persistentvolumeclaims: granted to consumers, listed for the storage quota
    {"apiGroups": [""], "resources": ["configmaps", "secrets", "services",
                                      "persistentvolumeclaims"], "verbs": ALL_VERBS},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["get", "list", "watch", "create",
                                                           "patch"]},
    # the ResourceQuota of each twin namespace: the consumer's namespacePolicy.objectCounts
    {"apiGroups": [""], "resources": ["resourcequotas"], "verbs": ["get", "create", "patch"]},
    {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ALL_VERBS},
    {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses"], "verbs": ALL_VERBS},
    # a RoleBinding whose roleRef must change is deleted and created again (roleRef is immutable)
    {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"],
     "verbs": ["get", "create", "patch", "delete"]},
    # kopf watches CRDs to notice served resources appearing and going (its documented RBAC).
    {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"],
     "verbs": ["list", "watch"]},
    # only granted to consumers in their twin namespaces
    *KUBELET_API_RULES,
]
