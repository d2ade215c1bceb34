"""A consumer's twin namespaces on the provider: the namespace the
enforcer makes for each entry of a NamespaceMap, the Role and RoleBinding that let the
consumer's identity work in it, what the map's status says of each entry and when an entry
not Accepted is tried again, which twins an edited map no longer wants, and which ShadowPods
the consumer may put there (admission checks them, and the enforcer again before it makes a
pod).

The objects of the consumer's tenant namespace (made by the chart or `annexctl peer`) are
`shared.tenancy`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from shared.api.builtin import RESOURCE_QUOTAS
from shared.api.namespace_map import MappingPhase
from shared.api.namespace_offloading import NamespaceMappingStrategy
from shared.api.quota import NamespacePolicy, PodPolicy
from shared.forge.namespace import remote_namespace_name
from shared.ownership import is_owned, ownership_labels
from shared.pod_policy import policy_problem
from shared.pod_security import twin_namespace_labels
from shared.tenancy import TENANT_NAMESPACE_PREFIX
from shared.wellknown import (
    CONSUMER_IDENTITY_ANNOTATION,
    CONSUMER_SERVICE_ACCOUNT,
    ORIGIN_CLUSTER_LABEL,
    TENANT_NAMESPACE_LABEL,
    TWIN_NAMESPACE_ROLE,
)

RBAC_GROUP = "rbac.authorization.k8s.io"


def consumer_subject(tenant_namespace: Mapping[str, Any]) -> dict[str, Any]:
    """The RBAC subject of the consumer identity its tenant namespace declares
    (`serviceaccount:<name>` in the tenant namespace, or `user:<name>`; default: the
    service account `consumer`)."""
    meta = tenant_namespace["metadata"]
    identity = (meta.get("annotations") or {}).get(CONSUMER_IDENTITY_ANNOTATION) or (
        f"serviceaccount:{CONSUMER_SERVICE_ACCOUNT}")
    kind, _, name = identity.partition(":")
    if kind.lower() == "user":
        return {"kind": "User", "apiGroup": RBAC_GROUP, "name": name}
    return {"kind": "ServiceAccount", "name": name, "namespace": meta["name"]}


def twin_namespace(name: str, consumer: str, provider: str, policy: PodPolicy
                   ) -> dict[str, Any]:
    """The twin namespace, labelled from the start with its owner and its consumer's Pod
    Security level: no pod of the consumer ever runs in it unchecked."""
    return {"metadata": {"name": name, "labels": {**ownership_labels(consumer, provider),
                                                  **twin_namespace_labels(policy)}}}


def twin_role_binding(namespace: str, consumer: str, provider: str, subject: Mapping[str, Any],
                      cluster_role: str) -> dict[str, Any]:
    """Binds the consumer ClusterRole `cluster_role` (the chart's; the enforcer may only bind
    it, not grant its rules) to the consumer's identity (`consumer_subject`) in its twin
    namespace."""
    return {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "RoleBinding",
            "metadata": {"name": TWIN_NAMESPACE_ROLE, "namespace": namespace,
                         "labels": ownership_labels(consumer, provider)},
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": cluster_role},
            "subjects": [dict(subject)]}


def role_ref_changed(current: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    """True when a RoleBinding must be deleted and made again: its roleRef is immutable."""
    return "roleRef" in desired and current.get("roleRef") != desired["roleRef"]


def rbac_patch(current: Mapping[str, Any], desired: Mapping[str, Any]) -> dict[str, Any] | None:
    """The merge patch bringing a RoleBinding's subjects back to `desired` (they are wholly the
    enforcer's), or None when they match."""
    if current.get("subjects") == desired.get("subjects"):
        return None
    return {"subjects": desired.get("subjects")}


def pod_security_labels_patch(namespace: Mapping[str, Any], policy: PodPolicy
                              ) -> dict[str, Any] | None:
    """The merge patch bringing a twin namespace's Pod Security labels to its consumer's
    `policy` (a level changed in the Quota, or a label changed by hand), or None when they
    match or the namespace is being deleted."""
    meta = namespace["metadata"]
    if meta.get("deletionTimestamp"):
        return None
    labels = meta.get("labels") or {}
    changed = {k: v for k, v in twin_namespace_labels(policy).items() if labels.get(k) != v}
    return {"metadata": {"labels": changed}} if changed else None


def mapping_entry(remote: str, phase: MappingPhase, message: str | None = None
                  ) -> dict[str, Any]:
    """One entry of a NamespaceMap's `status.currentMapping`."""
    entry: dict[str, Any] = {"remoteNamespace": remote, "phase": phase.value}
    if message is not None:
        entry["message"] = message
    return entry


