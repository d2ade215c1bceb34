"""ShadowPod enforcement on the provider: the pod a ShadowPod asks for, the updates a pod allows,
and the ShadowPod status computed from the pod.

The ShadowPod status is the durable record: a terminal phase written there is never replaced,
and a ShadowPod whose status is terminal never gets a pod again (Liqo issues #1804 and #3096:
completed pods were recreated after an operator restart or a ShadowPod update).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from shared.api.shadowpod import SHADOWPOD
from shared.forge.json_copy import copied
from shared.pools import Pool, placed, placement
from shared.rfc3339 import rfc3339
from shared.wellknown import POD_CREATED_CONDITION, TERMINAL_PHASES, TRACEPARENT_ANNOTATION

EPHEMERAL_CONTAINERS = "ephemeralContainers"

# kube-apiserver's message for forbidden pod spec updates (ValidatePodUpdate, validation.go).
POD_UPDATE_FORBIDDEN = (
    "pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,"
    "`spec.tolerations` (only additions to existing tolerations)"
)


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def is_terminal(shadowpod: Mapping[str, Any]) -> bool:
    """True once the ShadowPod's recorded phase is Succeeded or Failed: no pod is made again."""
    return (shadowpod.get("status") or {}).get("phase") in TERMINAL_PHASES


def had_pod(shadowpod: Mapping[str, Any]) -> bool:
    """True when a pod for this ShadowPod existed before (its status was reported)."""
    status = shadowpod.get("status") or {}
    return bool(status.get("phase") or status.get("podStatus"))


def controller_reference(shadowpod: Mapping[str, Any]) -> dict[str, Any]:
    meta = _meta(shadowpod)
    return {
        "apiVersion": SHADOWPOD.api_version,
        "kind": SHADOWPOD.kind,
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def followed_fields(shadowpod: Mapping[str, Any]) -> tuple[Any, ...]:
    """What of a ShadowPod its pod follows (spec through the generation, labels, annotations,
    deletion): when this has not changed, a ShadowPod update is a status update."""
    meta = _meta(shadowpod)
    return (meta.get("generation"), sorted((meta.get("labels") or {}).items()),
            sorted((meta.get("annotations") or {}).items()), meta.get("deletionTimestamp"))


def desired_pod(shadowpod: Mapping[str, Any], pools: Sequence[Pool] = ()) -> dict[str, Any]:
    """The pod of the same name and namespace, controller-owned by the ShadowPod, on the nodes
    of the provider's `pools` its `spec.pool` allows (`shared.pools.placed`)."""
    meta = _meta(shadowpod)
    spec = (shadowpod.get("spec") or {})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "labels": dict(meta.get("labels") or {}),
            # The traceparent is the enforcer's parent span, nothing of the pod's.
            "annotations": {k: v for k, v in (meta.get("annotations") or {}).items()
                            if k != TRACEPARENT_ANNOTATION},
            "ownerReferences": [controller_reference(shadowpod)],
        },
        # A pod is created without ephemeral containers (the API server refuses them on
        # create): they are added afterwards (`ephemeral_containers_patch`).
        "spec": placed({key: copied(value) for key, value in (spec.get("pod") or {}).items()
                        if key != EPHEMERAL_CONTAINERS},
                       placement(pools, spec.get("pool"))),
    }


def is_controlled_by(pod: Mapping[str, Any], shadowpod: Mapping[str, Any]) -> bool:
    uid = _meta(shadowpod).get("uid")
    return any(ref.get("controller") and ref.get("uid") == uid
               for ref in _meta(pod).get("ownerReferences") or [])


def _map_patch(current: Mapping[str, str], desired: Mapping[str, str]) -> dict[str, str | None]:
    """A merge patch turning `current` into `desired` (None deletes a key)."""
    patch: dict[str, str | None] = {k: v for k, v in desired.items() if current.get(k) != v}
    patch.update({k: None for k in current if k not in desired})
    return patch


def _images(spec: Mapping[str, Any], field: str) -> list[Any]:
    return [c.get("image") for c in spec.get(field) or []]


