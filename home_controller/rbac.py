"""What the home controller does on the home cluster, as RBAC rules (the chart's roles are
checked against these by tests/charts/test_home_controller_chart.py): ForeignClusters are
cluster-scoped; the consumer Secrets and the VirtualNodes it creates are in its namespace."""

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
    # Virtual nodes: cordoned while their provider offers nothing.
    {"apiGroups": [""], "resources": ["nodes"], "verbs": [*READ_VERBS, "patch"]},
]

NAMESPACE_RULES: list[dict[str, Any]] = [
    # The consumer kubeconfig Secrets consent leaves (read as the consumer: the offer).
    {"apiGroups": [""], "resources": ["secrets"], "verbs": READ_VERBS},
    # The VirtualNode of an accepted provider.
    {"apiGroups": [OFFLOADING_GROUP], "resources": ["virtualnodes"],
     "verbs": [*READ_VERBS, "create"]},
]