def unusable_twin(existing: Mapping[str, Any] | None, remote: str, consumer: str,
                  provider: str) -> dict[str, Any] | None:
    """The mapping entry of a twin namespace that cannot serve the consumer as it stands (a
    namespace of that name that is not ours: CreationLoopBackOff; ours but being deleted:
    Terminating), or None: absent (to be made) or ours."""
    if existing is None:
        return None
    if not is_owned(existing, consumer, provider):
        return mapping_entry(remote, MappingPhase.CREATION_LOOP_BACK_OFF,
                             f"namespace {remote!r} already exists and is not managed by "
                             f"annex for consumer {consumer!r}")
    if existing["metadata"].get("deletionTimestamp"):
        return mapping_entry(remote, MappingPhase.TERMINATING)
    return None


def named_twins(desired: Mapping[str, str], current: Mapping[str, Mapping[str, Any]]
                ) -> set[str]:
    """The namespaces a NamespaceMap names: those its spec wants and those its status records.
    A change of any of them (made, taken by somebody else, terminating, gone) may change what
    the map's reconcile does."""
    return {str(remote) for remote in desired.values() if remote} | {
        str(entry.get("remoteNamespace")) for entry in current.values()
        if entry.get("remoteNamespace")}


def retired_twins(desired: Mapping[str, str], current: Mapping[str, Mapping[str, Any]]
                  ) -> list[str]:
    """The twin namespaces recorded in `current` (status.currentMapping) that `desired` no
    longer wants, to delete; never a name the enforcer could not make (CreationLoopBackOff:
    somebody else's namespace)."""
    wanted = set(desired.values())
    retired = []
    for home, entry in current.items():
        remote = entry.get("remoteNamespace")
        if not remote or desired.get(home) == remote or remote in wanted:
            continue
        if entry.get("phase") == MappingPhase.CREATION_LOOP_BACK_OFF.value:
            continue
        retired.append(str(remote))
    return retired


def origin_problem(labels: Mapping[str, str], namespace: str,
                   namespace_consumer: str | None) -> str | None:
    """Why a ShadowPod's origin label does not fit the namespace it is in (`namespace_consumer`:
    the consumer whose twin namespace it is, None for any other namespace), or None."""
    origin = labels.get(ORIGIN_CLUSTER_LABEL)
    if not origin:
        return f"the {ORIGIN_CLUSTER_LABEL} label is required"
    if namespace_consumer is None:
        return f"namespace {namespace!r} does not belong to any consumer"
    if origin != namespace_consumer:
        return (f"the {ORIGIN_CLUSTER_LABEL} label {origin!r} does not match the consumer "
                f"{namespace_consumer!r} namespace {namespace!r} belongs to")
    return None


def pod_policy_problem(policy: PodPolicy, consumer: str, shadowpod: Mapping[str, Any],
                       old: Mapping[str, Any] | None = None) -> str | None:
    """Why the ShadowPod's pod breaks its consumer's pod `policy`, or None. An update (`old`:
    the version it replaces) is refused only for what it adds: a pod admitted under a looser
    policy may still change its images, labels and status after the provider tightened it (as
    the PodSecurity plugin exempts such updates)."""
    def pod(version: Mapping[str, Any]) -> Mapping[str, Any]:
        return (version.get("spec") or {}).get("pod") or {}

    def annotations(version: Mapping[str, Any]) -> Mapping[str, str]:
        return (version.get("metadata") or {}).get("annotations") or {}
    found = policy_problem(
        policy, pod(shadowpod), annotations(shadowpod),
        old_spec=None if old is None else pod(old),
        old_annotations=None if old is None else annotations(old))
    return None if found is None else f"spec.pod is not allowed for consumer {consumer!r}: {found}"


# --- which twin namespaces a consumer may have (its Quota's namespacePolicy) ---------------

SYSTEM_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})
OBJECT_COUNTS_QUOTA = "annex-consumer"
"""The ResourceQuota the enforcer keeps in each twin namespace (namespacePolicy.objectCounts)."""


def name_allowed(name: str, allowed_names: Sequence[str]) -> bool:
    """Whether `name` is one of `allowed_names`: equal, or starting with what precedes an
    entry's trailing `*`."""
    return any(name == allowed or (allowed.endswith("*") and name.startswith(allowed[:-1]))
               for allowed in allowed_names)


def _default_name(home: str, consumer: str) -> str | None:
    try:
        return remote_namespace_name(home, NamespaceMappingStrategy.DEFAULT_NAME, consumer)
    except ValueError:
        return None


