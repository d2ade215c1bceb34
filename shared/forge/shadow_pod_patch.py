"""A ShadowPod brought to its home pod as a running pod allows (`shadow_pod_patch`: labels,
annotations, container images, activeDeadlineSeconds, tolerations added), and the ephemeral
containers `kubectl debug` adds (`added_ephemeral_containers`, `shadow_pod_ephemeral_patch`):
the API server refuses other changes to a pod, which a new pod picks up."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.forge.json_copy import copied
from shared.forge.metadata import remote_metadata
from shared.forge.pod import EPHEMERAL_CONTAINERS, PodForgeConfig, remote_containers
from shared.forge.pod_placement import remote_pod_tolerations
from shared.forge.pod_tokens import api_server_support
from shared.wellknown import TRACEPARENT_ANNOTATION


def _active_deadline_update(current: Any, desired: Any) -> Any:
    """activeDeadlineSeconds may be set or lowered on a running pod, never raised or unset."""
    if desired is None:
        return current
    if current is None or desired < current:
        return desired
    return current


_IMAGED_CONTAINERS = ("containers", "initContainers")


def _updatable_spec(local_spec: Mapping[str, Any], config: PodForgeConfig) -> dict[str, Any]:
    """The fields of `remote_pod_spec` whose changes a running pod accepts, without forging
    the rest: the containers' names and images (the forge keeps both), activeDeadlineSeconds
    (copied) and the tolerations (ephemeral containers: `shadow_pod_ephemeral_patch`)."""
    updatable: dict[str, Any] = {
        key: [{"name": c.get("name"), "image": c.get("image")} for c in local_spec.get(key) or []]
        for key in _IMAGED_CONTAINERS
    }
    updatable["activeDeadlineSeconds"] = local_spec.get("activeDeadlineSeconds")
    updatable["tolerations"] = remote_pod_tolerations(local_spec, config.offloading_patch)
    return updatable


def _accepted_changes(
    current_remote_spec: Mapping[str, Any], desired: Mapping[str, Any]
) -> dict[str, Any] | None:
    """`current_remote_spec` with the changes of the forged spec `desired` (or its
    `_updatable_spec`) that a running pod accepts, or None when there are none. Copied only
    when something changes: this runs at each status change of every offloaded pod."""
    images: list[tuple[str, int, Any]] = []
    for key in _IMAGED_CONTAINERS:
        # A pod's containers cannot be added or removed, so they pair up by position.
        pairs = zip(current_remote_spec.get(key) or [], desired.get(key) or [], strict=False)
        for index, (container, wanted) in enumerate(pairs):
            image = wanted.get("image")
            if (container.get("name") == wanted.get("name") and image is not None
                    and container.get("image") != image):
                images.append((key, index, image))
    current_deadline = current_remote_spec.get("activeDeadlineSeconds")
    deadline = _active_deadline_update(current_deadline, desired.get("activeDeadlineSeconds"))
    current_tolerations = list(current_remote_spec.get("tolerations") or [])
    added = [t for t in desired.get("tolerations") or [] if t not in current_tolerations]
    if not images and deadline == current_deadline and not added:
        return None
    updated = copied(dict(current_remote_spec))
    for key, index, image in images:
        updated[key][index]["image"] = image
    if deadline is not None:
        updated["activeDeadlineSeconds"] = deadline
    if added:
        updated["tolerations"] = current_tolerations + copied(added)
    return None if updated == current_remote_spec else updated


def added_ephemeral_containers(current: Mapping[str, Any], local_pod: Mapping[str, Any],
                               config: PodForgeConfig) -> list[dict[str, Any]]:
    """The home pod's ephemeral containers (`kubectl debug`) the ShadowPod `current` lacks, by
    name, forged as the pod's containers are."""
    if not (local_pod.get("spec") or {}).get(EPHEMERAL_CONTAINERS):
        return []  # most pods: nothing forged
    present = {c.get("name") for c in
               ((current.get("spec") or {}).get("pod") or {}).get(EPHEMERAL_CONTAINERS) or []}
    support = api_server_support(local_pod, config.enable_apiserver_support)[0]
    return [c for c in remote_containers(local_pod, EPHEMERAL_CONTAINERS, support, config)
            if c.get("name") not in present]


def shadow_pod_ephemeral_patch(current: Mapping[str, Any],
                               added: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The merge patch adding the ephemeral containers `added` to the ShadowPod `current`
    (after those it has: the API server lets none be changed or removed), guarded by its
    resourceVersion; None when there are none. Its own write: a container the provider's
    policy refuses must not hold back the pod's other changes."""
    metadata = current.get("metadata") or {}
    if not added or metadata.get("deletionTimestamp"):
        return None
    have = ((current.get("spec") or {}).get("pod") or {}).get(EPHEMERAL_CONTAINERS) or []
    return {"metadata": {"resourceVersion": metadata.get("resourceVersion")},
            "spec": {"pod": {EPHEMERAL_CONTAINERS: [*copied(list(have)), *copied(added)]}}}


def _map_patch(current: Mapping[str, str], wanted: Mapping[str, str]) -> dict[str, Any]:
    """The merge patch turning the labels (or annotations) `current` into `wanted`."""
    patch: dict[str, Any] = {k: v for k, v in wanted.items() if current.get(k) != v}
    patch.update({k: None for k in current if k not in wanted})
    return patch


def shadow_pod_patch(
    current: Mapping[str, Any], local_pod: Mapping[str, Any], config: PodForgeConfig
) -> dict[str, Any] | None:
    """The merge patch bringing the ShadowPod `current` to the home pod: the labels and
    annotations `shadow_pod` gives it (keys it no longer gives removed) and the spec changes a
    running pod accepts (container images, activeDeadlineSeconds lowered or set, tolerations
    added: the API server refuses other changes to a pod, which a new pod picks up), guarded
    by `current`'s resourceVersion. Ephemeral containers: `shadow_pod_ephemeral_patch`.
    None when there is nothing to write, or while the ShadowPod is being deleted."""
    metadata = current.get("metadata") or {}
    if metadata.get("deletionTimestamp"):
        return None
    # What `shadow_pod` would give it, but only the parts compared: forging the whole spec at
    # each status change of every pod was most of the pods' reconciles.
    desired_metadata = remote_metadata(local_pod, str(metadata.get("namespace", "")),
                                       config.reflection)
    patch: dict[str, Any] = {}
    spec = _accepted_changes((current.get("spec") or {}).get("pod") or {},
                             _updatable_spec(local_pod.get("spec") or {}, config))
    if spec is not None:
        patch["spec"] = {"pod": spec}
    for key in ("labels", "annotations"):
        current_map = metadata.get(key) or {}
        if TRACEPARENT_ANNOTATION in current_map:  # the agent's trace, not the pod's annotation
            current_map = {k: v for k, v in current_map.items() if k != TRACEPARENT_ANNOTATION}
        change = _map_patch(current_map, desired_metadata.get(key) or {})
        if change:
            patch.setdefault("metadata", {})[key] = change
    if not patch:
        return None
    patch.setdefault("metadata", {})["resourceVersion"] = metadata.get("resourceVersion")
    return patch