def pod_patch(pod: Mapping[str, Any], shadowpod: Mapping[str, Any]) -> dict[str, Any] | None:
    """A strategic-merge patch applying the ShadowPod's labels, annotations and the spec changes a
    pod allows (images, activeDeadlineSeconds, added tolerations) to `pod`; None when it
    matches."""
    desired = desired_pod(shadowpod)
    patch: dict[str, Any] = {}
    for field in ("labels", "annotations"):
        changes = _map_patch(_meta(pod).get(field) or {}, desired["metadata"][field])
        if changes:
            patch.setdefault("metadata", {})[field] = changes
    current_spec, wanted = pod.get("spec") or {}, desired["spec"]
    spec: dict[str, Any] = {}
    for field in ("containers", "initContainers"):
        if _images(current_spec, field) != _images(wanted, field) and wanted.get(field):
            spec[field] = [{"name": c.get("name"), "image": c.get("image")}
                           for c in wanted[field]]
    if current_spec.get("activeDeadlineSeconds") != wanted.get("activeDeadlineSeconds"):
        spec["activeDeadlineSeconds"] = wanted.get("activeDeadlineSeconds")
    # A pod only accepts added tolerations, and admission adds its own (DefaultTolerationSeconds):
    # the ShadowPod's missing ones are appended to what the pod has (the list has no merge key,
    # so it is sent whole).
    current_tolerations = list(current_spec.get("tolerations") or [])
    missing = [t for t in wanted.get("tolerations") or [] if t not in current_tolerations]
    if missing:
        spec["tolerations"] = current_tolerations + missing
    if spec:
        patch["spec"] = spec
    return patch or None


def _without_mutable_fields(spec: Mapping[str, Any]) -> dict[str, Any]:
    blank = copied(dict(spec))
    for field in ("containers", "initContainers"):
        for container in blank.get(field) or []:
            container.pop("image", None)
    blank.pop("activeDeadlineSeconds", None)
    blank.pop("tolerations", None)
    blank.pop(EPHEMERAL_CONTAINERS, None)
    return blank


def _ephemeral_by_name(spec: Mapping[str, Any]) -> dict[str, Any]:
    return {str(c.get("name")): c for c in spec.get(EPHEMERAL_CONTAINERS) or []}


def forbidden_spec_change(old_pod_spec: Mapping[str, Any],
                          new_pod_spec: Mapping[str, Any]) -> str | None:
    """Why an update of a ShadowPod's `spec.pod` is refused, or None when a pod allows it (and
    its ephemeralcontainers subresource: ephemeral containers added, none changed or removed,
    what `kubectl debug` does)."""
    old_tolerations = old_pod_spec.get("tolerations") or []
    new_tolerations = new_pod_spec.get("tolerations") or []
    removed = [t for t in old_tolerations if t not in new_tolerations]
    if removed or _without_mutable_fields(old_pod_spec) != _without_mutable_fields(new_pod_spec):
        return f"spec.pod: Forbidden: {POD_UPDATE_FORBIDDEN}"
    new_ephemeral = _ephemeral_by_name(new_pod_spec)
    for name, container in _ephemeral_by_name(old_pod_spec).items():
        if new_ephemeral.get(name) != container:
            return (f"spec.pod.ephemeralContainers: Forbidden: existing ephemeral containers "
                    f'"{name}" may not be changed or removed')
    return None


def ephemeral_containers_patch(pod: Mapping[str, Any],
                               shadowpod: Mapping[str, Any]) -> dict[str, Any] | None:
    """The strategic merge patch of the pod's ephemeralcontainers subresource adding the
    ephemeral containers its ShadowPod lists and the pod lacks (by name), or None."""
    have = _ephemeral_by_name(pod.get("spec") or {})
    wanted = ((shadowpod.get("spec") or {}).get("pod") or {}).get(EPHEMERAL_CONTAINERS) or []
    missing = [copied(dict(c)) for c in wanted if str(c.get("name")) not in have]
    return {"spec": {EPHEMERAL_CONTAINERS: missing}} if missing else None