def twin_name_problem(home: str, remote: str, consumer: str, policy: NamespacePolicy
                      ) -> str | None:
    """Why the consumer may not have `remote` as the twin of its namespace `home`, or None.

    The rule: a twin name ends in `-<consumer id>` (as the DefaultName strategy makes names)
    or is the shortened DefaultName of its own home namespace, or it matches
    namespacePolicy.allowedNames; and whatever allowedNames says, it is never a system
    namespace (`default`, `kube-*`) nor a tenant namespace's name."""
    if remote in SYSTEM_NAMESPACES or remote.startswith("kube-"):
        return (f"namespace {remote!r} is a system namespace: it is never a consumer's twin "
                f"namespace")
    if remote.startswith(TENANT_NAMESPACE_PREFIX):
        return (f"namespace {remote!r} has the name of a tenant namespace "
                f"({TENANT_NAMESPACE_PREFIX}*): it is never a consumer's twin namespace")
    if (remote.endswith(f"-{consumer}") or remote == _default_name(home, consumer)
            or name_allowed(remote, policy.allowed_names)):
        return None
    allowed = ", ".join(policy.allowed_names) or "none"
    return (f"namespace {remote!r} does not carry the consumer's cluster id (a twin name ends in "
            f"'-{consumer}', as the DefaultName mapping strategy makes them) and is not in the "
            f"consumer's namespacePolicy.allowedNames ({allowed})")


def tenant_twin_problem(existing: Mapping[str, Any] | None, remote: str) -> str | None:
    """Why an existing namespace is a tenant namespace (its label), never a twin, or None."""
    labels = ((existing or {}).get("metadata") or {}).get("labels") or {}
    if labels.get(TENANT_NAMESPACE_LABEL) != "true":
        return None
    return (f"namespace {remote!r} is a tenant namespace ({TENANT_NAMESPACE_LABEL}): it is never "
            f"a consumer's twin namespace")


def refused_twins(desired: Mapping[str, str], consumer: str, policy: NamespacePolicy,
                  made: Callable[[str], bool], others: int) -> dict[str, dict[str, Any]]:
    """The entries of a NamespaceMap's `desiredMapping` not to make, each with its mapping
    entry (CreationLoopBackOff, the message naming the rule): names `twin_name_problem`
    refuses, and those beyond namespacePolicy.maxTwinNamespaces. `made(name)`: the consumer
    has that twin already (made before: it stays, whatever the rules say now, and counts
    first); `others`: its twins of no entry of this map. Beyond the cap, the entries whose
    twin is made come first, then the others by home namespace name."""
    refused: dict[str, dict[str, Any]] = {}
    candidates = []
    for home, remote in desired.items():
        problem = None if made(remote) else twin_name_problem(home, remote, consumer, policy)
        if problem is not None:
            refused[home] = mapping_entry(remote, MappingPhase.CREATION_LOOP_BACK_OFF, problem)
        else:
            candidates.append(home)
    candidates.sort(key=lambda home: (not made(desired[home]), home))
    room = max(policy.max_twin_namespaces - others, 0)
    for home in candidates[room:]:
        refused[home] = mapping_entry(desired[home], MappingPhase.CREATION_LOOP_BACK_OFF, (
            f"consumer {consumer!r} may have at most {policy.max_twin_namespaces} twin "
            f"namespaces (namespacePolicy.maxTwinNamespaces): {desired[home]!r} would be one "
            f"more"))
    return refused


def twin_resource_quota(namespace: str, consumer: str, provider: str,
                        object_counts: Mapping[str, str]) -> dict[str, Any]:
    """The ResourceQuota bounding what the consumer stores in its twin namespace (the
    provider's etcd): `hard` = namespacePolicy.objectCounts. The consumer's identity may not
    change ResourceQuotas."""
    return {**RESOURCE_QUOTAS.type_meta(),
            "metadata": {"name": OBJECT_COUNTS_QUOTA, "namespace": namespace,
                         "labels": ownership_labels(consumer, provider)},
            "spec": {"hard": dict(object_counts)}}


def resource_quota_patch(current: Mapping[str, Any], desired: Mapping[str, Any]
                         ) -> dict[str, Any] | None:
    """The merge patch bringing a twin's ResourceQuota's `hard` to `desired`'s (counts the
    policy no longer names are removed), or None when they match."""
    have = (current.get("spec") or {}).get("hard") or {}
    want = desired["spec"]["hard"]
    if have == want:
        return None
    return {"spec": {"hard": {**{name: None for name in have if name not in want}, **want}}}
