"""What the agent does on the home cluster, as RBAC rules: the chart's ClusterRole is checked
against `home_agent_rules` by a test, so that a new API call without a new permission fails
there and not in production.

Each agent runs as its own ServiceAccount (one per VirtualNode). What every agent of a release
shares is bound to the release namespace's ServiceAccounts group: whoever may run a pod there
may run it as any of its accounts, so a narrower subject would confine nobody; the rights of
one agent alone (its kubeconfig Secret) are bound to its own account."""

from __future__ import annotations

from typing import Any

# What one agent does to its own objects: follow its remote kubeconfig Secret (a list and watch
# by `metadata.name`, which RBAC authorizes as that name) and write a renewed token back
# (home_agent/credentials.py), read its kubelet Service (home_agent/kubelet_service.py). A Role
# for those only, bound to that agent's ServiceAccount only; the chart's agents and the home
# controller's (shared/forge/agent.py) get the same.
from shared.forge.agent import own_object_rules as own_object_rules
from shared.wellknown import OFFLOADING_GROUP

READ_VERBS = ["get", "list", "watch"]

HOME_AGENT_RULES: list[dict[str, Any]] = [
    # The pods bound to the virtual node: watched (a field selector: a kubelet's reads), their
    # status written and deleted (the home controller's admission webhook holds each agent to
    # its own node's pods, home_controller/agent_admission.py).
    {"apiGroups": [""], "resources": ["pods"], "verbs": [*READ_VERBS, "delete"]},
    {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["update"]},
    # The virtual nodes (a withdrawn pool's deleted once no pod is bound to it).
    {"apiGroups": [""], "resources": ["nodes"],
     "verbs": [*READ_VERBS, "create", "patch", "delete"]},
    {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]},
    # Offloaded namespaces are labelled for the pod webhook's namespaceSelector (that label
    # only: the admission webhook).
    {"apiGroups": [""], "resources": ["namespaces"], "verbs": [*READ_VERBS, "patch"]},
    # Events about home objects (a repeat counted on the Event posted before), as a kubelet
    # posts them; the reflected copies are the offloaded namespaces' (below).
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
    # The storage fabric's home volumes, standing for their remote copies (only those of the
    # virtual provisioner on its own node: the admission webhook).
    {"apiGroups": [""], "resources": ["persistentvolumes"],
     "verbs": [*READ_VERBS, "create", "patch", "delete"]},
    {"apiGroups": [OFFLOADING_GROUP], "resources": ["virtualnodes"], "verbs": READ_VERBS},
    {"apiGroups": [OFFLOADING_GROUP], "resources": ["virtualnodes/status"], "verbs": ["patch"]},
    # Which namespaces are offloaded; its own finalizer and its cluster's status on each.
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
"""The agents' ClusterRole: what a virtual kubelet needs cluster-wide. No Secret, ConfigMap,
Service or claim of any namespace: those are read in the offloaded namespaces only."""

OFFLOADED_NAMESPACE_RULES: list[dict[str, Any]] = [
    # Resource reflection: the home objects copied to the twin namespaces.
    {"apiGroups": [""], "resources": ["configmaps", "services"], "verbs": READ_VERBS},
    {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": READ_VERBS},
    {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses"], "verbs": READ_VERBS},
    # The storage fabric: the claims of the virtual storage class provisioned (their status:
    # a resize; create: the real claim of a local consumer).
    {"apiGroups": [""], "resources": ["persistentvolumeclaims"],
     "verbs": [*READ_VERBS, "create"]},
    {"apiGroups": [""], "resources": ["persistentvolumeclaims/status"], "verbs": ["patch"]},
    # Remote Events reflected home: their copies listed (not watched), updated when the
    # remote count changes, deleted with the remote Event.
    {"apiGroups": [""], "resources": ["events"], "verbs": ["get", "list", "update", "delete"]},
]
"""What the agents do in an offloaded namespace: the chart's `<release>-offloaded-namespaces`
ClusterRole, which the home controller binds in each offloaded namespace for the agents whose
virtual node its NamespaceOffloading selects (home_controller/namespace_grants.py)."""

SECRET_READ_RULE: dict[str, Any] = {
    "apiGroups": [""], "resources": ["secrets"], "verbs": READ_VERBS}
"""The Secret reflection: the home Secrets copied to the twin namespaces. Without it the agent
reads no Secret but its kubeconfig's."""
TOKEN_REQUEST_RULE: dict[str, Any] = {
    "apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"]}
"""Token reflection: home tokens bound to offloaded pods, for their remote token Secrets. Held
only with API server support and token reflection on (and the admission webhook: only for pods
bound to the agent's own node)."""


def offloaded_namespace_rules(*, reflects_secrets: bool = True,
                              reflects_tokens: bool = True) -> list[dict[str, Any]]:
    """`OFFLOADED_NAMESPACE_RULES`, with the Secret reads and the token requests only when the
    release reflects them."""
    return [*OFFLOADED_NAMESPACE_RULES, *([SECRET_READ_RULE] if reflects_secrets else []),
            *([TOKEN_REQUEST_RULE] if reflects_tokens else [])]


APISERVER_ADDRESS_RULES: list[dict[str, Any]] = [
    {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list"]},
    {"apiGroups": [""], "resources": ["services"], "resourceNames": ["kubernetes"],
     "verbs": ["get"]},
]
"""Where offloaded pods reach the home API server, read once at start with API server support
(home_agent/apiserver_address.py): a Role in `default`, where the `kubernetes` Service is."""

NODE_LEASE_RULES: list[dict[str, Any]] = [
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create", "patch"]},
]
"""The virtual node's heartbeat Lease (home_agent/heartbeat.py): a Role in kube-node-lease, so
that no agent may touch the Leases of other namespaces (the controller-manager's and the
scheduler's leader Leases in kube-system)."""

LEADER_ELECTION_RULES: list[dict[str, Any]] = [
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
     "verbs": ["get", "watch", "create", "update"]},
]
"""What the replicas of an agent do to their election Lease (annex/leader.py; a standby
watches it): a Role in the chart's namespace (RBAC cannot confine create to a name, and the
agents' names are not known to the chart)."""
