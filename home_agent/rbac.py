"""What the agent does on the home cluster, as RBAC rules: the chart's ClusterRole is checked
against `HOME_AGENT_RULES` by a test, so that a new API call without a new permission fails
there and not in production."""

from __future__ import annotations

from typing import Any

from shared.wellknown import OFFLOADING_GROUP

READ_VERBS = ["get", "list", "watch"]

HOME_AGENT_RULES: list[dict[str, Any]] = [
    {"apiGroups": [""], "resources": ["pods"], "verbs": [*READ_VERBS, "delete"]},
    {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["update"]},
    {"apiGroups": [""], "resources": ["nodes"], "verbs": [*READ_VERBS, "create", "patch"]},
    {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]},
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create", "patch"]},
    {"apiGroups": [""], "resources": ["namespaces"], "verbs": [*READ_VERBS, "patch"]},
    # create, patch: Events about home objects (a repeat counted on the Event posted before);
    # the rest: remote Events reflected home (our copies are listed, not watched, updated when
    # the remote count changes, deleted with the remote Event).
    {"apiGroups": [""], "resources": ["events"],
     "verbs": ["get", "list", "create", "update", "patch", "delete"]},
    {"apiGroups": [""], "resources": ["configmaps", "secrets", "services"], "verbs": READ_VERBS},
    {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": READ_VERBS},
    {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses"], "verbs": READ_VERBS},
    # The storage fabric: the claims of the virtual storage class provisioned (their status:
    # a resize; create: the real claim of a local consumer), the home volumes standing for
    # their remote copies.
    {"apiGroups": [""], "resources": ["persistentvolumeclaims"],
     "verbs": [*READ_VERBS, "create"]},
    {"apiGroups": [""], "resources": ["persistentvolumeclaims/status"], "verbs": ["patch"]},
    {"apiGroups": [""], "resources": ["persistentvolumes"],
     "verbs": [*READ_VERBS, "create", "patch", "delete"]},
    # Token reflection: home tokens bound to offloaded pods, for their remote token Secrets.
    {"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"]},
    {"apiGroups": [OFFLOADING_GROUP], "resources": ["virtualnodes"], "verbs": READ_VERBS},
    {"apiGroups": [OFFLOADING_GROUP], "resources": ["virtualnodes/status"], "verbs": ["patch"]},
    {"apiGroups": [OFFLOADING_GROUP], "resources": ["namespaceoffloadings"],
     "verbs": [*READ_VERBS, "patch"]},
    {"apiGroups": [OFFLOADING_GROUP], "resources": ["namespaceoffloadings/status"],
     "verbs": ["patch"]},
    # The kubelet API authenticates bearer tokens and authorizes every caller at home, as a
    # kubelet's Webhook modes do.
    {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
    {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"],
     "verbs": ["create"]},
    # --kubelet-serving-cert-from-csr: its serving certificate requested and read back (an
    # administrator approves it: nothing here may approve or sign).
    {"apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests"],
     "verbs": ["create", "get"]},
]


LEADER_ELECTION_RULES: list[dict[str, Any]] = [
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
     "verbs": ["get", "create", "update"]},
]
"""What the replicas of an agent do to their election Lease (annex/leader.py): a Role in the
chart's namespace (RBAC cannot confine create to a name)."""


def kubeconfig_secret_rules(secret_name: str) -> list[dict[str, Any]]:
    """What the agent may do to its remote kubeconfig Secret beyond reading it: write a renewed
    token back (home_agent/credentials.py). A Role in the chart's namespace, for that Secret
    only."""
    return [{"apiGroups": [""], "resources": ["secrets"], "resourceNames": [secret_name],
             "verbs": ["patch"]}]
