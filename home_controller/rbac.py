"""What the home controller does on the home cluster, as RBAC rules (the chart's roles are
checked against these by tests/charts/test_home_controller_chart.py): ForeignClusters are
cluster-scoped; the consumer Secrets, the VirtualNodes and the agents it makes of them are in its
namespace."""

from __future__ import annotations

from typing import Any

from shared.api.foreign_cluster import DISCOVERY_GROUP
from shared.wellknown import OFFLOADING_GROUP

READ_VERBS = ["get", "list", "watch"]

CLUSTER_RULES: list[dict[str, Any]] = [
    # Discovered providers are created, follow their announcement, and go with it.
    {"apiGroups": [DISCOVERY_GROUP], "resources": ["foreignclusters"],
     "verbs": [*READ_VERBS, "create", "patch", "delete"]},
    {"apiGroups": [DISCOVERY_GROUP], "resources": ["foreignclusters/status"], "verbs": ["patch"]},
    # Virtual nodes: cordoned while their provider offers nothing, or drained; deleted with
    # their VirtualNode.
    {"apiGroups": [""], "resources": ["nodes"], "verbs": [*READ_VERBS, "patch", "delete"]},
    # A drained virtual node's pods; the pod an agent's token request is bound to
    # (home_controller/agent_admission.py).
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "delete"]},
    # A drain evicts them (their PodDisruptionBudgets hold); delete: those still there past
    # the drain timeout.
    {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
    # A drain waits for the agent's finalizers on them (the provider's namespaces removed).
    {"apiGroups": [OFFLOADING_GROUP], "resources": ["namespaceoffloadings"], "verbs": ["list"]},
]



def cluster_rules(namespace_role: str) -> list[dict[str, Any]]:
    """`CLUSTER_RULES`, and what grants the agents' offloaded-namespace ClusterRole in each
    offloaded namespace (home_controller/namespace_grants.py): the NamespaceOffloadings
    watched, a RoleBinding made, rewritten and deleted in each (watched by their labels), and
    `bind` on that role only (RBAC lets nobody grant what it does not hold or may not bind)."""
    return [*CLUSTER_RULES,
            {"apiGroups": [OFFLOADING_GROUP], "resources": ["namespaceoffloadings"],
             "verbs": ["watch"]},
            {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["rolebindings"],
             "verbs": ["get", "list", "watch", "create", "update", "delete"]},
            {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"],
             "resourceNames": [namespace_role], "verbs": ["bind"]}]


OWNED_VERBS = [*READ_VERBS, "create", "update", "delete"]

NAMESPACE_RULES: list[dict[str, Any]] = [
    # The consumer kubeconfig Secrets consent leaves (read as the consumer: the offer). patch:
    # each agent's Role grants it (and the reads) on its kubeconfig Secret, and RBAC lets
    # nobody grant what it does not hold.
    {"apiGroups": [""], "resources": ["secrets"], "verbs": [*READ_VERBS, "patch"]},
    # The VirtualNode of an accepted provider; the finalizer and status of every one.
    {"apiGroups": [OFFLOADING_GROUP], "resources": ["virtualnodes"],
     "verbs": [*READ_VERBS, "create", "patch"]},
    {"apiGroups": [OFFLOADING_GROUP], "resources": ["virtualnodes/status"], "verbs": ["patch"]},
    # Each VirtualNode's agent (shared/forge/agent.py), with its own ServiceAccount and the
    # Service in front of its replicas' kubelet API.
    {"apiGroups": [""], "resources": ["serviceaccounts", "services"], "verbs": OWNED_VERBS},
    {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": OWNED_VERBS},
    {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": OWNED_VERBS},
    {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"],
     "verbs": OWNED_VERBS},
    # A drain waits for the agent's election Lease (and its pods), which goes with it.
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "delete"]},
    # What the controller says on VirtualNodes.
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
]
