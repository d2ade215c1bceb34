"""The permissions the enforcer grants consumers in their twin namespaces, and the permissions
it needs itself. The chart's ClusterRole is checked against `ENFORCER_RULES` by a test."""

from __future__ import annotations

from typing import Any

from shared.wellknown import OFFLOADING_GROUP, SHARING_GROUP, VIRTUALKUBELET_GROUP

ALL_VERBS = ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]
READ_VERBS = ["get", "list", "watch"]

# What the consumer's identity may do in each twin namespace (DESIGN.md section 6).
TWIN_NAMESPACE_RULES: list[dict[str, Any]] = [
    {"apiGroups": [OFFLOADING_GROUP], "resources": ["shadowpods"], "verbs": ALL_VERBS},
    {"apiGroups": [""], "resources": ["configmaps", "secrets", "services"], "verbs": ALL_VERBS},
    {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ALL_VERBS},
    {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses"], "verbs": ALL_VERBS},
    {"apiGroups": [""], "resources": ["events", "pods"], "verbs": READ_VERBS},
]

# What the enforcer itself does, cluster-wide. It holds the twin-namespace rules itself because
# RBAC only lets it grant permissions it has (no `escalate`).
ENFORCER_RULES: list[dict[str, Any]] = [
    {"apiGroups": [OFFLOADING_GROUP], "resources": ["shadowpods"], "verbs": ALL_VERBS},
    {"apiGroups": [OFFLOADING_GROUP], "resources": ["shadowpods/status"],
     "verbs": ["get", "patch", "update"]},
    {"apiGroups": [OFFLOADING_GROUP], "resources": ["quotas"], "verbs": READ_VERBS},
    {"apiGroups": [VIRTUALKUBELET_GROUP], "resources": ["namespacemaps"], "verbs": READ_VERBS},
    {"apiGroups": [VIRTUALKUBELET_GROUP], "resources": ["namespacemaps/status"],
     "verbs": ["get", "patch", "update"]},
    {"apiGroups": [SHARING_GROUP], "resources": ["resourceoffers"],
     "verbs": ["get", "list", "watch", "create", "update", "patch"]},
    {"apiGroups": [""], "resources": ["namespaces"],
     "verbs": ["get", "list", "watch", "create", "delete"]},
    {"apiGroups": [""], "resources": ["nodes"], "verbs": READ_VERBS},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ALL_VERBS},
    {"apiGroups": [""], "resources": ["configmaps", "secrets", "services"], "verbs": ALL_VERBS},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["get", "list", "watch", "create",
                                                           "patch"]},
    {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ALL_VERBS},
    {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses"], "verbs": ALL_VERBS},
    {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"],
     "verbs": ["get", "create", "update", "patch"]},
]
