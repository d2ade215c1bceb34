"""A consumer's twin namespaces on the provider (DESIGN.md sections 6 and 7): the namespace the
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

from shared.api.namespace_map import MappingPhase
from shared.api.quota import PodPolicy
from shared.ownership import is_owned, ownership_labels
from shared.pod_policy import policy_problem, twin_namespace_labels
from shared.wellknown import (
    CONSUMER_IDENTITY_ANNOTATION,
    CONSUMER_SERVICE_ACCOUNT,
    ORIGIN_CLUSTER_LABEL,
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


def twin_role(namespace: str, consumer: str, provider: str,
              rules: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What the consumer's identity may do in its twin namespace (`rules`: the enforcer's
    remote_enforcer.rbac.TWIN_NAMESPACE_RULES, which it must hold itself to grant)."""
    return {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "Role",
            "metadata": _metadata(namespace, consumer, provider),
            "rules": [dict(rule) for rule in rules]}


def twin_role_binding(namespace: str, consumer: str, provider: str,
                      subject: Mapping[str, Any]) -> dict[str, Any]:
    """Binds `twin_role` to the consumer's identity (`consumer_subject`)."""
    return {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "RoleBinding",
            "metadata": _metadata(namespace, consumer, provider),
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": TWIN_NAMESPACE_ROLE},
            "subjects": [dict(subject)]}


def _metadata(namespace: str, consumer: str, provider: str) -> dict[str, Any]:
    return {"name": TWIN_NAMESPACE_ROLE, "namespace": namespace,
            "labels": ownership_labels(consumer, provider)}


def role_ref_changed(current: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    """True when a RoleBinding must be deleted and made again: its roleRef is immutable."""
    return "roleRef" in desired and current.get("roleRef") != desired["roleRef"]


def rbac_patch(current: Mapping[str, Any], desired: Mapping[str, Any]) -> dict[str, Any] | None:
    """The merge patch bringing a Role's rules or a RoleBinding's subjects back to `desired`
    (they are wholly the enforcer's), or None when they match."""
    fields = [field for field in ("rules", "subjects") if field in desired]
    if all(current.get(field) == desired[field] for field in fields):
        return None
    return {field: desired[field] for field in fields}


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


# A twin of ours being deleted is gone within seconds: its map is converged again this soon.
TERMINATING_RETRY_SECONDS = 2.0


def terminating_twins(mapping: Mapping[str, Mapping[str, Any]]) -> str | None:
    """The entries of `mapping` (a NamespaceMap's status.currentMapping as just written) waiting
    for a twin of ours to be deleted, to converge again soon; None when there are none."""
    waiting = [f"{home} → {entry.get('remoteNamespace')}: Terminating"
               for home, entry in sorted(mapping.items())
               if entry.get("phase") == MappingPhase.TERMINATING.value]
    return "; ".join(waiting) or None


def needs_resync(desired: Mapping[str, str], current: Mapping[str, Mapping[str, Any]],
                 twin_exists: Callable[[str], bool]) -> bool:
    """Whether the periodic resync must converge a map: an entry not recorded or not Accepted
    (a name somebody else holds), or an Accepted twin namespace that no longer exists. A map
    that is as it should be costs no API request."""
    if set(desired) != set(current):
        return True
    return any(entry.get("phase") != MappingPhase.ACCEPTED.value
               or not twin_exists(str(entry.get("remoteNamespace")))
               for entry in current.values())


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