def shadowpod_status(shadowpod: Mapping[str, Any],
                     pod: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The ShadowPod status to write for the pod's current state, or None when nothing changes.

    A recorded terminal phase is final: a later pod state never overwrites it.
    """
    current = dict(shadowpod.get("status") or {})
    if pod is None or is_terminal(shadowpod) or (not current and _unreported(pod)):
        return None
    pod_status = dict(pod.get("status") or {})
    desired = {
        **current,
        "phase": pod_status.get("phase") or current.get("phase"),
        "nodeName": (pod.get("spec") or {}).get("nodeName") or current.get("nodeName"),
        "podStatus": pod_status,
        "observedGeneration": _meta(shadowpod).get("generation"),
        "conditions": _without_creation_failure(current) or None,  # the pod exists
    }
    desired = {k: v for k, v in desired.items() if v is not None}
    return None if desired == current else desired


def _unreported(pod: Mapping[str, Any]) -> bool:
    """The pod as created or just placed: no kubelet has reported it and the scheduler has
    said nothing but where it goes. That tells the home nothing (its pod is Pending and
    scheduled already); the status is first written once a kubelet reports the pod or the
    scheduler says why it cannot place it."""
    status = pod.get("status") or {}
    return (status.get("phase") in (None, "Pending") and not status.get("containerStatuses")
            and not status.get("initContainerStatuses")
            and all(c.get("type") == "PodScheduled" and c.get("status") == "True"
                    for c in status.get("conditions") or []))


def recreated_status(shadowpod: Mapping[str, Any]) -> dict[str, Any]:
    """The status after the enforcer made a new pod for a ShadowPod whose pod had vanished.

    Each container carries over the restarts the vanished pod had (as last reported into the
    ShadowPod status) plus one for the replacement, so that the home restart count never goes
    down when the new pod starts again from 0. Those restarts leave the reported podStatus,
    which is the vanished pod's until the replacement reports its own: counted in both, the
    home count would rise by them twice and fall back once the replacement reports.
    """
    status = dict(shadowpod.get("status") or {})
    status["recreations"] = int(status.get("recreations") or 0) + 1
    conditions = _without_creation_failure(status)
    if conditions:
        status["conditions"] = conditions
    else:
        status.pop("conditions", None)
    pod_status = dict(status.get("podStatus") or {})
    containers = [dict(c) for c in pod_status.get("containerStatuses") or []]
    last = {str(c.get("name")): int(c.get("restartCount") or 0) for c in containers}
    carried = dict(status.get("carriedRestarts") or {})
    for container in ((shadowpod.get("spec") or {}).get("pod") or {}).get("containers") or []:
        name = str(container.get("name"))
        carried[name] = int(carried.get(name) or 0) + last.get(name, 0) + 1
    status["carriedRestarts"] = carried
    if containers:
        status["podStatus"] = {**pod_status, "containerStatuses": [
            {**container, "restartCount": 0} for container in containers]}
    return status


def _without_creation_failure(status: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [dict(c) for c in status.get("conditions") or []
            if c.get("type") != POD_CREATED_CONDITION]


def creation_failed_status(shadowpod: Mapping[str, Any], reason: str, message: str,
                           now: datetime) -> dict[str, Any] | None:
    """The ShadowPod status recording that the API server refused to create its pod (condition
    `PodCreated` False, with the refusal's reason and message), or None when it records that
    already. A repeated refusal keeps the condition's lastTransitionTime."""
    status = dict(shadowpod.get("status") or {})
    previous = next((c for c in status.get("conditions") or []
                     if c.get("type") == POD_CREATED_CONDITION), None)
    since = (previous.get("lastTransitionTime") if previous and previous.get("status") == "False"
             else rfc3339(now))
    condition = {"type": POD_CREATED_CONDITION, "status": "False",
                 "reason": reason or "CreationFailed", "message": message,
                 "lastTransitionTime": since}
    if previous == condition:
        return None
    status["conditions"] = [*_without_creation_failure(status), condition]
    return status
