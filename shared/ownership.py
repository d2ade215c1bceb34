"""The ownership test: every object annex creates remotely carries the origin/destination pair.

An object without the pair is somebody else's and is never modified or deleted.
"""

from collections.abc import Mapping
from typing import Any

from shared.wellknown import DESTINATION_CLUSTER_LABEL, ORIGIN_CLUSTER_LABEL


def ownership_labels(origin_cluster_id: str, destination_cluster_id: str) -> dict[str, str]:
    """The labels that mark a remote object as created by `origin` for `destination`."""
    return {
        ORIGIN_CLUSTER_LABEL: origin_cluster_id,
        DESTINATION_CLUSTER_LABEL: destination_cluster_id,
    }


def ownership_selector(origin_cluster_id: str, destination_cluster_id: str) -> str:
    """A label selector for exactly the objects `ownership_labels` marks."""
    labels = ownership_labels(origin_cluster_id, destination_cluster_id)
    return ",".join(f"{key}={value}" for key, value in sorted(labels.items()))


def is_owned(obj: Mapping[str, Any], origin_cluster_id: str, destination_cluster_id: str) -> bool:
    """True when `obj` (a Kubernetes object as a dict) is ours to modify or delete."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return (
        labels.get(ORIGIN_CLUSTER_LABEL) == origin_cluster_id
        and labels.get(DESTINATION_CLUSTER_LABEL) == destination_cluster_id
    )
