"""Where an offloaded pod may run on the provider: its tolerations (never the virtual node's, nor
the home node-health ones), the VirtualNode's offloadingPatch (node selector, node affinity,
tolerations, runtime class) and the anti-affinity presets of its annotations
(`liqo.io/anti-affinity-preset`: propagate, soft or hard; `liqo.io/anti-affinity-labels`).
The pod's own spec is forged in `shared.forge.pod`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from shared.api.offloading_patch import OffloadingPatch
from shared.forge.json_copy import copied
from shared.forge.metadata import annotations_of, without_keys
from shared.forge.offloading_strategy import is_node_health_toleration
from shared.wellknown import (
    ANTI_AFFINITY_LABELS_ANNOTATION,
    ANTI_AFFINITY_PRESET_ANNOTATION,
    HOSTNAME_LABEL,
    LABELS_NOT_PROPAGATED_FROM_POD,
    REMOTE_RUNTIME_CLASS_NAME_ANNOTATION,
    VIRTUAL_NODE_TAINT_KEY,
)

ANTI_AFFINITY_PROPAGATE = "propagate"
ANTI_AFFINITY_SOFT = "soft"
ANTI_AFFINITY_HARD = "hard"


def remote_tolerations(tolerations: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The pod's tolerations without the virtual-node one: tolerating it remotely would let the
    pod be offloaded again from the provider to a third cluster."""
    return [copied(dict(t)) for t in tolerations if t.get("key") != VIRTUAL_NODE_TAINT_KEY]


def anti_affinity_labels(
    labels: Mapping[str, str], selected_keys: str | None
) -> tuple[dict[str, str], list[str]]:
    """The labels a soft/hard preset selects on, and warnings about the selection.

    Without `liqo.io/anti-affinity-labels`: the pod's labels minus those that differ between
    replicas (pod-template-hash, controller-revision-hash, statefulset pod-name). With it: only
    the comma-separated keys it lists; blanks are ignored, keys the pod does not have reported.
    """
    if selected_keys is None:
        return without_keys(labels, LABELS_NOT_PROPAGATED_FROM_POD), []
    warnings = []
    chosen: dict[str, str] = {}
    for key in (part.strip() for part in selected_keys.split(",")):
        if not key:
            continue
        if key in labels:
            chosen[key] = labels[key]
        else:  # also what a malformed key comes to: the apiserver let no such label through
            warnings.append(f"{ANTI_AFFINITY_LABELS_ANNOTATION}: the pod has no label {key!r}")
    return chosen, warnings


def pod_anti_affinity(
    local_pod: Mapping[str, Any], labels: Mapping[str, str]
) -> tuple[dict[str, Any] | None, list[str]]:
    """The remote podAntiAffinity the pod's preset annotation asks for, and warnings."""
    annotations = (local_pod.get("metadata") or {}).get("annotations") or {}
    preset = annotations.get(ANTI_AFFINITY_PRESET_ANNOTATION)
    if preset is None:
        return None, []
    if preset == ANTI_AFFINITY_PROPAGATE:
        affinity = (local_pod.get("spec") or {}).get("affinity") or {}
        anti_affinity = affinity.get("podAntiAffinity")
        return (copied(anti_affinity) if anti_affinity else None), []
    if preset not in (ANTI_AFFINITY_SOFT, ANTI_AFFINITY_HARD):
        return None, [
            f"unknown {ANTI_AFFINITY_PRESET_ANNOTATION} value {preset!r} ignored "
            f"(expected {ANTI_AFFINITY_PROPAGATE}, {ANTI_AFFINITY_SOFT} or {ANTI_AFFINITY_HARD})"
        ]
    selected, warnings = anti_affinity_labels(
        labels, annotations.get(ANTI_AFFINITY_LABELS_ANNOTATION)
    )
    if not selected:
        warnings.append(
            f"{ANTI_AFFINITY_PRESET_ANNOTATION}={preset} not applied: no pod label to select on"
        )
        return None, warnings
    term = {"topologyKey": HOSTNAME_LABEL, "labelSelector": {"matchLabels": selected}}
    if preset == ANTI_AFFINITY_SOFT:
        return {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "podAffinityTerm": term}
            ]
        }, warnings
    return {"requiredDuringSchedulingIgnoredDuringExecution": [term]}, warnings


def remote_pod_tolerations(
    local_spec: Mapping[str, Any], patch: OffloadingPatch | None
) -> list[dict[str, Any]]:
    """The remote pod's tolerations: the home pod's (`remote_tolerations`) but the node-health
    ones, then the offloadingPatch's it lacks.

    Not-ready/unreachable tolerations are about the virtual node (the pod webhook sets them, or
    DefaultTolerationSeconds): the remote API server gives the remote pod its own defaults."""
    tolerations = remote_tolerations(
        t for t in local_spec.get("tolerations") or [] if not is_node_health_toleration(t))
    # Filtered too: whoever writes the patch, remote pods never tolerate virtual nodes.
    for toleration in remote_tolerations(patch.tolerations if patch is not None else ()):
        if toleration not in tolerations:
            tolerations.append(toleration)
    return tolerations


def apply_offloading_patch(spec: dict[str, Any], patch: OffloadingPatch | None) -> None:
    """The patch's scheduling constraints (its tolerations: `remote_pod_tolerations`)."""
    if patch is None:
        return
    if patch.node_selector:
        spec["nodeSelector"] = dict(patch.node_selector)
    node_affinity = (patch.affinity or {}).get("nodeAffinity")
    if node_affinity:
        spec.setdefault("affinity", {})["nodeAffinity"] = copied(node_affinity)


def remote_runtime_class(local_pod: Mapping[str, Any], patch: OffloadingPatch | None
                         ) -> str | None:
    """The remote pod's runtimeClassName: the pod's `liqo.io/remote-runtime-class-name`, else
    the offloadingPatch's, else none. The provider's podPolicy.allowedRuntimeClasses decides
    whether the pod may use it."""
    return (annotations_of(local_pod).get(REMOTE_RUNTIME_CLASS_NAME_ANNOTATION)
            or (patch.runtime_class_name if patch is not None else None) or None)
