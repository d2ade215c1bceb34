"""The permissions the consumer's identity holds in its twin namespaces, and the permissions the
enforcer needs itself. The chart ships both ClusterRoles; a chart test checks them against
`TWIN_NAMESPACE_RULES` and `enforcer_rules`."""

from __future__ import annotations

from typing import Any

from shared.forge.tenancy import RBAC_GROUP
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

# What the consumer's identity may do in each twin namespace: the chart's consumer ClusterRole,
# which the enforcer binds there.
TWIN_NAMESPACE_RULES: list[dict[str, Any]] = [
    {"apiGroups": [OFFLOADING_GROUP], "resources": ["shadowpods"], "verbs": ALL_VERBS},
    {"apiGroups": [""], "resources": ["configmaps", "secrets", "services",
                                      "persistentvolumeclaims"], "verbs": ALL_VERBS},
    {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ALL_VERBS},
    {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses"], "verbs": ALL_VERBS},
    {"apiGroups": [""], "resources": ["events", "pods"], "verbs": READ_VERBS},
    *KUBELET_API_RULES,
]

# What the enforcer itself does. Cluster-wide, because RBAC cannot grant in "the namespaces
# labelled as twins" and the twins come and go: it watches ShadowPods, pods, namespaces, nodes,
# Quotas and claims everywhere, makes the pods of ShadowPods and Events in twin namespaces, and
# RoleBindings there. It holds none of the consumer's rights: it may bind the consumer
# ClusterRole (and only it) instead of granting rules it holds.
ENFORCER_RULES: list[dict[str, Any]] = [
    {"apiGroups": [OFFLOADING_GROUP], "resources": ["shadowpods"], "verbs": READ_VERBS},
    {"apiGroups": [OFFLOADING_GROUP], "resources": ["shadowpods/status"], "verbs": ["patch"]},
    {"apiGroups": [OFFLOADING_GROUP], "resources": ["quotas"], "verbs": READ_VERBS},
    {"apiGroups": [OFFLOADING_GROUP], "resources": ["quotas/status"], "verbs": ["patch"]},
    # patch: metadata only, the enforcer's finalizer (offloading.liqo.io/twin-namespaces)
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
    # delete: a ShadowPod's pod left Terminating on a failed node, force-deleted (node_failure)
    {"apiGroups": [""], "resources": ["pods"],
     "verbs": ["get", "list", "watch", "create", "patch", "delete"]},
    # the ephemeral containers `kubectl debug` adds to a home pod, added to its twin (ephemeral)
    {"apiGroups": [""], "resources": ["pods/ephemeralcontainers"], "verbs": ["patch"]},
    # the reflected claims' storage counts against the consumer's quota
    {"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": READ_VERBS},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
    # the ResourceQuota of each twin namespace: the consumer's namespacePolicy.objectCounts
    {"apiGroups": [""], "resources": ["resourcequotas"], "verbs": ["get", "create", "patch"]},
    # rolebindings: the consumer's binding in each twin namespace; a binding whose roleRef must
    # change is deleted and created again (roleRef is immutable). roles: the Role an older
    # enforcer made there, deleted once the binding names the ClusterRole.
    {"apiGroups": [RBAC_GROUP], "resources": ["rolebindings"],
     "verbs": ["get", "create", "patch", "delete"]},
    {"apiGroups": [RBAC_GROUP], "resources": ["roles"], "verbs": ["get", "delete"]},
]


def leader_election_rules(lease: str) -> list[dict[str, Any]]:
    """What the replicas do to their election Lease `lease` (annex/leader.py): a Role in the
    chart's namespace. RBAC cannot confine create to a name; a standby's watch names the Lease
    in its fieldSelector (metadata.name), which the API server authorizes as that name."""
    return [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
             "resourceNames": [lease], "verbs": ["get", "update", "watch"]}]


def enforcer_rules(consumer_cluster_role: str) -> list[dict[str, Any]]:
    """The enforcer's ClusterRole: its own rules, and `bind` on the consumer ClusterRole by
    name (kube-apiserver lets a binding name a role the writer may bind without holding the
    role's rules: pkg/registry/rbac/rolebinding/policybased)."""
    return [*ENFORCER_RULES,
            {"apiGroups": [RBAC_GROUP], "resources": ["clusterroles"], "verbs": ["bind"],
             "resourceNames": [consumer_cluster_role]}]
